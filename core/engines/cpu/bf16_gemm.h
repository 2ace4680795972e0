// The large products of precision bf16 (cpu_engine.h): the LSTM input projections of both
// networks, C = A * B^T with A and B rounded to bf16 and sums in fp32 (AVX512_BF16's vdpbf16ps,
// 32 multiply-adds per instruction against 16 for an fp32 FMA). B is packed once at load.
#pragma once

#include <cstdint>
#include <vector>

namespace speakerseg::cpu {

// B [n][k] (row-major: one row per output column), n a multiple of 64, k at most 1024, as pairs
// of bf16 along k (zero-padded to even k): [n/64][k/2][64].
class Bf16Matrix {
 public:
  Bf16Matrix(const float* b, int n, int k);
  int n() const { return n_; }
  int k() const { return k_; }
  const uint32_t* data() const { return packed_.data(); }

 private:
  int n_, k_;
  std::vector<uint32_t> packed_;
};

// C[m][n] = A[m][k] * B^T (overwritten; rows ldc floats apart). The caller has checked that the
// CPU runs AVX512_BF16 (recurrence_kernel(CpuPrecision::kBf16) does).
void bf16_gemm(int m, const float* a, int lda, const Bf16Matrix& b, float* c, int ldc);

}  // namespace speakerseg::cpu
