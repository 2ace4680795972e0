// The AVX-512F vector operations of the LSTM kernel, shared by the fp32 kernel
// (lstm_recurrence_avx512.cpp) and the bf16 one (lstm_recurrence_avx512_bf16.cpp); included only
// by files compiled with -mavx512f.
#pragma once

#include "engines/cpu/avx512_intrinsics.h"

#include "engines/cpu/lstm_recurrence_kernel.h"

namespace speakerseg::cpu::isa {
namespace {

struct Avx512 : Fp32Product<Avx512> {
  using V = __m512;
  static constexpr int kWidth = kAvx512Width, kMaxSequences = 4, kBlocksPerPass = 2;
  static V set(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V min(V a, V b) { return _mm512_min_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  // 2^n for integral n in [-126, 127], built in the exponent field.
  static V pow2(V n) {
    const __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
  }
};

}  // namespace
}  // namespace speakerseg::cpu::isa
