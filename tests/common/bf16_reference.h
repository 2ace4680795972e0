// The tests' own rounding to bf16 (to nearest, ties to even, as vcvtne2ps2bf16 does), written
// apart from the engine's (core/engines/cpu/bf16.h) so that the bf16 kernels are held to a
// reference that shares none of their code.
#pragma once

#include <cstdint>
#include <cstring>

namespace speakerseg::test {

// x (via float) rounded to the nearest bf16, as a double.
inline double bf16_rounded(double x) {
  float f = static_cast<float>(x);
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace speakerseg::test
