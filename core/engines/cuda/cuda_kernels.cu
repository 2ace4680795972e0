// Kept small on purpose: this is the one file nvcc compiles, for five GPU architectures.
// Reductions use fixed thread-to-element assignments and fixed-order trees (no atomics), so every
// run, eager or replayed from a CUDA graph, gives bit-identical results.
#include <cuda_runtime.h>

#include "engines/cuda/cuda_kernels.h"

namespace speakerseg::cuda {
namespace {

constexpr int kSide = 125;  // (kernel 251 - 1) / 2
constexpr int kSincStride = 10;

// Sums v over the block into red[0]; every thread gets the total. blockDim.x is a power of two.
__device__ double block_sum(double v, double* red) {
  const unsigned t = threadIdx.x;
  red[t] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
    if (t < s) red[t] += red[t + s];
    __syncthreads();
  }
  const double total = red[0];
  __syncthreads();  // red is reused by the next call
  return total;
}

constexpr int kWaveThreads = 1024;

__global__ void __launch_bounds__(kWaveThreads)
    wave_norm_kernel(float* x, int samples, float scale, float bias, float eps) {
  __shared__ double red[kWaveThreads];
  float* w = x + static_cast<size_t>(blockIdx.x) * samples;
  double sum = 0;
  for (int i = threadIdx.x; i < samples; i += blockDim.x) sum += w[i];
  const double mean = block_sum(sum, red) / samples;
  double sq = 0;
  for (int i = threadIdx.x; i < samples; i += blockDim.x) {
    const double d = w[i] - mean;
    sq += d * d;
  }
  const double var = block_sum(sq, red) / samples;
  // (x - mean) first: x * mul + (bias - mean * mul) would cancel digits where the mean (a DC
  // offset) is large against the spread.
  const float mean_f = static_cast<float>(mean);
  const float mul = static_cast<float>(scale / sqrt(var + eps));
  for (int i = threadIdx.x; i < samples; i += blockDim.x) w[i] = (w[i] - mean_f) * mul + bias;
}

// One row per threadIdx.y, one pair of taps per threadIdx.x (128 wide).
__global__ void sinc_im2col_kernel(const float* wave, int samples, int rows_per_window,
                                   int64_t first_row, int rows, float* out) {
  const int local = blockIdx.x * blockDim.y + threadIdx.y;
  if (local >= rows) return;
  const int64_t row = first_row + local;
  const int64_t b = row / rows_per_window;
  const int64_t r = row % rows_per_window;
  const float* p = wave + b * samples + r * kSincStride;
  float* o = out + static_cast<int64_t>(local) * kSincLd;
  const int k = threadIdx.x;
  if (k < kSide) {
    const float a = p[k], z = p[2 * kSide - k];
    o[k] = a + z;
    o[kSincDiffColumn + k] = a - z;
  } else if (k == kSide) {
    o[k] = p[kSide];
  }
}

__global__ void abs_max_pool3_kernel(const float* in, int64_t n, int channels, float* out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const int64_t r = i / channels, c = i % channels;
  const float* a = in + 3 * r * channels + c;
  out[i] = fmaxf(fmaxf(fabsf(a[0]), fabsf(a[channels])), fabsf(a[2 * channels]));
}

constexpr int kNormChannels = 32;   // threadIdx.x: adjacent channels, coalesced rows
constexpr int kNormRowGroups = 32;  // threadIdx.y: rows r, r + 32, ...

__device__ float pooled(const float* in, int pool, int64_t r, int channels) {
  const float* a = in + r * pool * channels;
  float v = a[0];
  for (int j = 1; j < pool; ++j) v = fmaxf(v, a[j * channels]);
  return v;
}

// Sums v over threadIdx.y in a fixed order; every thread of the column gets the total.
__device__ double column_sum(double v, double (*red)[kNormChannels + 1]) {
  red[threadIdx.y][threadIdx.x] = v;
  __syncthreads();
  if (threadIdx.y == 0) {
    double total = 0;
    for (int g = 0; g < kNormRowGroups; ++g) total += red[g][threadIdx.x];
    red[0][threadIdx.x] = total;
  }
  __syncthreads();
  const double total = red[0][threadIdx.x];
  __syncthreads();
  return total;
}

__global__ void __launch_bounds__(kNormChannels* kNormRowGroups)
    pool_norm_leaky_kernel(const float* in, int pool, int rows, int channels, const float* scale,
                           const float* bias, float eps, float slope, float* out) {
  __shared__ double red[kNormRowGroups][kNormChannels + 1];
  const int c = blockIdx.y * kNormChannels + threadIdx.x;
  const bool live = c < channels;
  const int64_t b = blockIdx.x;
  const float* x = in + b * rows * pool * channels + (live ? c : 0);
  float* y = out + b * rows * channels + (live ? c : 0);

  double sum = 0;
  if (live)
    for (int r = threadIdx.y; r < rows; r += kNormRowGroups) sum += pooled(x, pool, r, channels);
  const float mean = static_cast<float>(column_sum(sum, red) / rows);
  double sq = 0;
  if (live)
    for (int r = threadIdx.y; r < rows; r += kNormRowGroups) {
      const double d = pooled(x, pool, r, channels) - mean;
      sq += d * d;
    }
  const double var = column_sum(sq, red) / rows;
  if (!live) return;
  const float mul = static_cast<float>(1.0 / sqrt(var + eps)) * scale[c];
  // With pool 1 and in == out, each element is read and then written by the same thread.
  for (int r = threadIdx.y; r < rows; r += kNormRowGroups) {
    const float v = (pooled(x, pool, r, channels) - mean) * mul + bias[c];
    y[static_cast<int64_t>(r) * channels] = v < 0.f ? v * slope : v;
  }
}

// The same per (window, channel) row, one block each: at small batches the 32-channel blocks above
// are too few to fill the GPU (batch 1: 2 or 3 blocks). The rows of one channel are `channels`
// floats apart, but the blocks of a window's neighbouring channels run together and share those
// cache lines in L2.
constexpr int kRowThreads = 256;

__global__ void __launch_bounds__(kRowThreads)
    pool_norm_leaky_row_kernel(const float* in, int pool, int rows, int channels,
                               const float* scale, const float* bias, float eps, float slope,
                               float* out) {
  __shared__ double red[kRowThreads];
  const int c = blockIdx.x;
  const int64_t b = blockIdx.y;
  const float* x = in + b * rows * pool * channels + c;
  float* y = out + b * rows * channels + c;
  double sum = 0;
  for (int r = threadIdx.x; r < rows; r += kRowThreads) sum += pooled(x, pool, r, channels);
  const float mean = static_cast<float>(block_sum(sum, red) / rows);
  double sq = 0;
  for (int r = threadIdx.x; r < rows; r += kRowThreads) {
    const double d = pooled(x, pool, r, channels) - mean;
    sq += d * d;
  }
  const double var = block_sum(sq, red) / rows;
  const float mul = static_cast<float>(1.0 / sqrt(var + eps)) * scale[c];
  // With pool 1 and in == out, each element is read and then written by the same thread, and
  // every read of the sums is behind block_sum's barriers.
  for (int r = threadIdx.x; r < rows; r += kRowThreads) {
    const float v = (pooled(x, pool, r, channels) - mean) * mul + bias[c];
    y[static_cast<int64_t>(r) * channels] = v < 0.f ? v * slope : v;
  }
}

__global__ void bias_leaky_kernel(float* x, int64_t n, int width, const float* bias, float slope) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float v = x[i] + bias[i % width];
  x[i] = v < 0.f ? v * slope : v;
}

