// Emulated reduced precision (core/engines/cpu/emulated_precision.h, the CPU engines' precision
// fp16-emulated, bf16-emulated and tf32-emulated): the rounding against known values, and what
// the emulation does to the engine's output on real speech, bounded by what was measured (the
// evaluation of docs/gpu.md, "Reduced precision, emulated", says what that costs in DER).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "common/parity.h"
#include "common/test_env.h"
#include "engines/cpu/cpu_engine.h"
#include "engines/cpu/emulated_precision.h"
#include "engines/cpu/float_bits.h"
#include "io/npy.h"

namespace speakerseg {
namespace {

using cpu::round_to_bf16;
using cpu::round_to_fp16;
using cpu::round_to_tf32;

using cpu::bits_float;
using cpu::float_bits;

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(EmulatedRounding, Fp16TiesToEvenOverflowAndSubnormals) {
  EXPECT_EQ(round_to_fp16(1.f), 1.f);
  EXPECT_EQ(round_to_fp16(0.1f), 0.0999755859375f);  // fp16 0x2e66
  EXPECT_EQ(round_to_fp16(-3.14159265f), -3.140625f);
  // Halfway between two fp16 neighbours (spacing 2^-10 at 1): to the even one.
  EXPECT_EQ(round_to_fp16(1.f + 0x1p-11f), 1.f);
  EXPECT_EQ(round_to_fp16(1.f + 3 * 0x1p-11f), 1.f + 0x1p-9f);
  EXPECT_EQ(round_to_fp16(1.f + 0x1p-11f + 0x1p-20f), 1.f + 0x1p-10f);  // above halfway: up
  // Range: 65504 is the largest; from 65520 (halfway to 65536) on, infinity.
  EXPECT_EQ(round_to_fp16(65504.f), 65504.f);
  EXPECT_EQ(round_to_fp16(65519.f), 65504.f);
  EXPECT_EQ(round_to_fp16(65520.f), kInf);
  EXPECT_EQ(round_to_fp16(-1e6f), -kInf);
  EXPECT_EQ(round_to_fp16(kInf), kInf);
  EXPECT_TRUE(std::isnan(round_to_fp16(std::nanf(""))));
  // Subnormals: steps of 2^-24 below 2^-14, ties to even, zero below 2^-25.
  EXPECT_EQ(round_to_fp16(0x1p-14f), 0x1p-14f);
  EXPECT_EQ(round_to_fp16(0x1p-24f), 0x1p-24f);
  EXPECT_EQ(round_to_fp16(0x1p-25f), 0.f);                  // halfway to 2^-24: to even (0)
  EXPECT_EQ(round_to_fp16(0x1p-25f + 0x1p-30f), 0x1p-24f);  // above halfway
  EXPECT_EQ(round_to_fp16(3 * 0x1p-25f), 0x1p-23f);         // 1.5 steps: to even (2)
  EXPECT_EQ(round_to_fp16(5 * 0x1p-26f), 0x1p-24f);         // 1.25 steps
  EXPECT_EQ(round_to_fp16(0x1p-14f - 0x1p-25f), 0x1p-14f);  // 1023.5 steps: to 1024
  EXPECT_EQ(round_to_fp16(1e-10f), 0.f);
  EXPECT_EQ(float_bits(round_to_fp16(-1e-10f)), float_bits(-0.f));
  EXPECT_EQ(round_to_fp16(-0x1p-24f), -0x1p-24f);
}

#if defined(__FLT16_MAX__)
// The compiler's own conversion (libgcc's, or F16C's), which rounds to nearest even, over a
// sweep of float bit patterns that covers every exponent: the two must agree everywhere.
TEST(EmulatedRounding, Fp16AgreesWithTheCompilersFloat16) {
  size_t checked = 0;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 4099) {
    const float x = bits_float(static_cast<uint32_t>(bits));
    const float want = static_cast<float>(static_cast<_Float16>(x));
    const float got = round_to_fp16(x);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(got));
      continue;
    }
    ASSERT_EQ(float_bits(got), float_bits(want)) << "x = " << x << " (bits " << bits << ")";
    ++checked;
  }
  EXPECT_GT(checked, 1000000u);
}
#endif

