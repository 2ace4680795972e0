// The CUDA engine's own kernels (cuda_kernels.cu): everything between the cuBLAS products and the
// cuDNN RNN. Each function only enqueues on `stream` and returns the launch status, so that the
// caller can both run them eagerly and capture them into a CUDA graph.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engines/cuda/sinc_columns.h"

namespace speakerseg::cuda {

// Instance norm of each window's waveform, in place: x = (x - mean) / sqrt(var + eps) * scale +
// bias, mean and variance accumulated in double as the CPU engine does.
cudaError_t wave_norm(float* x, int batch, int samples, float scale, float bias, float eps,
                      cudaStream_t stream);

// The SincNet im2col rows [first_row, first_row + rows) of the whole batch, `rows_per_window`
// (a multiple of 3) per window of `samples` samples, stride 10, into out[rows][kSincLd].
cudaError_t sinc_im2col(const float* wave, int samples, int rows_per_window, int64_t first_row,
                        int rows, float* out, cudaStream_t stream);

// out[i][c] = max(|in[3i][c]|, |in[3i+1][c]|, |in[3i+2][c]|) for i < out_rows.
cudaError_t abs_max_pool3(const float* in, int out_rows, int channels, float* out,
                          cudaStream_t stream);

// For each window of `batch`: MaxPool(pool) over `in` ([batch][rows * pool][channels]; pool 1
// means no pooling, and then `in` may equal `out`), instance norm over the `rows` pooled rows of
// each channel (double accumulators), affine, LeakyReLU. out: [batch][rows][channels]. Small
// batches get one block per (window, channel), so that batch 1 fills more than 3 SMs.
cudaError_t pool_norm_leaky(const float* in, int pool, int batch, int rows, int channels,
                            const float* scale, const float* bias, float eps, float slope,
                            float* out, cudaStream_t stream);

// out[i][o][k] = in[o][i][k]: [outer][inner][width] -> [inner][outer][width], the LSTM's
// batch-major and sequence-major layouts either way. `in` and `out` may not overlap.
cudaError_t swap_outer(const float* in, int outer, int inner, int width, float* out,
                       cudaStream_t stream);

// One copy of a batch's audio, between two places in device memory.
struct CopySpan {
  const float* from;
  float* to;
  int64_t count;
};
// Makes the `n` copies of the table `spans` (in device memory), none longer than `longest`, in any
// order or at once: where one copy's target overlaps another's source or target, both must carry
// the same values there.
cudaError_t copy_spans(const CopySpan* spans, int n, int64_t longest, cudaStream_t stream);

// x[r][k] = LeakyReLU(x[r][k] + bias[k]).
cudaError_t bias_leaky(float* x, int rows, int n, const float* bias, float slope,
                       cudaStream_t stream);

// x[r] = log_softmax(x[r] + bias), the sum of exponentials in double as the CPU engine does.
cudaError_t bias_log_softmax(float* x, int rows, int n, const float* bias, cudaStream_t stream);

// GE2E's head, one block per partial: out[b] = v / |v| with v = ReLU(weight_t^T hidden[b] + bias),
// hidden [batch][kVoiceHeadWidth] (the last LSTM layer's final state), weight_t the Linear weight
// transposed ([in][out], so that neighbouring threads read neighbouring outputs' weights), |v| in
// double over a fixed-order tree. An all-zero v stays zero, as on the CPU.
constexpr int kVoiceHeadWidth = 256;
cudaError_t voice_head(const float* hidden, int batch, const float* weight_t, const float* bias,
                       float* out, cudaStream_t stream);

}  // namespace speakerseg::cuda
