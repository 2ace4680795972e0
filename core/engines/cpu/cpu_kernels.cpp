#include "engines/cpu/cpu_kernels.h"

#include <algorithm>
#include <cmath>
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
