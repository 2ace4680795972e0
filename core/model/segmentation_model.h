// The weights of one segmentation-3.0 network, in the layouts the engines want, independent of how
// the file that carried them was organised. Loaded once; shared read-only by every engine.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/model_spec.h"

namespace speakerseg {

// A model file that cannot be used. The message names the file and what is wrong with it.
class ModelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct LstmLayerWeights {
  int input_size = 0;
  // Input weights of both directions stacked, [2 * kLstmGates, input_size], ONNX gate order
  // (i, o, f, c) within each direction: one GEMM projects a whole sequence for both directions.
  std::vector<float> w;
  std::vector<float> r;     // recurrent weights, [2][kLstmGates][kLstmHidden]
  std::vector<float> bias;  // Wb + Rb folded, [2 * kLstmGates]
};

struct SegmentationModel {
  std::string source;  // file the weights came from, for messages

  float wav_norm_scale = 1.f, wav_norm_bias = 0.f;
  float norm_eps = 1e-5f;
  float leaky_slope = 0.01f;

  // SincNet filters, [kSincFilters][kSincKernel].
  std::vector<float> sinc_filters;
  // Per-stage instance-norm affine parameters (stage 0: 80 channels, stages 1 and 2: 60).
  std::vector<float> norm_scale[3], norm_bias[3];
  // conv1 [60][5][80] and conv2 [60][5][60]: kernel tap major, then input channel, so that a
  // channels-last feature map is its own im2col matrix. The conv biases are kept for completeness;
  // the instance norm that follows each pooled convolution cancels them.
  std::vector<float> conv_weight[2], conv_bias[2];

  LstmLayerWeights lstm[kLstmLayers];

  // Head, each weight [in][out]: 256->128, 128->128, 128->7.
  std::vector<float> head_weight[3], head_bias[3];

  bool sinc_computed_from_band_edges = false;  // true when the file carried low_hz_/band_hz_

  size_t parameter_count() const;

  // Reads an ONNX export of segmentation-3.0. Throws ModelError naming `path`, the problem and how
  // to get the right file; `name_another` ends it with how the caller's user names a file (the
  // tool's flag, the element's property), since the core knows neither.
  static std::shared_ptr<const SegmentationModel> load_onnx(
      const std::string& path, const std::string& name_another = "name its path");
};

}  // namespace speakerseg
