#include "engines/cpu/emulated_precision.h"

#include <cmath>
#include <cstdint>

#include "engines/cpu/bf16.h"
#include "engines/cpu/float_bits.h"

namespace speakerseg::cpu {
namespace {

// Keeps 10 of fp32's 23 mantissa bits, to nearest, ties to even (a carry may reach the exponent,
// and from the largest binade infinity). For finite x.
float keep_10_mantissa_bits(float x) {
  uint32_t bits = float_bits(x);
  bits += 0xfffu + ((bits >> 13) & 1u);
  return bits_float(bits & ~0x1fffu);
}

template <float (*Round)(float)>
void round_n(float* x, int n) {
  for (int i = 0; i < n; ++i) x[i] = Round(x[i]);
}

}  // namespace

const char* rounding_name(Rounding rounding) {
  switch (rounding) {
    case Rounding::kFp16:
      return "fp16";
    case Rounding::kBf16:
      return "bf16";
    case Rounding::kTf32:
      return "tf32";
    case Rounding::kNone:
      break;
  }
  return "none";
}

float round_to_fp16(float x) {
  const uint32_t magnitude = float_bits(x) & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) return x;  // infinity, NaN
  if (magnitude < 0x38800000u) {           // below 2^-14: fp16's subnormals, steps of 2^-24
    // x * 2^24 is exact (below 2^10); nearbyint rounds to nearest even in the default mode.
    return std::nearbyint(x * 0x1p24f) * 0x1p-24f;
  }
  const float r = keep_10_mantissa_bits(x);
  // 65504 is fp16's largest; what rounds beyond it (from 65520 on) overflows.
  return std::fabs(r) > 65504.f ? std::copysign(INFINITY, x) : r;
}

float round_to_bf16(float x) {
  return bits_float(static_cast<uint32_t>(to_bf16(x)) << 16);
}

float round_to_tf32(float x) {
  if ((float_bits(x) & 0x7fffffffu) >= 0x7f800000u) return x;  // infinity, NaN
  return keep_10_mantissa_bits(x);
}

float rounded(Rounding rounding, float x) {
  switch (rounding) {
    case Rounding::kFp16:
      return round_to_fp16(x);
    case Rounding::kBf16:
      return round_to_bf16(x);
    case Rounding::kTf32:
      return round_to_tf32(x);
    case Rounding::kNone:
      break;
  }
  return x;
}

RoundFunction round_function(Rounding rounding) {
  switch (rounding) {
    case Rounding::kFp16:
      return round_n<round_to_fp16>;
    case Rounding::kBf16:
      return round_n<round_to_bf16>;
    case Rounding::kTf32:
      return round_n<round_to_tf32>;
    case Rounding::kNone:
      break;
  }
  return nullptr;
}

void round_in_place(Rounding rounding, float* x, size_t n) {
  const RoundFunction f = round_function(rounding);
  if (!f) return;
  constexpr size_t kPiece = 1 << 20;
  for (size_t i = 0; i < n; i += kPiece)
    f(x + i, static_cast<int>(n - i < kPiece ? n - i : kPiece));
}

std::vector<float> rounded_copy(Rounding rounding, const float* x, size_t n) {
  std::vector<float> out(x, x + n);
  round_in_place(rounding, out.data(), n);
  return out;
}

}  // namespace speakerseg::cpu
