// How the model's LSTM weights go into cuDNN's RNN weight space. Plain C++ with no CUDA header,
// compiled into core: the gate mapping, the one place where a mistake gives plausible but wrong
// speakers instead of an error, is tested on every machine, not only where a GPU runs the engine.
#pragma once

#include <cstddef>
#include <vector>

#include "model/model_spec.h"

namespace speakerseg {

struct SegmentationModel;

namespace cudnn {

// cuDNN's linLayerID order is i, f, c, o (0-3: input matrices, 4-7: recurrent ones); the ONNX
// gate order the model keeps is i, o, f, c: linLayerID s and s + 4 take ONNX gate kOnnxGate[s].
constexpr int kOnnxGate[4] = {0, 2, 3, 1};
constexpr int kLinLayers = 8;
constexpr int kWeightSlots = kLstmLayers * 2 * kLinLayers;

// Where cuDNN keeps one (pseudo-layer, linLayerID) matrix and its bias in the weight space, in
// bytes from its start (what cudnnGetRNNWeightParams reports). Matrices are row-major
// [kLstmHidden][inputs], biases [kLstmHidden].
struct WeightSlot {
  size_t matrix = 0, bias = 0;
  bool operator==(const WeightSlot& o) const { return matrix == o.matrix && bias == o.bias; }
};

// Index of a slot in a layout: (layer, direction, linLayerID) order, pseudo-layer 2 * layer +
// direction, as cuDNN numbers them for a bidirectional RNN.
constexpr int slot_index(int layer, int direction, int lin) {
  return (2 * layer + direction) * kLinLayers + lin;
}

// The host image of a weight space of `bytes` bytes laid out as `slots` (kWeightSlots entries)
// says. The model folded Wb + Rb into one bias: it goes in the input-bias slot (linLayerID 0-3),
// and the recurrent-bias slots stay zero, which cuDNN's double-bias LSTM adds to the same sum.
// Throws std::invalid_argument where the layout has the wrong number of slots or a slot does
// not fit in `bytes`, rather than write past the buffer.
std::vector<char> pack_lstm_weights(const SegmentationModel& model,
                                    const std::vector<WeightSlot>& slots, size_t bytes);

}  // namespace cudnn
}  // namespace speakerseg
