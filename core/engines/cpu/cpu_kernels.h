// Element-wise kernels of the CPU engine: the parts of the network that are not matrix products
// (the LSTM's are in lstm_recurrence.h).
// Compiled for several instruction sets and picked at load time, so one binary runs everywhere and
// still uses AVX-512 where it exists.
#pragma once

namespace speakerseg::cpu {

// Reads `rows` x `channels` (channels-last), writes rows/3 x channels of max over each group of 3
// rows (of |x| when `absolute`). Output rows are `out_stride` floats apart.
void max_pool3(const float* in, int rows, int channels, bool absolute, float* out);

// In-place instance norm over `rows` of channels [c0, c1) of a channels-last map, then affine and
// LeakyReLU.
void instance_norm_leaky_relu(float* x, int rows, int channels, int c0, int c1, const float* scale,
                              const float* bias, float eps, float slope);

// out[i] = leaky_relu(x[i] + bias[i % n]) over `rows` rows of `n` values.
void bias_leaky_relu(float* x, int rows, int n, const float* bias, float slope);

// Adds `bias` and replaces each row of `n` logits by its log-softmax.
void bias_log_softmax(float* x, int rows, int n, const float* bias);

}  // namespace speakerseg::cpu
