// The CUDA engine's LSTM weight packing, checked on every machine: a weight space packed for
// cuDNN and read the way cuDNN documents its LSTM (cudnnRNNMode_t: gates i, f, c', o as
// linLayerID 0-3 on the input and 4-7 on the recurrent side, one bias of each kind per gate,
// pseudo-layer 2 * layer + direction) must compute, over all four bidirectional layers, what
// ONNX's LSTM (gates i, o, f, c) computes from the model's weights. Each side is transcribed from
// its own documentation, neither from the packer's gate table. A wrong mapping would raise no
// error on a GPU: it would give plausible, wrong speakers.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "cuda/cudnn_lstm_weights.h"
#include "segmentation_model.h"
#include "test_env.h"

namespace speakerseg {
namespace {

using cudnn::WeightSlot;

const SegmentationModel& model() {
  static const auto m = SegmentationModel::load_onnx(test::model_path());
  return *m;
}

// A layout unlike the order the packer walks in: pseudo-layers last to first, in each the biases
// before the matrices, linLayerIDs backwards, with gaps. Returns the weight space size.
size_t scrambled_layout(std::vector<WeightSlot>* slots) {
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
      const int in = lin < 4 ? model().lstm[layer].input_size : kLstmHidden;
      cursor += static_cast<size_t>(kLstmHidden) * in * sizeof(float);
    }
  }
  return cursor + 128;
}

std::vector<float> read_floats(const std::vector<char>& space, size_t offset, size_t count) {
  std::vector<float> v(count);
  std::memcpy(v.data(), space.data() + offset, count * sizeof(float));
  return v;
}

double sigmoid(double x) {
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
std::vector<float> cudnn_lstm(const std::vector<char>& space, const std::vector<WeightSlot>& slots,
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

// As ONNX Runtime reads the model's tensors: W, R and B stack the gates in the order i, o, f, c
// (the model keeps W and R so, and B folded to Wb + Rb).
std::vector<float> onnx_lstm(const std::vector<float>& x, int T) {
  return lstm(x, T, [&](int layer, int dir, int in) {
    const LstmLayerWeights& w = model().lstm[layer];
    Direction d;
    auto take = [&](Gate gate, int onnx_block) {
      const size_t row =
          static_cast<size_t>(dir) * kLstmGates + static_cast<size_t>(onnx_block) * kLstmHidden;
      d.w[gate].assign(&w.w[row * in], &w.w[(row + kLstmHidden) * in]);
      d.r[gate].assign(&w.r[row * kLstmHidden], &w.r[(row + kLstmHidden) * kLstmHidden]);
      d.w_bias[gate].assign(&w.bias[row], &w.bias[row + kLstmHidden]);
      d.r_bias[gate].assign(kLstmHidden, 0.f);
    };
    take(kInputGate, 0);   // i
    take(kOutputGate, 1);  // o
    take(kForgetGate, 2);  // f
    take(kNewMemory, 3);   // c
    return d;
  });
}

float max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

// Unit-normal features: about the scale the last instance norm hands the LSTM.
std::vector<float> features(int T) {
  std::mt19937 rng(20261130);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(T) * kConvChannels);
  for (float& v : x) v = normal(rng);
  return x;
}

constexpr int kFrames = 48;

// The real model packed into a scrambled layout, and what ONNX makes of kFrames of features.
class CudnnLstmWeights : public ::testing::Test {
 protected:
  std::vector<WeightSlot> slots;
  const size_t bytes = scrambled_layout(&slots);
  const std::vector<char> space = cudnn::pack_lstm_weights(model(), slots, bytes);
  const std::vector<float> x = features(kFrames);
  const std::vector<float> expected = onnx_lstm(x, kFrames);
};

TEST_F(CudnnLstmWeights, PackedForCudnnTheLstmComputesWhatOnnxDefines) {
  const float d = max_abs_difference(cudnn_lstm(space, slots, x, kFrames), expected);
  std::printf(
      "[ cudnn-packing ] max |LSTM read as cuDNN - LSTM read as ONNX| over %d frames: %.3g\n",
      kFrames, d);
  EXPECT_EQ(d, 0.f);  // the same arithmetic on the same numbers, read from two places
  float spread = 0;
  for (float v : expected) spread = std::max(spread, std::fabs(v));
  EXPECT_GT(spread, 0.1f)
      << "the hidden states are all near zero: the comparison would prove little";
}

// The check above has teeth: the mistakes a packer makes (two gates swapped, the directions
// swapped, the bias in the wrong slot) each change the output far beyond its tolerance.
TEST_F(CudnnLstmWeights, TheCheckSeesASwappedGateDirectionOrBias) {
  auto misread = [&](auto change) {
    std::vector<WeightSlot> wrong = slots;
    for (int layer = 0; layer < kLstmLayers; ++layer)
      for (int dir = 0; dir < 2; ++dir) change(wrong, layer, dir);
    return max_abs_difference(cudnn_lstm(space, wrong, x, kFrames), expected);
  };
  using Slots = std::vector<WeightSlot>;
  const float forget_output = misread([](Slots& s, int l, int d) {
    for (int side : {0, 4})
      std::swap(s[cudnn::slot_index(l, d, 1 + side)], s[cudnn::slot_index(l, d, 3 + side)]);
  });
  const float directions = misread([](Slots& s, int l, int d) {
    if (d == 0)
      for (int lin = 4; lin < 8; ++lin)  // recurrent matrices of the two directions exchanged
        std::swap(s[cudnn::slot_index(l, 0, lin)], s[cudnn::slot_index(l, 1, lin)]);
  });
  const float bias = misread([](Slots& s, int l, int d) {
    for (int lin = 0; lin < 4; ++lin)  // the bias read from one gate over
      s[cudnn::slot_index(l, d, lin)].bias = s[cudnn::slot_index(l, d, (lin + 1) % 4)].bias;
  });
  std::printf("[ cudnn-packing ] misread: forget/output swapped %.3g, directions %.3g, bias %.3g\n",
              forget_output, directions, bias);
  EXPECT_GT(forget_output, 1e-2f);
  EXPECT_GT(directions, 1e-2f);
  EXPECT_GT(bias, 1e-2f);
}

TEST_F(CudnnLstmWeights, ALayoutThatDoesNotFitIsAnErrorNotAnOverflow) {
  EXPECT_NO_THROW(cudnn::pack_lstm_weights(model(), slots, bytes));
  slots[cudnn::slot_index(3, 1, 7)].matrix = bytes - 4;
  try {
    cudnn::pack_lstm_weights(model(), slots, bytes);
    ADD_FAILURE() << "a slot past the end of the weight space was packed";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("does not fit"), std::string::npos) << e.what();
  }
  slots.pop_back();
  EXPECT_THROW(cudnn::pack_lstm_weights(model(), slots, bytes), std::invalid_argument);
}

}  // namespace
}  // namespace speakerseg
