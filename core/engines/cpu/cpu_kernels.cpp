#include "engines/cpu/cpu_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

// GCC only: clang 14 accepts target_clones but its dispatch ran the AVX-512 body on an AVX2-only
// CPU (SIGILL in max_pool3, seen building the fuzz targets with clang).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__)
#define SPEAKERSEG_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SPEAKERSEG_CLONES
#endif

namespace speakerseg::cpu {
namespace {

// exp(x) to ~2 ulp (Cephes' expf polynomial) written so that the compiler vectorises it: libm's
// expf is a scalar call and would cost more than the LSTM's matrix products.
inline float exp_approx(float x) {
  x = x < -87.f ? -87.f : x;
  x = x > 88.f ? 88.f : x;
  const float kRound = 12582912.f;  // 1.5 * 2^23: adding and subtracting it rounds to an integer
  float n = (x * 1.44269504088896341f + kRound) - kRound;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline float sigmoid(float x) {
  return 1.f / (1.f + exp_approx(-x));
}
inline float tanh_approx(float x) {
  return 1.f - 2.f / (1.f + exp_approx(2.f * x));
}

}  // namespace

SPEAKERSEG_CLONES
void lstm_cell(const float* pre, const float* rec, const float* bias, float* c, float* h,
               int hidden) {
  // Gates into local arrays first: with no possible aliasing, and no branch inside, the
  // activation loops below vectorise.
  constexpr int kMax = 4 * kMaxLstmHidden;
  float g[kMax];
  const int n = 4 * hidden;
  for (int j = 0; j < n; ++j) g[j] = pre[j] + bias[j];
  if (rec)
    for (int j = 0; j < n; ++j) g[j] += rec[j];
  for (int j = 0; j < 3 * hidden; ++j) g[j] = sigmoid(g[j]);  // i, o, f
  for (int j = 3 * hidden; j < n; ++j) g[j] = tanh_approx(g[j]);
  float cell[kMax / 4];
  for (int j = 0; j < hidden; ++j) cell[j] = g[2 * hidden + j] * c[j] + g[j] * g[3 * hidden + j];
  for (int j = 0; j < hidden; ++j) {
    c[j] = cell[j];
    g[j] = tanh_approx(cell[j]);
  }
  for (int j = 0; j < hidden; ++j) h[j] = g[hidden + j] * g[j];
}

SPEAKERSEG_CLONES
void max_pool3(const float* in, int rows, int channels, bool absolute, float* out) {
  const int out_rows = rows / 3;
  for (int r = 0; r < out_rows; ++r) {
    const float* a = in + static_cast<size_t>(3 * r) * channels;
    const float* b = a + channels;
    const float* d = b + channels;
    float* o = out + static_cast<size_t>(r) * channels;
    if (absolute)
      for (int k = 0; k < channels; ++k)
        o[k] = std::max(std::max(std::fabs(a[k]), std::fabs(b[k])), std::fabs(d[k]));
    else
      for (int k = 0; k < channels; ++k) o[k] = std::max(std::max(a[k], b[k]), d[k]);
  }
}

void instance_norm_leaky_relu(float* x, int rows, int channels, int c0, int c1, const float* scale,
                              const float* bias, float eps, float slope) {
  const int n = c1 - c0;
  // Double accumulators: a 5 325-row channel summed in float loses digits the reference keeps.
  double sum[128] = {0}, sq[128] = {0};
  for (int r = 0; r < rows; ++r) {
    const float* row = x + static_cast<size_t>(r) * channels + c0;
    for (int k = 0; k < n; ++k) sum[k] += row[k];
  }
  float mean[128], mul[128], add[128];
  for (int k = 0; k < n; ++k) mean[k] = static_cast<float>(sum[k] / rows);
  for (int r = 0; r < rows; ++r) {
    const float* row = x + static_cast<size_t>(r) * channels + c0;
    for (int k = 0; k < n; ++k) {
      const double d = row[k] - mean[k];
      sq[k] += d * d;
    }
  }
  for (int k = 0; k < n; ++k) {
    const float inv = static_cast<float>(1.0 / std::sqrt(sq[k] / rows + eps));
    mul[k] = inv * scale[c0 + k];
    add[k] = bias[c0 + k] - mean[k] * mul[k];
  }
  for (int r = 0; r < rows; ++r) {
    float* row = x + static_cast<size_t>(r) * channels + c0;
    for (int k = 0; k < n; ++k) {
      const float v = row[k] * mul[k] + add[k];
      row[k] = v < 0.f ? v * slope : v;
    }
  }
}

SPEAKERSEG_CLONES
void bias_leaky_relu(float* x, int rows, int n, const float* bias, float slope) {
  for (int r = 0; r < rows; ++r) {
    float* row = x + static_cast<size_t>(r) * n;
    for (int k = 0; k < n; ++k) {
      const float v = row[k] + bias[k];
      row[k] = v < 0.f ? v * slope : v;
    }
  }
}

void bias_log_softmax(float* x, int rows, int n, const float* bias) {
  for (int r = 0; r < rows; ++r) {
    float* row = x + static_cast<size_t>(r) * n;
    float top = -INFINITY;
    for (int k = 0; k < n; ++k) {
      row[k] += bias[k];
      top = std::max(top, row[k]);
    }
    double sum = 0;
    for (int k = 0; k < n; ++k) sum += std::exp(static_cast<double>(row[k] - top));
    const float log_sum = static_cast<float>(std::log(sum)) + top;
    for (int k = 0; k < n; ++k) row[k] -= log_sum;
  }
}

}  // namespace speakerseg::cpu
