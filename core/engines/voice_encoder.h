// The one interface every voice engine implements (engines/cpu, later engines/cuda), as
// SegmentationEngine is for the segmentation network: partials of mel frames in, L2-normalised
// GE2E embeddings out. An engine owns its scratch memory and is used by one thread at a time;
// the VoiceModel it runs is shared.
#pragma once

#include <memory>
#include <string>

#include "engines/segmentation_engine.h"  // EngineError
#include "model/voice_model.h"

namespace speakerseg {

class VoiceEncoder {
 public:
  virtual ~VoiceEncoder() = default;

  // "cpu (oneDNN sgemm, avx2 LSTM, 2 threads)", for logs and benchmark tables.
  virtual std::string description() const = 0;

  // Embeds `batch` partials of `frames` mel frames each ([batch][frames][kMelBands], one after
  // the other; the model was trained on kPartialFrames) into [batch][kEmbeddingDim] unit vectors.
  virtual void embed(const float* mel, int batch, int frames, float* embeddings) = 0;
};

}  // namespace speakerseg
