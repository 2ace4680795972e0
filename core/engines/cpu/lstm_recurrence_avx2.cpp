// The fused LSTM recurrence for AVX2 with FMA (compiled with -mavx2 -mfma; run only where the CPU
// has them): 8 lanes, 16 registers, so up to 3 sequences share each weight load.
#include <immintrin.h>

#include "engines/cpu/lstm_recurrence_kernel.h"

namespace speakerseg::cpu::isa {
namespace {

struct Avx2 : Fp32Product<Avx2> {
  using V = __m256;
  static constexpr int kWidth = kAvx2Width, kMaxSequences = 3, kBlocksPerPass = 2;
  static V set(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V min(V a, V b) { return _mm256_min_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  // 2^n for integral n in [-126, 127], built in the exponent field.
  static V pow2(V n) {
    const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  }
};

}  // namespace

void run_avx2(const RecurrenceTask* tasks, int count, int steps, int hidden, int from, int to) {
  run_tasks<Avx2>(tasks, count, steps, hidden, from, to);
}

}  // namespace speakerseg::cpu::isa
