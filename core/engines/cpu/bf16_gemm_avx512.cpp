// The bf16 product for AVX512_BF16 (compiled with -mavx512f -mavx512bf16; run only where the CPU
// has it). A register tile of R rows by 64 columns: per pair of k, four 64-byte loads of B, R
// broadcasts of an A pair and 4 R vdpbf16ps; at R = 6 that is 24 accumulators. B (n x k bf16:
// 512 KB for the segmentation LSTM's 1024 x 256) streams from L2 once per 6 rows.
#include "engines/cpu/bf16_gemm_isa.h"
#include "engines/cpu/bf16_pairs_avx512.h"

namespace speakerseg::cpu::isa {
namespace {

constexpr int kRows = 6;

template <int R>
void tile(const uint32_t* a, int pairs, const uint32_t* b, float* const* c) {
  __m512 acc[R][4];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_setzero_ps();
  for (int p = 0; p < pairs; ++p) {
    __m512bh w[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j)
      w[j] =
          reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + (static_cast<size_t>(p) * 4 + j) * 16));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512bh x = reinterpret_cast<__m512bh>(
          _mm512_set1_epi32(static_cast<int>(a[r * kBf16GemmMaxK / 2 + p])));
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], w[j], x);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) _mm512_storeu_ps(c[r] + j * 16, acc[r][j]);
}

template <int R>
void rows(int m0, const float* a, int lda, const uint32_t* b, int n, int k, float* c, int ldc) {
  if constexpr (R > 1) {
    if (m0 < R) return rows<R - 1>(m0, a, lda, b, n, k, c, ldc);
  }
  alignas(64) uint32_t pairs[R][kBf16GemmMaxK / 2];
  for (int r = 0; r < R; ++r) to_bf16_pairs(a + static_cast<size_t>(r) * lda, k, pairs[r]);
  const int k2 = (k + 1) / 2;
  for (int col = 0; col < n; col += kBf16GemmColumns) {
    float* out[R];
    for (int r = 0; r < R; ++r) out[r] = c + static_cast<size_t>(r) * ldc + col;
    tile<R>(&pairs[0][0], k2,
            b + static_cast<size_t>(col / kBf16GemmColumns) * k2 * kBf16GemmColumns, out);
  }
}

}  // namespace

void bf16_gemm_avx512(int m, const float* a, int lda, const uint32_t* b, int n, int k, float* c,
                      int ldc) {
  for (int r0 = 0; r0 < m; r0 += kRows)
    rows<kRows>(m - r0, a + static_cast<size_t>(r0) * lda, lda, b, n, k,
                c + static_cast<size_t>(r0) * ldc, ldc);
}

}  // namespace speakerseg::cpu::isa
