#include "engines/cuda/cudnn_lstm_weights.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "model/segmentation_model.h"

namespace speakerseg::cudnn {
namespace {

void put(std::vector<char>& space, size_t offset, const float* values, size_t count,
         const char* what, int slot) {
  const size_t n = count * sizeof(float);
  if (offset > space.size() || n > space.size() - offset)
    throw std::invalid_argument(std::string("cuDNN weight slot ") + std::to_string(slot) + " (" +
                                what + ", " + std::to_string(n) + " bytes at " +
                                std::to_string(offset) + ") does not fit in a weight space of " +
                                std::to_string(space.size()) + " bytes");
  std::memcpy(space.data() + offset, values, n);
}

}  // namespace

std::vector<char> pack_lstm_weights(const SegmentationModel& model,
                                    const std::vector<WeightSlot>& slots, size_t bytes) {
  if (slots.size() != static_cast<size_t>(kWeightSlots))
    throw std::invalid_argument("a cuDNN weight layout of the 4-layer bidirectional LSTM has " +
                                std::to_string(kWeightSlots) + " slots, not " +
                                std::to_string(slots.size()));
  std::vector<char> space(bytes, 0);
  const std::vector<float> zeros(kLstmHidden, 0.f);
  for (int layer = 0; layer < kLstmLayers; ++layer) {
    const LstmLayerWeights& w = model.lstm[layer];
    for (int dir = 0; dir < 2; ++dir)
      for (int lin = 0; lin < kLinLayers; ++lin) {
        const int s = slot_index(layer, dir, lin);
        const bool input = lin < 4;
        const size_t gate_row = static_cast<size_t>(dir) * kLstmGates +
                                static_cast<size_t>(kOnnxGate[lin % 4]) * kLstmHidden;
        const int columns = input ? w.input_size : kLstmHidden;
        const float* matrix = input ? &w.w[gate_row * columns] : &w.r[gate_row * columns];
        put(space, slots[s].matrix, matrix, static_cast<size_t>(kLstmHidden) * columns, "matrix",
            s);
        put(space, slots[s].bias, input ? &w.bias[gate_row] : zeros.data(), kLstmHidden, "bias", s);
      }
  }
  return space;
}

}  // namespace speakerseg::cudnn
