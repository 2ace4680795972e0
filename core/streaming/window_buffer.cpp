#include "streaming/window_buffer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace speakerseg {

WindowBuffer::WindowBuffer(int window_samples, int step_samples, int first_end)
    : window_(window_samples),
      step_(step_samples),
      first_end_(first_end == 0 ? step_samples : first_end),
      ring_(window_samples, 0.f),
      last_end_(first_end_ - step_) {
  if (window_samples <= 0 || step_samples <= 0 || step_samples > window_samples)
    throw std::invalid_argument("WindowBuffer: need 0 < step <= window");
  reset(first_end_);
}

void WindowBuffer::push(const float* samples, size_t n, const WindowFn& on_window) {
  size_t done = 0;
  while (done < n) {
    const int64_t boundary = last_end_ + step_;
    const size_t take = static_cast<size_t>(std::min<int64_t>(boundary - total_, n - done));
    // In at most two runs (the ring wraps once): a division per sample cost more than inference
    // with a fast engine.
    for (size_t i = 0; i < take;) {
      const size_t at = static_cast<size_t>((total_ + static_cast<int64_t>(i)) % window_);
      const size_t run = std::min(static_cast<size_t>(window_) - at, take - i);
      if (samples)
        std::copy_n(samples + done + i, run, ring_.begin() + static_cast<std::ptrdiff_t>(at));
      else
        std::fill_n(ring_.begin() + static_cast<std::ptrdiff_t>(at), run, 0.f);
      i += run;
    }
    total_ += static_cast<int64_t>(take);
    done += take;
    if (total_ == boundary) emit(on_window);
  }
}

void WindowBuffer::flush_tail(const WindowFn& on_window) {
  if (has_tail()) emit(on_window);
}

void WindowBuffer::emit(const WindowFn& on_window) {
  WindowJob w;
  w.start = total_ - window_;
  w.end = total_;
  // Zeros before the stream's first sample, then the ring from the oldest sample on, in at most
  // two runs, straight into the window the caller keeps.
  const size_t window = static_cast<size_t>(window_);
  const size_t zeros = static_cast<size_t>(std::clamp<int64_t>(-w.start, 0, window_));
  w.samples.reserve(window);
  w.samples.assign(zeros, 0.f);
  for (size_t i = zeros; i < window;) {
    const size_t at = static_cast<size_t>((w.start + static_cast<int64_t>(i)) % window_);
    const size_t run = std::min(window - at, window - i);
    w.samples.insert(w.samples.end(), ring_.begin() + static_cast<std::ptrdiff_t>(at),
                     ring_.begin() + static_cast<std::ptrdiff_t>(at + run));
    i += run;
  }
  last_end_ = total_;
  on_window(std::move(w));
}

void WindowBuffer::reset() {
  std::fill(ring_.begin(), ring_.end(), 0.f);
  total_ = 0;
  last_end_ = first_end_ - step_;
}

void WindowBuffer::reset(int first_end) {
  if (first_end < 1 || first_end > step_)
    throw std::invalid_argument("WindowBuffer: need 0 < first_end <= step");
  first_end_ = first_end;
  reset();
}

int staggered_first_end(int step_samples, uint64_t index) {
  const double golden = 0.6180339887498949;
  const double fraction = std::fmod(static_cast<double>(index % 1000003) * golden, 1.0);
  const int first_end = step_samples - static_cast<int>(fraction * step_samples);
  return std::clamp(first_end, 1, step_samples);
}

}  // namespace speakerseg
