#include "engines/segmentation_engine.h"

#include <string>

namespace speakerseg {

StageLengths check_forward_shape(int batch, int samples) {
  if (batch < 1) throw EngineError("batch must be at least 1, got " + std::to_string(batch));
  const StageLengths len = stage_lengths(samples);
  if (len.frames < 1) {
    int shortest = kSincKernel;
    while (frames_for_samples(shortest) < 1) shortest += kSincStride;
    throw EngineError("a window of " + std::to_string(samples) +
                      " samples is too short: segmentation-3.0 needs at least " +
                      std::to_string(shortest) + " samples (" +
                      std::to_string(shortest * 1000 / kSampleRate) + " ms)");
  }
  return len;
}

}  // namespace speakerseg
