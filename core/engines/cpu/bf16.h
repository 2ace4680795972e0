// Rounding to bf16 on the host, as the AVX512_BF16 conversions do (vcvtne2ps2bf16: to nearest,
// ties to even): for the weights the bf16 kernels pack once at load. Not for the per-ISA files.
#pragma once

#include <cstdint>

#include "engines/cpu/float_bits.h"

namespace speakerseg::cpu {

// A NaN stays a (quiet) NaN.
inline uint16_t to_bf16(float x) {
  uint32_t bits = float_bits(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// Two bf16 in one 32-bit word, `low` first in memory: the operand pairs of vdpbf16ps.
inline uint32_t bf16_pair(float low, float high) {
  return static_cast<uint32_t>(to_bf16(low)) | static_cast<uint32_t>(to_bf16(high)) << 16;
}

}  // namespace speakerseg::cpu