__global__ void swap_outer_kernel(const float* in, int64_t n, int outer, int inner, int width,
                                  float* out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const int64_t k = i % width, row = i / width;
  const int64_t o = row / inner, r = row % inner;
  out[(r * outer + o) * width + k] = in[i];
}

// Block (span, tile) copies the tile's part of its span.
constexpr int64_t kCopyTile = 8192;
__global__ void copy_spans_kernel(const CopySpan* spans) {
  const CopySpan s = spans[blockIdx.x];
  const int64_t first = static_cast<int64_t>(blockIdx.y) * kCopyTile;
  const int64_t last = min(s.count, first + kCopyTile);
  for (int64_t i = first + threadIdx.x; i < last; i += blockDim.x) s.to[i] = s.from[i];
}

__global__ void bias_log_softmax_kernel(float* x, int rows, int n, const float* bias) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float* row = x + static_cast<int64_t>(r) * n;
  float top = -INFINITY;
  for (int k = 0; k < n; ++k) {
    row[k] += bias[k];
    top = fmaxf(top, row[k]);
  }
  double sum = 0;
  for (int k = 0; k < n; ++k) sum += exp(static_cast<double>(row[k] - top));
  const float log_sum = static_cast<float>(log(sum)) + top;
  for (int k = 0; k < n; ++k) row[k] -= log_sum;
}

