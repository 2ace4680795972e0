// The one interface every segmentation engine implements, one implementation per device
// (engines/cpu, engines/cuda). An engine owns its scratch memory and is used by one thread at a
// time; the model it runs is shared.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engines/window_origin.h"
#include "model/segmentation_model.h"

namespace speakerseg {

// A request the engine cannot serve (a window too short to give a frame, no device, ...).
class EngineError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A request the engine could not serve now but may later: a server lost or too slow to answer
// within its deadline. The scheduler retries and, past its bound, drops the windows instead of
// failing the stream (SharedScheduler).
class EngineUnavailable : public EngineError {
 public:
  using EngineError::EngineError;
};

class SegmentationEngine {
 public:
  virtual ~SegmentationEngine() = default;

  // "cpu (oneDNN, 2 threads)", for logs and benchmark tables.
  virtual std::string description() const = 0;

  // Runs `batch` windows of `samples` mono 16 kHz samples each, stored one after the other.
  // Writes log-probabilities [batch][frames_for_samples(samples)][kClasses] to `logprobs`.
  virtual void forward(const float* audio, int batch, int samples, float* logprobs) = 0;

  // The same with window i at windows[i], where its stream keeps it: a scheduler that batches
  // many streams' windows hands them over without first copying them into one block (640 KB a
  // window). This default does copy them into one and calls forward(); the CPU and CUDA engines
  // read them where they are into the buffers they fill anyway.
  virtual void forward_windows(const float* const* windows, int batch, int samples,
                               float* logprobs);

  // forward_windows() with each window's origin: an engine that keeps streams' audio on its
  // device uploads only what it has not seen of a block, about a step per window instead of the
  // whole window (the CUDA engine). This default ignores the origins.
  virtual void forward_shared(const float* const* windows, const WindowOrigin* origins, int batch,
                              int samples, float* logprobs) {
    (void)origins;
    forward_windows(windows, batch, samples, logprobs);
  }

  // Seconds spent per stage since construction, for benchmarks ("sinc+pool", "lstm", ...).
  virtual std::vector<std::pair<std::string, double>> stage_seconds() const { return {}; }

 protected:
  // forward()'s one block as forward_windows() takes it, for engines that read windows apart
  // (valid until the next call), after check_forward_shape().
  const float* const* windows_of(const float* audio, int batch, int samples);

 private:
  std::vector<float> gathered_;        // forward_windows()'s one block, for engines that need one
  std::vector<const float*> windows_;  // windows_of()'s
};

// The checks every engine's forward() makes before it touches memory: a batch of at least one
// window, each long enough for one frame. Returns the stage lengths; throws EngineError otherwise.
StageLengths check_forward_shape(int batch, int samples);

}  // namespace speakerseg
