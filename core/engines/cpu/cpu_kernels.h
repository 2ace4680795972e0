// Element-wise kernels of the CPU engine: the parts of the network that are not matrix products.
// Compiled for several instruction sets and picked at load time, so one binary runs everywhere and
// still uses AVX-512 where it exists.
#pragma once

namespace speakerseg::cpu {

// The largest hidden size lstm_cell takes (segmentation-3.0: 128, the GE2E voice encoder: 256).
constexpr int kMaxLstmHidden = 256;

// One LSTM step for one sequence and one direction. `pre` holds the input projection (ONNX gate
// order i, o, f, c), `rec` the recurrent product (may be null at t = 0), `bias` Wb + Rb. Updates
// the cell state `c` in place and writes the new hidden state to `h`.
void lstm_cell(const float* pre, const float* rec, const float* bias, float* c, float* h,
               int hidden);

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
