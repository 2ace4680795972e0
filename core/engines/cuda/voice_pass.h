// The CUDA voice encoder's host side, plain C++ in core (no CUDA header) so that it is checked on
// every machine: where a pass's buffers lie in the device arena, and the head's parameters as the
// head kernel reads them (cuda_kernels.h's voice_head).
#pragma once

#include <cstddef>
#include <vector>

namespace speakerseg {

struct VoiceModel;

namespace cuda {

// Where a pass of `batch` partials of `frames` mel frames keeps its buffers, in bytes from the
// arena's start, each aligned to 256 bytes: the mel frames [batch][frames][40], the LSTM's
// per-step output (cuDNN writes it; unread), its final states [layers][batch][256], cuDNN's
// workspace and the embeddings [batch][256].
struct VoiceLayout {
  size_t mel = 0, lstm_out = 0, states = 0, rnn_work = 0, embeddings = 0, total = 0;
};
VoiceLayout place_voice_buffers(int batch, int frames, size_t rnn_work);

// The head's parameters in one block: the Linear weight transposed to [in 256][out 256] (so that
// neighbouring threads read neighbouring outputs' weights), then the bias [256].
std::vector<float> pack_voice_head(const VoiceModel& model);
constexpr size_t kVoiceHeadBias = 256 * 256;  // where the bias starts in that block

}  // namespace cuda
}  // namespace speakerseg
