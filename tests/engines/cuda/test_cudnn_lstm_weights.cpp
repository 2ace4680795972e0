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
#include "engines/cpu/cpu_voice_encoder.h"
#include "engines/cuda/cudnn_lstm_weights.h"
#include "engines/cuda/voice_pass.h"
#include "io/npy.h"
#include "model/segmentation_model.h"
#include "model/voice_model.h"

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

// GE2E's three unidirectional layers (hidden 256), the CUDA voice encoder's RNN: packed into a
// scrambled layout and read as cuDNN documents it, against the model's tensors read as ONNX
// defines them, on a real partial (the reference's librosa mel of meeting speech); then the
// packed head, read as the head kernel reads it, against the CPU encoder's embedding.
const VoiceModel& voice_model() {
  static const auto m = VoiceModel::load_onnx(test::env_path("SPEAKERSEG_VOICE_MODEL"));
  return *m;
}

Direction onnx_voice_direction(int layer, int in) {
  const VoiceLstmLayer& w = voice_model().lstm[layer];
  Direction d;
  auto take = [&](Gate gate, int onnx_block) {
    const size_t row = static_cast<size_t>(onnx_block) * kVoiceHidden;
    d.w[gate].assign(&w.w[row * in], &w.w[(row + kVoiceHidden) * in]);
    d.r[gate].assign(&w.r[row * kVoiceHidden], &w.r[(row + kVoiceHidden) * kVoiceHidden]);
    d.w_bias[gate].assign(&w.bias[row], &w.bias[row + kVoiceHidden]);
    d.r_bias[gate].assign(kVoiceHidden, 0.f);
  };
  take(kInputGate, 0);   // i
  take(kOutputGate, 1);  // o
  take(kForgetGate, 2);  // f
  take(kNewMemory, 3);   // c
  return d;
}

class CudnnVoiceLstmWeights : public ::testing::Test {
 protected:
  void SetUp() override {
    const NpyArray mel =
        read_npy(test::env_path("SPEAKERSEG_VOICE_REFERENCE_DIR") + "/sample_3_9.mel.npy");
    ASSERT_GE(mel.shape.at(0), kPartialFrames);
    x.assign(mel.data.begin(), mel.data.begin() + kPartialFrames * kMelBands);
    expected = lstm_stack(x, kPartialFrames, stack,
                          [](int layer, int, int in) { return onnx_voice_direction(layer, in); });
  }
  std::vector<float> read_as_cudnn(const std::vector<WeightSlot>& layout,
                                   std::vector<double>* final_hidden = nullptr) const {
    return lstm_stack(
        x, kPartialFrames, stack,
        [&](int layer, int dir, int in) {
          return cudnn_direction(space, layout, stack, layer, dir, in);
        },
        final_hidden);
  }

  const cudnn::LstmStack stack = cudnn::lstm_stack(voice_model());
  std::vector<WeightSlot> slots;
  const size_t bytes = scrambled_layout(stack, &slots);
  const std::vector<char> space = cudnn::pack_lstm_weights(stack, slots, bytes);
  std::vector<float> x, expected;
};

TEST_F(CudnnVoiceLstmWeights, PackedForCudnnTheEncoderComputesWhatOnnxDefines) {
  ASSERT_EQ(stack.slot_count(), kVoiceLayers * cudnn::kLinLayers);
  std::vector<double> h;
  const float d = max_abs_difference(read_as_cudnn(slots, &h), expected);
  std::printf(
      "[ cudnn-packing ] GE2E: max |LSTM read as cuDNN - read as ONNX| over %d frames: %.3g\n",
      kPartialFrames, d);
  EXPECT_EQ(d, 0.f);

  // The head as the kernel reads its block: v[o] = bias[o] + sum_i weight_t[i][o] h[i], ReLU,
  // unit length; against the CPU encoder on the same partial.
  const std::vector<float> head = cuda::pack_voice_head(voice_model());
  ASSERT_EQ(head.size(), cuda::kVoiceHeadBias + kEmbeddingDim);
  std::vector<double> v(kEmbeddingDim);
  double norm = 0;
  for (int o = 0; o < kEmbeddingDim; ++o) {
    double sum = head[cuda::kVoiceHeadBias + o];
    for (int i = 0; i < kVoiceHidden; ++i)
      sum += static_cast<double>(head[static_cast<size_t>(i) * kEmbeddingDim + o]) * h[i];
    v[o] = std::max(0.0, sum);
    norm += v[o] * v[o];
  }
  ASSERT_GT(norm, 0);
  std::vector<float> cpu(kEmbeddingDim);
  make_cpu_voice_encoder(VoiceModel::load_onnx(test::env_path("SPEAKERSEG_VOICE_MODEL")))
      ->embed(x.data(), 1, kPartialFrames, cpu.data());
  double cosine = 0;
  for (int o = 0; o < kEmbeddingDim; ++o) cosine += v[o] / std::sqrt(norm) * cpu[o];
  std::printf(
      "[ cudnn-packing ] GE2E: cosine of the packed pass's embedding with the CPU "
      "encoder's: %.8f\n",
      cosine);
  EXPECT_GE(cosine, 0.9999);
}

TEST_F(CudnnVoiceLstmWeights, TheCheckSeesASwappedGateOrLayer) {
  std::vector<WeightSlot> gates = slots, layers = slots;
  for (int l = 0; l < kVoiceLayers; ++l)
    for (int side : {0, 4})
      std::swap(gates[stack.slot(l, 0, 1 + side)], gates[stack.slot(l, 0, 3 + side)]);
  for (int lin = 4; lin < 8; ++lin)  // the recurrent matrices of layers 1 and 2 exchanged
    std::swap(layers[stack.slot(1, 0, lin)], layers[stack.slot(2, 0, lin)]);
  const float forget_output = max_abs_difference(read_as_cudnn(gates), expected);
  const float layer = max_abs_difference(read_as_cudnn(layers), expected);
  std::printf("[ cudnn-packing ] GE2E misread: forget/output swapped %.3g, layers swapped %.3g\n",
              forget_output, layer);
  EXPECT_GT(forget_output, 1e-2f);
  EXPECT_GT(layer, 1e-2f);
}

TEST(CudaVoicePass, BuffersAreAlignedAndDisjoint) {
  for (int batch : {1, 3, 32})
    for (int frames : {1, 160, 1000}) {
      const cuda::VoiceLayout l = cuda::place_voice_buffers(batch, frames, 12345);
      const size_t rows = static_cast<size_t>(batch) * frames, f = sizeof(float);
      const std::pair<size_t, size_t> regions[] = {
          {l.mel, rows * kMelBands * f},
          {l.lstm_out, rows * kVoiceHidden * f},
          {l.states, static_cast<size_t>(kVoiceLayers) * batch * kVoiceHidden * f},
          {l.rnn_work, 12345},
          {l.embeddings, static_cast<size_t>(batch) * kEmbeddingDim * f}};
      for (size_t i = 0; i < std::size(regions); ++i) {
        EXPECT_EQ(regions[i].first % 256, 0u);
        const size_t end = regions[i].first + regions[i].second;
        EXPECT_LE(end, i + 1 < std::size(regions) ? regions[i + 1].first : l.total)
            << "region " << i << " of batch " << batch << ", " << frames << " frames";
      }
    }
}

}  // namespace
}  // namespace speakerseg
