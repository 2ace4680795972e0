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

SPEAKERSEG_CLONES
void symmetric_pairs(const float* x, int rows, int stride, int side, float* sums, float* diffs) {
  for (int r = 0; r < rows; ++r) {
    const float* w = x + static_cast<size_t>(r) * stride;
    const float* mirror = w + 2 * side;
    float* s = sums + static_cast<size_t>(r) * (side + 1);
    float* d = diffs + static_cast<size_t>(r) * side;
    for (int k = 0; k < side; ++k) {
      s[k] = w[k] + mirror[-k];
      d[k] = w[k] - mirror[-k];
    }
    s[side] = w[side];
  }
}

SPEAKERSEG_CLONES
void normalize_wave(const float* x, int samples, float scale, float bias, float eps, float* y) {
  // Double sums, as the reference keeps them, in kLanes independent partial sums: one running
  // double sum is a chain of dependent additions, which the compiler may not reorder, and over
  // 160 000 samples that chain cost more than the rest of the stage.
  auto lane_sum = [&](auto term) {
    constexpr int kLanes = 16;
    double part[kLanes] = {0};
    int i = 0;
    for (; i + kLanes <= samples; i += kLanes)
      for (int k = 0; k < kLanes; ++k) part[k] += term(x[i + k]);
    for (; i < samples; ++i) part[i % kLanes] += term(x[i]);
    double sum = 0;
    for (int k = 0; k < kLanes; ++k) sum += part[k];
    return sum;
  };
  const double mean = lane_sum([](float v) { return static_cast<double>(v); }) / samples;
  const double sq = lane_sum([mean](float v) {
    const double d = v - mean;
    return d * d;
  });
  const float mul = static_cast<float>(scale / std::sqrt(sq / samples + eps));
  const float add = static_cast<float>(bias - mean * mul);
  for (int i = 0; i < samples; ++i) y[i] = x[i] * mul + add;
}

SPEAKERSEG_CLONES
void instance_norm_leaky_relu(float* x, int rows, int channels, const float* scale,
                              const float* bias, float eps, float slope) {
  // Double accumulators: a 5 325-row channel summed in float loses digits the reference keeps.
  double sum[128] = {0}, sq[128] = {0};
  for (int r = 0; r < rows; ++r) {
    const float* row = x + static_cast<size_t>(r) * channels;
    for (int k = 0; k < channels; ++k) sum[k] += row[k];
  }
  float mean[128], mul[128], add[128];
  for (int k = 0; k < channels; ++k) mean[k] = static_cast<float>(sum[k] / rows);
  for (int r = 0; r < rows; ++r) {
    const float* row = x + static_cast<size_t>(r) * channels;
    for (int k = 0; k < channels; ++k) {
      const double d = row[k] - mean[k];
      sq[k] += d * d;
    }
  }
  for (int k = 0; k < channels; ++k) {
    const float inv = static_cast<float>(1.0 / std::sqrt(sq[k] / rows + eps));
    mul[k] = inv * scale[k];
    add[k] = bias[k] - mean[k] * mul[k];
  }
  for (int r = 0; r < rows; ++r) {
    float* row = x + static_cast<size_t>(r) * channels;
    for (int k = 0; k < channels; ++k) {
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
