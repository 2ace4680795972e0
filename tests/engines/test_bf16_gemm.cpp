// The bf16 product of precision bf16 (core/engines/cpu/bf16_gemm.h) against a double-precision
// product of the same operands rounded to bf16 (ties to even, written here): every remainder of
// its 6-row tile, the k of both networks' LSTM inputs (40, 60, 256) and odd ones, strided rows.
// What rounding costs against fp32 is measured end to end (engine_parity's EngineBf16).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/bf16_reference.h"
#include "common/xorshift.h"
#include "engines/cpu/bf16_gemm.h"
#include "engines/cpu/lstm_recurrence.h"

namespace speakerseg {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  test::Xorshift rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.below(20001)) / 10000.f - 1.f;
  return v;
}

class Bf16Gemm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu::lstm_isa_supported(cpu::LstmIsa::kAvx512Bf16))
      GTEST_SKIP() << "this CPU has no AVX512_BF16: precision bf16 is refused here";
  }
};

TEST_F(Bf16Gemm, MatchesADoubleProductOfTheRoundedOperands) {
  for (int n : {64, 1024})
    for (int k : {1, 7, 40, 60, 256, 257})
      for (int m : {1, 2, 3, 4, 5, 6, 7, 12, 13}) {
        const int lda = k + 3, ldc = n + 5;  // rows apart by more than their length
        const std::vector<float> a = random_floats(static_cast<size_t>(m) * lda, 1 + m + k);
        const std::vector<float> b = random_floats(static_cast<size_t>(n) * k, 2 + n + k);
        std::vector<float> c(static_cast<size_t>(m) * ldc, NAN);
        const cpu::Bf16Matrix packed(b.data(), n, k);
        cpu::bf16_gemm(m, a.data(), lda, packed, c.data(), ldc);
        double worst = 0;
        for (int i = 0; i < m; ++i)
          for (int j = 0; j < n; ++j) {
            double want = 0, scale = 0;
            for (int q = 0; q < k; ++q) {
              const double p =
                  test::bf16_rounded(a[i * lda + q]) * test::bf16_rounded(b[j * k + q]);
              want += p;
              scale += std::fabs(p);
            }
            const float got = c[static_cast<size_t>(i) * ldc + j];
            // fp32 sums of exact bf16 products: rounding of at most k additions.
            worst = std::max(worst,
                             std::isnan(got) ? INFINITY : std::fabs(got - want) / (scale + 1e-30));
          }
        EXPECT_LT(worst, 2e-7 * k + 1e-7) << m << " x " << k << " by " << k << " x " << n;
        // Columns past n of each row are not the product's: they stay untouched.
        for (int i = 0; i < m; ++i)
          for (int j = n; j < ldc && i < m - 1; ++j)
            ASSERT_TRUE(std::isnan(c[static_cast<size_t>(i) * ldc + j]));
      }
}

TEST_F(Bf16Gemm, RefusesShapesItsTileDoesNotCover) {
  const std::vector<float> b(100 * 1100, 0.5f);
  EXPECT_THROW(cpu::Bf16Matrix(b.data(), 100, 8), std::invalid_argument);    // n % 64
  EXPECT_THROW(cpu::Bf16Matrix(b.data(), 64, 1100), std::invalid_argument);  // k > 1024
  EXPECT_THROW(cpu::Bf16Matrix(b.data(), 64, 0), std::invalid_argument);
}

}  // namespace
}  // namespace speakerseg
