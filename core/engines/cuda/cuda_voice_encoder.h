// The GE2E voice encoder on one GPU, behind the same VoiceEncoder interface as the CPU one: the
// three LSTM layers as one unidirectional cuDNN RNN (the segmentation engine's RNN code,
// cudnn_rnn.h), the head as one kernel, each batch class's pass captured into a CUDA graph. The mel
// front end stays on the host (features/mel_spectrogram.h). Lives in the CUDA module like the
// segmentation engine (cuda_engine.h says where the module is looked for); this header pulls in no
// CUDA header.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "engines/cuda/cuda_engine.h"  // LstmAlgorithm
#include "engines/voice_encoder.h"

namespace speakerseg {

struct CudaVoiceEncoderOptions {
  int device = 0;
  // auto: persist-dynamic up to 2 partials, standard above, persist-dynamic falling back to
  // standard with a warning where it cannot run (as in the segmentation engine).
  // persist-static-small-h is refused when the encoder is made, before any CUDA call: cuDNN does
  // not run it for this 256-wide LSTM (cuda::check_voice_lstm_algorithm).
  LstmAlgorithm lstm_algorithm = LstmAlgorithm::kAuto;
  bool cuda_graphs = true;
  bool tf32 = false;
  // Partials per pass; embed() runs larger batches as several passes. Batches run padded up to a
  // class (1, 2, 4, ... below max_batch, and max_batch), each planned, run and captured for
  // 160-frame partials when the encoder is made.
  int max_batch = 32;
  bool fill_arena_nan = false;  // tests: a read of memory nothing wrote shows as NaN
  std::function<void(const std::string&)> warn;  // null: stderr
};

// Throws EngineError with a clear message where lstm_algorithm is one the encoder cannot run
// (first, even without a GPU), the module, its libraries or a device are missing (as
// make_cuda_engine), or the GPU cannot hold the encoder.
std::unique_ptr<VoiceEncoder> make_cuda_voice_encoder(std::shared_ptr<const VoiceModel> model,
                                                      const CudaVoiceEncoderOptions& options = {});

// For a caller whose one lstm-algorithm setting is the segmentation engine's and is passed on to
// the voice encoder too (the element's lstm-algorithm, speakerseg --lstm-algorithm): the voice
// encoder's algorithm. persist-static-small-h, which the voice encoder refuses, becomes auto, and
// *note (when given) says so for the caller's log; any other setting is the same, *note empty.
LstmAlgorithm voice_lstm_algorithm(LstmAlgorithm segmentation, std::string* note = nullptr);

}  // namespace speakerseg
