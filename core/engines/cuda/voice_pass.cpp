#include "engines/cuda/voice_pass.h"

#include <algorithm>

#include "model/voice_model.h"

namespace speakerseg::cuda {

static_assert(kVoiceHeadBias == static_cast<size_t>(kVoiceHidden) * kEmbeddingDim);

VoiceLayout place_voice_buffers(int batch, int frames, size_t rnn_work) {
  constexpr size_t kAlign = 256;
  VoiceLayout l;
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t offset = at;
    at += (bytes + kAlign - 1) / kAlign * kAlign;
    return offset;
  };
  const size_t f = sizeof(float), rows = static_cast<size_t>(batch) * frames;
  l.mel = take(rows * kMelBands * f);
  l.lstm_out = take(rows * kVoiceHidden * f);
  l.states = take(static_cast<size_t>(kVoiceLayers) * batch * kVoiceHidden * f);
  l.rnn_work = take(rnn_work);
  l.embeddings = take(static_cast<size_t>(batch) * kEmbeddingDim * f);
  l.total = at;
  return l;
}

std::vector<float> pack_voice_head(const VoiceModel& model) {
  std::vector<float> head(kVoiceHeadBias + kEmbeddingDim);
  for (int o = 0; o < kEmbeddingDim; ++o)
    for (int i = 0; i < kVoiceHidden; ++i)
      head[static_cast<size_t>(i) * kEmbeddingDim + o] =
          model.linear_weight[static_cast<size_t>(o) * kVoiceHidden + i];
  std::copy(model.linear_bias.begin(), model.linear_bias.end(), head.begin() + kVoiceHeadBias);
  return head;
}

}  // namespace speakerseg::cuda
