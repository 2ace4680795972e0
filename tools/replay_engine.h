// A measuring instrument for `speakerseg live --replay`, not an engine to run streams on: it
// answers at once with a real engine's log-probabilities of a recording's windows, handed out in
// turn. What `live` then measures is the host side alone (window buffers, the shared scheduler,
// stitching, turns, identity): its own ceiling in channels per core, which no engine speed can
// raise (issue 36 §3). Its answers are the model's, of the same recording, but not of the window
// asked: the channels' windows start anywhere in it.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engines/segmentation_engine.h"
#include "model/model_spec.h"

namespace speakerseg {

class ReplayEngine final : public SegmentationEngine {
 public:
  // `logprobs`: [windows][frames_for_samples(kWindowSamples)][kClasses], computed by `source`.
  ReplayEngine(std::shared_ptr<const std::vector<float>> logprobs, std::string source)
      : logprobs_(std::move(logprobs)), source_(std::move(source)) {
    if (logprobs_->empty() || logprobs_->size() % per_window() != 0)
      throw EngineError("replay: no whole windows of log-probabilities to replay");
  }

  std::string description() const override {
    return "replay of " + std::to_string(logprobs_->size() / per_window()) +
           " windows computed by " + source_;
  }

  void forward(const float*, int batch, int samples, float* out) override {
    check_forward_shape(batch, samples);
    if (samples != kWindowSamples)
      throw EngineError("replay: windows of " + std::to_string(kWindowSamples) +
                        " samples only, got " + std::to_string(samples));
    const size_t windows = logprobs_->size() / per_window();
    for (int i = 0; i < batch; ++i) {
      const size_t w = next_.fetch_add(1, std::memory_order_relaxed) % windows;
      std::copy_n(logprobs_->data() + w * per_window(), per_window(),
                  out + static_cast<size_t>(i) * per_window());
    }
  }

 private:
  static size_t per_window() {
    return static_cast<size_t>(frames_for_samples(kWindowSamples)) * kClasses;
  }

  std::shared_ptr<const std::vector<float>> logprobs_;
  std::string source_;
  std::atomic<size_t> next_{0};
};

}  // namespace speakerseg