TEST(EmulatedRounding, Bf16KeepsEightSignificantBits) {
  EXPECT_EQ(round_to_bf16(1.f), 1.f);
  EXPECT_EQ(round_to_bf16(1.f + 0x1p-8f), 1.f);                       // halfway: to even
  EXPECT_EQ(round_to_bf16(1.f + 3 * 0x1p-8f), 1.f + 0x1p-6f);         // halfway: to even
  EXPECT_EQ(round_to_bf16(1.f + 0x1p-8f + 0x1p-20f), 1.f + 0x1p-7f);  // above halfway
  EXPECT_EQ(round_to_bf16(0.1f), 0.10009765625f);                     // bf16 0x3dcd
  EXPECT_EQ(round_to_bf16(1e30f), bits_float((float_bits(1e30f) + 0x8000u) & 0xffff0000u));
  EXPECT_TRUE(std::isfinite(round_to_bf16(65520.f * 1e20f)));  // fp32's range
  EXPECT_EQ(round_to_bf16(std::numeric_limits<float>::max()), kInf);
  EXPECT_TRUE(std::isnan(round_to_bf16(std::nanf(""))));
}

TEST(EmulatedRounding, Tf32KeepsElevenSignificantBitsAndFp32Range) {
  EXPECT_EQ(round_to_tf32(1.f + 0x1p-11f), 1.f);                        // halfway: to even
  EXPECT_EQ(round_to_tf32(1.f + 3 * 0x1p-11f), 1.f + 0x1p-9f);          // halfway: to even
  EXPECT_EQ(round_to_tf32(1.f + 0x1p-11f + 0x1p-20f), 1.f + 0x1p-10f);  // above halfway
  EXPECT_EQ(round_to_tf32(0.1f), round_to_fp16(0.1f));  // same mantissa as fp16 in fp16's range
  EXPECT_EQ(round_to_tf32(100000.f), 99968.f);          // 1562 * 64 + a tie of 32: to even
  EXPECT_EQ(round_to_tf32(1e30f), bits_float((float_bits(1e30f) + 0x1000u) & ~0x1fffu));
  EXPECT_EQ(round_to_tf32(std::numeric_limits<float>::max()), kInf);
  EXPECT_EQ(round_to_tf32(-kInf), -kInf);
  EXPECT_TRUE(std::isnan(round_to_tf32(std::nanf(""))));
}

TEST(EmulatedRounding, NamesAndInPlace) {
  for (const char* name :
       {"fp32", "bf16", "fp16-emulated", "bf16-emulated", "tf32-emulated",
        "fp16-emulated-fp32-sinc", "bf16-emulated-fp32-sinc", "tf32-emulated-fp32-sinc"}) {
    CpuPrecision p = CpuPrecision::kFp32;
    ASSERT_TRUE(parse_cpu_precision(name, &p)) << name;
    EXPECT_EQ(std::string(cpu_precision_name(p)), name);
  }
  CpuPrecision p = CpuPrecision::kFp32;
  EXPECT_FALSE(parse_cpu_precision("fp16", &p));
  EXPECT_EQ(p, CpuPrecision::kFp32);
  std::vector<float> v = {1.f + 0x1p-9f, 0.1f, 70000.f};
  cpu::round_in_place(cpu::Rounding::kFp16, v.data(), v.size());
  EXPECT_EQ(v, (std::vector<float>{1.f + 0x1p-9f, 0.0999755859375f, kInf}));
  cpu::round_in_place(cpu::Rounding::kNone, v.data(), v.size());
  EXPECT_EQ(cpu::round_function(cpu::Rounding::kNone), nullptr);
}

// Frames whose argmax class differs from the reference's, per window under the permutation of the
// window's three local speakers that gives the fewest (local labels are arbitrary per window, and
// the streaming logic matches them across windows: a window whose speakers come out permuted
// loses nothing). `out`, `ref`: [windows][frames][kClasses].
int flips_up_to_permutation(const std::vector<float>& out, const std::vector<float>& ref,
                            int windows) {
  // The powerset classes ({}, {0}, {1}, {2}, {0,1}, {0,2}, {1,2}) under each permutation.
  static const int kPermuted[6][kClasses] = {{0, 1, 2, 3, 4, 5, 6}, {0, 1, 3, 2, 5, 4, 6},
                                             {0, 2, 1, 3, 4, 6, 5}, {0, 2, 3, 1, 6, 4, 5},
                                             {0, 3, 1, 2, 5, 6, 4}, {0, 3, 2, 1, 6, 5, 4}};
  const size_t frames = out.size() / kClasses / windows;
  int total = 0;
  for (int w = 0; w < windows; ++w) {
    int best = static_cast<int>(frames);
    for (const auto& perm : kPermuted) {
      int flips = 0;
      for (size_t f = 0; f < frames; ++f) {
        const float* o = &out[(w * frames + f) * kClasses];
        const float* r = &ref[(w * frames + f) * kClasses];
        flips +=
            perm[std::max_element(o, o + kClasses) - o] != std::max_element(r, r + kClasses) - r;
      }
      best = std::min(best, flips);
    }
    total += best;
  }
  return total;
}

