#include "engines/cuda/cudnn_lstm_weights.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "model/segmentation_model.h"
#include "model/voice_model.h"

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

LstmStack lstm_stack(const SegmentationModel& model) {
  LstmStack s;
  s.hidden = kLstmHidden;
  s.directions = 2;
  for (const LstmLayerWeights& w : model.lstm)
    s.layers.push_back({w.input_size, w.w.data(), w.r.data(), w.bias.data()});
  return s;
}

LstmStack lstm_stack(const VoiceModel& model) {
  LstmStack s;
  s.hidden = kVoiceHidden;
  s.directions = 1;
  for (const VoiceLstmLayer& w : model.lstm)
    s.layers.push_back({w.input_size, w.w.data(), w.r.data(), w.bias.data()});
  return s;
}

std::vector<char> pack_lstm_weights(const LstmStack& stack, const std::vector<WeightSlot>& slots,
                                    size_t bytes) {
  if (slots.size() != static_cast<size_t>(stack.slot_count()))
    throw std::invalid_argument("a cuDNN weight layout of this " +
                                std::to_string(stack.layers.size()) + "-layer LSTM has " +
                                std::to_string(stack.slot_count()) + " slots, not " +
                                std::to_string(slots.size()));
  std::vector<char> space(bytes, 0);
  const int H = stack.hidden;
  const std::vector<float> zeros(H, 0.f);
  for (size_t layer = 0; layer < stack.layers.size(); ++layer) {
    const LstmStack::Layer& w = stack.layers[layer];
    for (int dir = 0; dir < stack.directions; ++dir)
      for (int lin = 0; lin < kLinLayers; ++lin) {
        const int s = stack.slot(static_cast<int>(layer), dir, lin);
        const bool input = lin < 4;
        const size_t gate_row = (static_cast<size_t>(dir) * 4 + kOnnxGate[lin % 4]) * H;
        const int columns = input ? w.input_size : H;
        const float* matrix = (input ? w.w : w.r) + gate_row * columns;
        put(space, slots[s].matrix, matrix, static_cast<size_t>(H) * columns, "matrix", s);
        put(space, slots[s].bias, input ? w.bias + gate_row : zeros.data(), H, "bias", s);
      }
  }
  return space;
}

std::vector<char> pack_lstm_weights(const SegmentationModel& model,
                                    const std::vector<WeightSlot>& slots, size_t bytes) {
  return pack_lstm_weights(lstm_stack(model), slots, bytes);
}

}  // namespace speakerseg::cudnn
