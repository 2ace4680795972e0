// What bf16_gemm.cpp hands to the AVX512_BF16 product (bf16_gemm_avx512.cpp, compiled with its own
// -m flags): plain data only, as in lstm_recurrence_isa.h.
#pragma once

#include <cstdint>

namespace speakerseg::cpu::isa {

constexpr int kBf16GemmColumns = 64;  // one tile: 4 vectors of 16 fp32 sums
constexpr int kBf16GemmMaxK = 1024;   // a tile's rows of A, as bf16 pairs, live on the stack

// C[m][n] = A[m][k] * B^T, B packed as Bf16Matrix packs it.
void bf16_gemm_avx512(int m, const float* a, int lda, const uint32_t* b, int n, int k, float* c,
                      int ldc);

}  // namespace speakerseg::cpu::isa
