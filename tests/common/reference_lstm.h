// A plain, double-precision LSTM for the tests of the CUDA engine's host side: the four
// bidirectional layers of segmentation-3.0 with their weights read from wherever a test says, in
// particular from a weight space packed for cuDNN, read as cuDNN documents its LSTM.
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
inline size_t scrambled_layout(std::vector<WeightSlot>* slots) {
  slots->assign(cudnn::kWeightSlots, {});
  size_t cursor = 64;
  for (int pseudo = 2 * kLstmLayers - 1; pseudo >= 0; --pseudo) {
    const int layer = pseudo / 2, dir = pseudo % 2;
    for (int lin = cudnn::kLinLayers - 1; lin >= 0; --lin) {
      (*slots)[cudnn::slot_index(layer, dir, lin)].bias = cursor;
      cursor += kLstmHidden * sizeof(float) + 32;
    }
    for (int lin = cudnn::kLinLayers - 1; lin >= 0; --lin) {
      (*slots)[cudnn::slot_index(layer, dir, lin)].matrix = cursor;
      const int in = lin < 4 ? (layer == 0 ? kConvChannels : kLstmOutput) : kLstmHidden;
      cursor += static_cast<size_t>(kLstmHidden) * in * sizeof(float);
    }
  }
  return cursor + 128;
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

// The bidirectional 4-layer LSTM with zero initial states, in double, on x [T][60]: y [T][256],
// forward half first. `weights(layer, dir)` says where its weights come from.
template <class Weights>
std::vector<float> lstm(std::vector<float> x, int T, Weights weights) {
  int in = kConvChannels;
  for (int layer = 0; layer < kLstmLayers; ++layer) {
    std::vector<float> y(static_cast<size_t>(T) * kLstmOutput);
    for (int dir = 0; dir < 2; ++dir) {
      const Direction d = weights(layer, dir, in);
      std::vector<double> h(kLstmHidden, 0.0), c(kLstmHidden, 0.0), next_h(kLstmHidden);
      for (int step = 0; step < T; ++step) {
        const int t = dir == 0 ? step : T - 1 - step;
        const float* xt = &x[static_cast<size_t>(t) * in];
        for (int j = 0; j < kLstmHidden; ++j) {
          double gate[4];
          for (int g = 0; g < 4; ++g) {
            double sum = static_cast<double>(d.w_bias[g][j]) + d.r_bias[g][j];
            for (int k = 0; k < in; ++k) sum += static_cast<double>(d.w[g][j * in + k]) * xt[k];
            for (int k = 0; k < kLstmHidden; ++k)
              sum += static_cast<double>(d.r[g][j * kLstmHidden + k]) * h[k];
            gate[g] = sum;
          }
          c[j] = sigmoid(gate[kForgetGate]) * c[j] +
                 sigmoid(gate[kInputGate]) * std::tanh(gate[kNewMemory]);
          next_h[j] = sigmoid(gate[kOutputGate]) * std::tanh(c[j]);
        }
        h = next_h;
        for (int j = 0; j < kLstmHidden; ++j)
          y[static_cast<size_t>(t) * kLstmOutput + dir * kLstmHidden + j] =
              static_cast<float>(h[j]);
      }
    }
    x = std::move(y);
    in = kLstmOutput;
  }
  return x;
}

// As cuDNN reads a packed weight space: linLayerID 0 to 3 are the input-side matrices of the
// input gate, forget gate, new memory and output gate (the order of the Gate enum), 4 to 7 the
// recurrent ones in the same order, each with its own bias.
inline std::vector<float> cudnn_lstm(const std::vector<char>& space,
                                     const std::vector<WeightSlot>& slots,
                                     const std::vector<float>& x, int T) {
  return lstm(x, T, [&](int layer, int dir, int in) {
    Direction d;
    for (int g = 0; g < 4; ++g) {
      const WeightSlot& wi = slots[cudnn::slot_index(layer, dir, g)];
      const WeightSlot& ri = slots[cudnn::slot_index(layer, dir, g + 4)];
      d.w[g] = read_floats(space, wi.matrix, static_cast<size_t>(kLstmHidden) * in);
      d.r[g] = read_floats(space, ri.matrix, static_cast<size_t>(kLstmHidden) * kLstmHidden);
      d.w_bias[g] = read_floats(space, wi.bias, kLstmHidden);
      d.r_bias[g] = read_floats(space, ri.bias, kLstmHidden);
    }
    return d;
  });
}

}  // namespace speakerseg::test
