// fp32 rows to the bf16 pairs vdpbf16ps multiplies, for the files compiled with -mavx512bf16
// (the bf16 recurrence and the bf16 product); internal linkage, so no other file's copy is used.
#pragma once

#include <cstdint>

#include "engines/cpu/avx512_intrinsics.h"

namespace speakerseg::cpu::isa {
namespace {

// x[0, n) as bf16 pairs (x[2p] low, x[2p + 1] high; an odd n padded with zero), rounded to nearest
// even. Writes whole vectors: out must have room for n rounded up to 32, halved.
inline void to_bf16_pairs(const float* x, int n, uint32_t* out) {
  for (int k0 = 0; k0 < n; k0 += 32) {
    const int left = n - k0;
    const __mmask16 lo = left >= 16 ? 0xffff : static_cast<__mmask16>((1u << left) - 1);
    const __mmask16 hi = left >= 32   ? 0xffff
                         : left <= 16 ? 0
                                      : static_cast<__mmask16>((1u << (left - 16)) - 1);
    const __m512bh pairs = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, x + k0 + 16),
                                               _mm512_maskz_loadu_ps(lo, x + k0));
    _mm512_storeu_si512(out + k0 / 2, reinterpret_cast<__m512i>(pairs));
  }
}

}  // namespace
}  // namespace speakerseg::cpu::isa
