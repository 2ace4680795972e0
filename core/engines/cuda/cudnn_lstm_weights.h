// How a model's LSTM weights go into cuDNN's RNN weight space. Plain C++ with no CUDA header,
// compiled into core: the gate mapping, the one place where a mistake gives plausible but wrong
// speakers (or voices) instead of an error, is tested on every machine, not only where a GPU runs
// the engines. Both networks use it: segmentation-3.0's 4 bidirectional layers (hidden 128) and
// GE2E's 3 unidirectional ones (hidden 256).
#pragma once

#include <cstddef>
#include <vector>

#include "model/model_spec.h"

namespace speakerseg {

struct SegmentationModel;
struct VoiceModel;

namespace cudnn {

// cuDNN's linLayerID order is i, f, c, o (0-3: input matrices, 4-7: recurrent ones); the ONNX
// gate order the models keep is i, o, f, c: linLayerID s and s + 4 take ONNX gate kOnnxGate[s].
constexpr int kOnnxGate[4] = {0, 2, 3, 1};
constexpr int kLinLayers = 8;

// A stack of LSTM layers as a model keeps them, pointing into the model: per layer W
// [directions * 4 * hidden][input_size], R [directions * 4 * hidden][hidden] and the folded bias
// Wb + Rb [directions * 4 * hidden], each direction's gates stacked i, o, f, c.
struct LstmStack {
  struct Layer {
    int input_size = 0;
    const float* w = nullptr;
    const float* r = nullptr;
    const float* bias = nullptr;
  };
  int hidden = 0;
  int directions = 1;
  std::vector<Layer> layers;

  int slot_count() const { return static_cast<int>(layers.size()) * directions * kLinLayers; }
  // Pseudo-layer directions * layer + direction, as cuDNN numbers them.
  int slot(int layer, int direction, int lin) const {
    return (directions * layer + direction) * kLinLayers + lin;
  }
};

LstmStack lstm_stack(const SegmentationModel& model);
LstmStack lstm_stack(const VoiceModel& model);

// segmentation-3.0's stack (bidirectional): its slot count and slot index.
constexpr int kWeightSlots = kLstmLayers * 2 * kLinLayers;
constexpr int slot_index(int layer, int direction, int lin) {
  return (2 * layer + direction) * kLinLayers + lin;
}

// Where cuDNN keeps one (pseudo-layer, linLayerID) matrix and its bias in the weight space, in
// bytes from its start (what cudnnGetRNNWeightParams reports). Matrices are row-major
// [hidden][inputs], biases [hidden].
struct WeightSlot {
  size_t matrix = 0, bias = 0;
  bool operator==(const WeightSlot& o) const { return matrix == o.matrix && bias == o.bias; }
};

// The host image of a weight space of `bytes` bytes laid out as `slots` (stack.slot_count()
// entries, in LstmStack::slot order) says. The models folded Wb + Rb into one bias: it goes in
// the input-bias slot (linLayerID 0-3), and the recurrent-bias slots stay zero, which cuDNN's
// double-bias LSTM adds to the same sum. Throws std::invalid_argument where the layout has the
// wrong number of slots or a slot does not fit in `bytes`, rather than write past the buffer.
std::vector<char> pack_lstm_weights(const LstmStack& stack, const std::vector<WeightSlot>& slots,
                                    size_t bytes);
std::vector<char> pack_lstm_weights(const SegmentationModel& model,
                                    const std::vector<WeightSlot>& slots, size_t bytes);

}  // namespace cudnn
}  // namespace speakerseg
