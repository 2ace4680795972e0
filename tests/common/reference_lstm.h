// A plain, double-precision LSTM for the tests of the CUDA engines' host side: a stack of LSTM
// layers (segmentation-3.0's 4 bidirectional ones, GE2E's 3 unidirectional ones) with their
// weights read from wherever a test says, in particular from a weight space packed for cuDNN,
// read as cuDNN documents its LSTM.
#pragma once

#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "engines/cuda/cudnn_lstm_weights.h"
#include "model/model_spec.h"

namespace speakerseg::test {

using cudnn::WeightSlot;

// A layout unlike the order the packer walks in: pseudo-layers last to first, in each the biases
// before the matrices, linLayerIDs backwards, with gaps. Returns the weight space size.
inline size_t scrambled_layout(const cudnn::LstmStack& stack, std::vector<WeightSlot>* slots) {
  slots->assign(stack.slot_count(), {});
  size_t cursor = 64;
  const int pseudo_layers = static_cast<int>(stack.layers.size()) * stack.directions;
  for (int pseudo = pseudo_layers - 1; pseudo >= 0; --pseudo) {
    const int layer = pseudo / stack.directions, dir = pseudo % stack.directions;
    for (int lin = cudnn::kLinLayers - 1; lin >= 0; --lin) {
      (*slots)[stack.slot(layer, dir, lin)].bias = cursor;
      cursor += stack.hidden * sizeof(float) + 32;
    }
    for (int lin = cudnn::kLinLayers - 1; lin >= 0; --lin) {
      (*slots)[stack.slot(layer, dir, lin)].matrix = cursor;
      const int in = lin < 4 ? stack.layers[layer].input_size : stack.hidden;
      cursor += static_cast<size_t>(stack.hidden) * in * sizeof(float);
    }
  }
  return cursor + 128;
}

// segmentation-3.0's stack shape (the weights do not matter to the layout).
inline cudnn::LstmStack segmentation_stack_shape() {
  cudnn::LstmStack s;
  s.hidden = kLstmHidden;
  s.directions = 2;
  for (int layer = 0; layer < kLstmLayers; ++layer)
    s.layers.push_back({layer == 0 ? kConvChannels : kLstmOutput, nullptr, nullptr, nullptr});
  return s;
}

inline size_t scrambled_layout(std::vector<WeightSlot>* slots) {
  return scrambled_layout(segmentation_stack_shape(), slots);
}

inline std::vector<float> read_floats(const std::vector<char>& space, size_t offset, size_t count) {
  std::vector<float> v(count);
  std::memcpy(v.data(), space.data() + offset, count * sizeof(float));
  return v;
}

inline double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// One direction of one layer: matrices and biases per gate.
enum Gate { kInputGate, kForgetGate, kNewMemory, kOutputGate };
struct Direction {
  std::vector<float> w[4], r[4], w_bias[4], r_bias[4];
};

// The stack (layers and directions as `shape` says, its weights ignored) with zero initial
// states, in double, on x [T][first layer's input]: y [T][directions * hidden], forward half
// first. `weights(layer, dir, in)` says where its weights come from. `final_hidden`, when given,
// gets the last layer's forward-direction state after its last step (what GE2E's head reads).
// `round`, when given, rounds both operands of every product (the matrices, x and h(t-1) as the
// fp32 values a GPU holds): tensor-core math emulated (core/engines/cpu/emulated_precision.h);
// biases, sums, gates and cell stay as they are.
template <class Weights>
std::vector<float> lstm_stack(std::vector<float> x, int T, const cudnn::LstmStack& shape,
                              Weights weights, std::vector<double>* final_hidden = nullptr,
                              float (*round)(float) = nullptr) {
  auto r = [&](double v) { return round ? round(static_cast<float>(v)) : v; };
  const int H = shape.hidden, D = shape.directions;
  for (size_t layer = 0; layer < shape.layers.size(); ++layer) {
    const int in = shape.layers[layer].input_size;
    std::vector<float> y(static_cast<size_t>(T) * D * H);
    for (int dir = 0; dir < D; ++dir) {
      Direction d = weights(static_cast<int>(layer), dir, in);
      if (round)
        for (int g = 0; g < 4; ++g) {
          for (float& v : d.w[g]) v = round(v);
          for (float& v : d.r[g]) v = round(v);
        }
      std::vector<double> h(H, 0.0), c(H, 0.0), next_h(H), h_in(H, 0.0);
      std::vector<double> xt(in);
      for (int step = 0; step < T; ++step) {
        const int t = dir == 0 ? step : T - 1 - step;
        for (int k = 0; k < in; ++k) xt[k] = r(x[static_cast<size_t>(t) * in + k]);
        for (int k = 0; k < H; ++k) h_in[k] = r(h[k]);
        for (int j = 0; j < H; ++j) {
          double gate[4];
          for (int g = 0; g < 4; ++g) {
            double sum = static_cast<double>(d.w_bias[g][j]) + d.r_bias[g][j];
            for (int k = 0; k < in; ++k)
              sum += static_cast<double>(d.w[g][static_cast<size_t>(j) * in + k]) * xt[k];
            for (int k = 0; k < H; ++k)
              sum += static_cast<double>(d.r[g][static_cast<size_t>(j) * H + k]) * h_in[k];
            gate[g] = sum;
          }
          c[j] = sigmoid(gate[kForgetGate]) * c[j] +
                 sigmoid(gate[kInputGate]) * std::tanh(gate[kNewMemory]);
          next_h[j] = sigmoid(gate[kOutputGate]) * std::tanh(c[j]);
        }
        h = next_h;
        for (int j = 0; j < H; ++j)
          y[(static_cast<size_t>(t) * D + dir) * H + j] = static_cast<float>(h[j]);
      }
      if (final_hidden && dir == 0 && layer + 1 == shape.layers.size()) *final_hidden = h;
    }
    x = std::move(y);
  }
  return x;
}

// segmentation-3.0's four bidirectional layers on x [T][60]: y [T][256].
template <class Weights>
std::vector<float> lstm(std::vector<float> x, int T, Weights weights,
                        float (*round)(float) = nullptr) {
  return lstm_stack(std::move(x), T, segmentation_stack_shape(), weights, nullptr, round);
}

// As cuDNN reads a packed weight space: linLayerID 0 to 3 are the input-side matrices of the
// input gate, forget gate, new memory and output gate (the order of the Gate enum), 4 to 7 the
// recurrent ones in the same order, each with its own bias; pseudo-layer directions * layer + dir.
inline Direction cudnn_direction(const std::vector<char>& space,
                                 const std::vector<WeightSlot>& slots,
                                 const cudnn::LstmStack& shape, int layer, int dir, int in) {
  Direction d;
  const size_t H = shape.hidden;
  for (int g = 0; g < 4; ++g) {
    const WeightSlot& wi = slots[shape.slot(layer, dir, g)];
    const WeightSlot& ri = slots[shape.slot(layer, dir, g + 4)];
    d.w[g] = read_floats(space, wi.matrix, H * in);
    d.r[g] = read_floats(space, ri.matrix, H * H);
    d.w_bias[g] = read_floats(space, wi.bias, H);
    d.r_bias[g] = read_floats(space, ri.bias, H);
  }
  return d;
}

inline std::vector<float> cudnn_lstm(const std::vector<char>& space,
                                     const std::vector<WeightSlot>& slots,
                                     const std::vector<float>& x, int T,
                                     float (*round)(float) = nullptr) {
  const cudnn::LstmStack shape = segmentation_stack_shape();
  return lstm(
      x, T,
      [&](int layer, int dir, int in) {
        return cudnn_direction(space, slots, shape, layer, dir, in);
      },
      round);
}

}  // namespace speakerseg::test
