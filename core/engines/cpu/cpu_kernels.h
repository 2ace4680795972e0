// Element-wise kernels of the CPU engine: the parts of the network that are not matrix products
// (the LSTM's are in lstm_recurrence.h).
// Compiled for several instruction sets and picked at load time, so one binary runs everywhere and
// still uses AVX-512 where it exists.
#pragma once

namespace speakerseg::cpu {

// Reads `rows` x `channels` (channels-last), writes rows/3 x channels of max over each group of 3
// rows (of |x| when `absolute`), also channels-last.
void max_pool3(const float* in, int rows, int channels, bool absolute, float* out);

// For `rows` windows of 2 * side + 1 samples, `stride` apart from x on: sums[r][k] = w[k] +
// w[2 side - k] for k <= side (the centre sample alone at k = side) and diffs[r][k] = w[k] -
// w[2 side - k] for k < side, so that symmetric and antisymmetric filters take half the products.
void symmetric_pairs(const float* x, int rows, int stride, int side, float* sums, float* diffs);

// y = (x - mean) / sqrt(variance + eps) * scale + bias over one window of `samples` (the
// network's normalisation of the waveform); mean and variance summed in double.
void normalize_wave(const float* x, int samples, float scale, float bias, float eps, float* y);

// In-place instance norm over `rows` of a channels-last map (at most 128 channels), then affine
// and LeakyReLU.
void instance_norm_leaky_relu(float* x, int rows, int channels, const float* scale,
                              const float* bias, float eps, float slope);

// out[i] = leaky_relu(x[i] + bias[i % n]) over `rows` rows of `n` values.
void bias_leaky_relu(float* x, int rows, int n, const float* bias, float slope);

// Adds `bias` and replaces each row of `n` logits by its log-softmax.
void bias_log_softmax(float* x, int rows, int n, const float* bias);

}  // namespace speakerseg::cpu