// What each emulated precision does to segmentation-3.0 on the 21 windows of sample.wav
// (all_windows, ONNX Runtime's fp32 log-probabilities as the reference), measured with the
// engine: the bounds asserted are what was measured (on a Xeon with AVX-512, 2 threads) with a
// little room for another CPU's order of sums, so a change to the emulation shows.
struct Measured {
  CpuPrecision precision;
  const char* rounding;
  int max_flips;  // frames whose argmax moved (up to a permutation of speakers), of 12 369
};

class EmulatedEngine : public ::testing::TestWithParam<Measured> {};

TEST_P(EmulatedEngine, DiffersFromFp32AsMeasured) {
  const Measured m = GetParam();
  const std::string dir = test::reference_dir();
  const NpyArray input = read_npy(dir + "/all_windows.input.npy");
  const NpyArray reference = read_npy(dir + "/all_windows.logprobs.npy");
  const int batch = static_cast<int>(input.shape[0]), samples = static_cast<int>(input.shape[1]);
  const auto model = SegmentationModel::load_onnx(test::model_path());
  auto engine = make_cpu_engine(model, {2, m.precision});
  EXPECT_NE(engine->description().find(std::string(m.rounding) + " products emulated"),
            std::string::npos)
      << engine->description();
  std::vector<float> out(reference.data.size(), NAN), fp32(out.size(), NAN);
  engine->forward(input.data.data(), batch, samples, out.data());
  make_cpu_engine(model, {2, CpuPrecision::kFp32})
      ->forward(input.data.data(), batch, samples, fp32.data());
  const test::Comparison cmp = test::compare(out, reference.data);
  double max_p = 0, from_fp32 = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    max_p =
        std::max(max_p, std::fabs(std::exp(double(out[i])) - std::exp(double(reference.data[i]))));
    from_fp32 = std::max(from_fp32, std::fabs(double(out[i]) - fp32[i]));
  }
  const int flips = flips_up_to_permutation(out, reference.data, batch);
  std::printf(
      "[ emulated ] %-23s: max |diff| %.3g (every class: %.3g), max |probability diff| %.3g, "
      "argmax flips %d (+%d at near-ties), %d up to a permutation of speakers, of %zu frames; "
      "max |diff| from the fp32 engine %.3g\n",
      cpu_precision_name(m.precision), cmp.max_diff, cmp.max_diff_all, max_p, cmp.flips,
      cmp.ties_flipped, flips, out.size() / kClasses, from_fp32);
  EXPECT_TRUE(cmp.finite);
  EXPECT_GT(from_fp32, 1e-4) << "the emulation changed nothing: is the rounding applied?";
  EXPECT_LE(flips, m.max_flips);
}

// Measured (Xeon, AVX-512, 2 threads): fp16 22 frames (20 outside near-ties, max probability
// error 0.080), tf32 the same 22, bf16 266 (806 without the permutation: window 18 comes out with
// two speakers swapped; max probability error 0.999). With SincNet's products in fp32: fp16 2
// (both at near-ties, 0.0026), tf32 2 (near-ties, 0.0031), bf16 9 (0.034): SincNet is what
// rounding hurts. What that costs in DER and confusion is the evaluation's: docs/gpu.md,
// "Reduced precision, emulated".
INSTANTIATE_TEST_SUITE_P(
    Precisions, EmulatedEngine,
    ::testing::Values(Measured{CpuPrecision::kFp16Emulated, "fp16", 28},
                      Measured{CpuPrecision::kBf16Emulated, "bf16", 330},
                      Measured{CpuPrecision::kTf32Emulated, "tf32", 28},
                      Measured{CpuPrecision::kFp16EmulatedFp32Sinc, "fp16", 4},
                      Measured{CpuPrecision::kBf16EmulatedFp32Sinc, "bf16", 12},
                      Measured{CpuPrecision::kTf32EmulatedFp32Sinc, "tf32", 4}),
    [](const auto& info) {
      std::string name = cpu_precision_name(info.param.precision);
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

}  // namespace
}  // namespace speakerseg
