#include "engines/cpu/bf16_gemm.h"

#include <stdexcept>
#include <string>

#include "engines/cpu/bf16.h"
#include "engines/cpu/bf16_gemm_isa.h"

namespace speakerseg::cpu {

Bf16Matrix::Bf16Matrix(const float* b, int n, int k) : n_(n), k_(k) {
  if (n <= 0 || n % isa::kBf16GemmColumns != 0 || k <= 0 || k > isa::kBf16GemmMaxK)
    throw std::invalid_argument("bf16 product of " + std::to_string(n) + " x " + std::to_string(k) +
                                ": needs columns in multiples of " +
                                std::to_string(isa::kBf16GemmColumns) +
                                " and k <= " + std::to_string(isa::kBf16GemmMaxK));
  const size_t pairs = (k + 1) / 2, tile = isa::kBf16GemmColumns;
  packed_.resize(static_cast<size_t>(n) * pairs);
  for (size_t col = 0; col < static_cast<size_t>(n); ++col) {
    const float* row = b + col * k;
    for (size_t p = 0; p < pairs; ++p) {
      const float high = 2 * p + 1 < static_cast<size_t>(k) ? row[2 * p + 1] : 0.f;
      packed_[((col / tile) * pairs + p) * tile + col % tile] = bf16_pair(row[2 * p], high);
    }
  }
}

void bf16_gemm(int m, const float* a, int lda, const Bf16Matrix& b, float* c, int ldc) {
#if defined(__x86_64__)
  isa::bf16_gemm_avx512(m, a, lda, b.data(), b.n(), b.k(), c, ldc);
#else
  (void)m, (void)a, (void)lda, (void)b, (void)c, (void)ldc;
  throw std::logic_error("bf16_gemm: built for x86-64 only");
#endif
}

}  // namespace speakerseg::cpu