unsigned blocks(int64_t n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

__global__ void __launch_bounds__(kVoiceHeadWidth)
    voice_head_kernel(const float* hidden, const float* weight_t, const float* bias, float* out) {
  __shared__ float h[kVoiceHeadWidth];
  __shared__ double red[kVoiceHeadWidth];
  const size_t row = static_cast<size_t>(blockIdx.x) * kVoiceHeadWidth;
  const int k = threadIdx.x;
  h[k] = hidden[row + k];
  __syncthreads();
  float v = bias[k];
  for (int j = 0; j < kVoiceHeadWidth; ++j) v = fmaf(weight_t[j * kVoiceHeadWidth + k], h[j], v);
  v = fmaxf(v, 0.f);
  const double norm = block_sum(static_cast<double>(v) * v, red);
  out[row + k] = norm > 0 ? v * static_cast<float>(1.0 / sqrt(norm)) : 0.f;
}

}  // namespace

cudaError_t wave_norm(float* x, int batch, int samples, float scale, float bias, float eps,
                      cudaStream_t stream) {
  wave_norm_kernel<<<batch, kWaveThreads, 0, stream>>>(x, samples, scale, bias, eps);
  return cudaGetLastError();
}

cudaError_t sinc_im2col(const float* wave, int samples, int rows_per_window, int64_t first_row,
                        int rows, float* out, cudaStream_t stream) {
  constexpr int kRowsPerBlock = 4;
  sinc_im2col_kernel<<<blocks(rows, kRowsPerBlock), dim3(128, kRowsPerBlock), 0, stream>>>(
      wave, samples, rows_per_window, first_row, rows, out);
  return cudaGetLastError();
}

cudaError_t voice_head(const float* hidden, int batch, const float* weight_t, const float* bias,
                       float* out, cudaStream_t stream) {
  voice_head_kernel<<<batch, kVoiceHeadWidth, 0, stream>>>(hidden, weight_t, bias, out);
  return cudaGetLastError();
}

cudaError_t abs_max_pool3(const float* in, int out_rows, int channels, float* out,
                          cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(out_rows) * channels;
  abs_max_pool3_kernel<<<blocks(n, 256), 256, 0, stream>>>(in, n, channels, out);
  return cudaGetLastError();
}

cudaError_t pool_norm_leaky(const float* in, int pool, int batch, int rows, int channels,
                            const float* scale, const float* bias, float eps, float slope,
                            float* out, cudaStream_t stream) {
  // Below this many 32-channel blocks (about two per SM of the largest GPUs), one block per row:
  // a fixed count, not the device's, so that a batch class runs the same kernel on every GPU.
  constexpr int64_t kFewBlocks = 256;
  const unsigned groups = blocks(channels, kNormChannels);
  if (static_cast<int64_t>(batch) * groups < kFewBlocks) {
    pool_norm_leaky_row_kernel<<<dim3(channels, batch), kRowThreads, 0, stream>>>(
        in, pool, rows, channels, scale, bias, eps, slope, out);
  } else {
    pool_norm_leaky_kernel<<<dim3(batch, groups), dim3(kNormChannels, kNormRowGroups), 0, stream>>>(
        in, pool, rows, channels, scale, bias, eps, slope, out);
  }
  return cudaGetLastError();
}

cudaError_t bias_leaky(float* x, int rows, int n, const float* bias, float slope,
                       cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(rows) * n;
  bias_leaky_kernel<<<blocks(total, 256), 256, 0, stream>>>(x, total, n, bias, slope);
  return cudaGetLastError();
}

cudaError_t swap_outer(const float* in, int outer, int inner, int width, float* out,
                       cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(outer) * inner * width;
  swap_outer_kernel<<<blocks(total, 256), 256, 0, stream>>>(in, total, outer, inner, width, out);
  return cudaGetLastError();
}

cudaError_t copy_spans(const CopySpan* spans, int n, int64_t longest, cudaStream_t stream) {
  if (n == 0 || longest == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(n), blocks(longest, static_cast<int>(kCopyTile)));
  copy_spans_kernel<<<grid, 256, 0, stream>>>(spans);
  return cudaGetLastError();
}

cudaError_t bias_log_softmax(float* x, int rows, int n, const float* bias, cudaStream_t stream) {
  bias_log_softmax_kernel<<<blocks(rows, 128), 128, 0, stream>>>(x, rows, n, bias);
  return cudaGetLastError();
}

}  // namespace speakerseg::cuda
