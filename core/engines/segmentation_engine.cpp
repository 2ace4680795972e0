#include "engines/segmentation_engine.h"

#include <algorithm>
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

void SegmentationEngine::forward_windows(const float* const* windows, int batch, int samples,
                                         float* logprobs) {
  check_forward_shape(batch, samples);
  const size_t n = static_cast<size_t>(samples);
  // Grown, never shrunk: resize() would zero what a smaller batch gave back at every larger one.
  if (gathered_.size() < static_cast<size_t>(batch) * n)
    gathered_.resize(static_cast<size_t>(batch) * n);
  for (int i = 0; i < batch; ++i)
    std::copy_n(windows[i], n, gathered_.begin() + static_cast<std::ptrdiff_t>(i * n));
  forward(gathered_.data(), batch, samples, logprobs);
}

const float* const* SegmentationEngine::windows_of(const float* audio, int batch, int samples) {
  check_forward_shape(batch, samples);
  windows_.resize(static_cast<size_t>(batch));
  for (int b = 0; b < batch; ++b)
    windows_[static_cast<size_t>(b)] = audio + static_cast<size_t>(b) * samples;
  return windows_.data();
}

}  // namespace speakerseg
