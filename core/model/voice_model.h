// The GE2E speaker encoder of Resemblyzer 0.1.4 (Apache-2.0), as
// scripts/models/fetch_voice_model.sh converts it to ONNX: 40-band mel power spectrogram -> 3-layer
// LSTM (hidden 256) -> the last layer's final hidden state -> Linear 256->256 -> ReLU -> L2
// normalisation. An embedding comes from a partial of 160 mel frames (1.6 s). Loaded once; shared
// read-only by every voice engine.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/segmentation_model.h"  // ModelError

namespace speakerseg {

constexpr const char* kVoiceEncoderName = "resemblyzer-ge2e-0.1.4";
constexpr int kMelBands = 40;
constexpr int kMelFft = 400;  // 25 ms Hann window
constexpr int kMelHop = 160;  // 10 ms
constexpr int kMelBins = kMelFft / 2 + 1;
constexpr int kPartialFrames = 160;  // mel frames per embedding
constexpr int kVoiceLayers = 3;
constexpr int kVoiceHidden = 256;
constexpr int kVoiceGates = 4 * kVoiceHidden;
constexpr int kEmbeddingDim = 256;

struct VoiceLstmLayer {
  int input_size = 0;
  std::vector<float> w;     // [kVoiceGates][input_size], ONNX gate order i, o, f, c
  std::vector<float> r;     // [kVoiceGates][kVoiceHidden]
  std::vector<float> bias;  // Wb + Rb folded, [kVoiceGates]
};

struct VoiceModel {
  std::string source;   // file the weights came from, for messages
  std::string encoder;  // kVoiceEncoderName
  VoiceLstmLayer lstm[kVoiceLayers];
  std::vector<float> linear_weight;  // [kEmbeddingDim][kVoiceHidden] (out x in)
  std::vector<float> linear_bias;    // [kEmbeddingDim]

  // Reads the converted encoder. Throws ModelError naming `path` and the problem (missing file,
  // another network or shape, another encoder in its metadata) and how to get the right file,
  // ended with `name_another`, as SegmentationModel::load_onnx.
  static std::shared_ptr<const VoiceModel> load_onnx(
      const std::string& path, const std::string& name_another = "name its path");
};

}  // namespace speakerseg
