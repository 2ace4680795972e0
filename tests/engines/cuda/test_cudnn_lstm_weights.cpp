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

#include "common/reference_lstm.h"
#include "common/test_env.h"
#include "engines/cuda/cudnn_lstm_weights.h"
#include "model/segmentation_model.h"

namespace speakerseg {
namespace {

using namespace test;  // the reference LSTM

const SegmentationModel& model() {
  static const auto m = SegmentationModel::load_onnx(test::model_path());
  return *m;
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
