// The most recent 10 s of a stream, cut into windows that end every `step` samples. The first
// windows are zero-padded on the left, so that results start after `step` and not after 10 s.
// Sample positions count from the first sample pushed since the last reset.
//
// `first_end` (1..step, default step) places the first window's end, and so the phase of all of
// them: streams started together that are given different phases do not all need inference at
// the same instant.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "model/model_spec.h"

namespace speakerseg {

// One window of a stream, handed from WindowBuffer to whoever runs the network on it.
struct WindowJob {
  int64_t start = 0;  // stream position of the first sample (negative: left zero padding)
  int64_t end = 0;    // stream position just past the last sample
  std::vector<float> samples;

  // A copy of a full window of the model (kWindowSamples) from stream position `start`.
  static WindowJob from_window(int64_t start, const float* samples) {
    return {start, start + kWindowSamples, std::vector<float>(samples, samples + kWindowSamples)};
  }
};

class WindowBuffer {
 public:
  // Called with each window: window_samples samples from position `start` (negative while the
  // stream is shorter than a window), the caller's to keep (a queue takes it without a copy).
  using WindowFn = std::function<void(WindowJob&& window)>;

  WindowBuffer(int window_samples, int step_samples, int first_end = 0);

  // Appends samples (null: silence) and calls `on_window` for every step boundary they cross, in
  // order, so a buffer longer than a step loses no window.
  void push(const float* samples, size_t n, const WindowFn& on_window);

  // Samples have arrived since the end of the last window (for the final window at EOS).
  bool has_tail() const { return total_ > std::max<int64_t>(last_end_, 0); }
  // Calls `on_window` once with the window ending at the newest sample.
  void flush_tail(const WindowFn& on_window);

  int64_t total() const { return total_; }
  int window_samples() const { return window_; }
  int step_samples() const { return step_; }
  // Forgets every sample: the next one is sample 0 again.
  void reset();
  // The same, and the first window now ends at sample `first_end` (0 < first_end <= step).
  void reset(int first_end);

 private:
  void emit(const WindowFn& on_window);

  int window_, step_, first_end_;
  std::vector<float> ring_;       // ring_[i % window] holds sample i of the last `window` samples
  int64_t total_ = 0, last_end_;  // last_end_ < 0 before the first window: first_end - step
};

// A first_end for the index-th of several streams: the golden-ratio sequence spreads any number of
// streams, added one by one, near evenly over a step. Index 0 gets `step` (the unstaggered phase).
int staggered_first_end(int step_samples, uint64_t index);

}  // namespace speakerseg
