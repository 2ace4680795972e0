#include "window_buffer.h"

#include <algorithm>
#include <stdexcept>

namespace speakerseg {

WindowBuffer::WindowBuffer(int window_samples, int step_samples)
    : window_(window_samples),
      step_(step_samples),
      ring_(window_samples, 0.f),
      scratch_(window_samples, 0.f) {
  if (window_samples <= 0 || step_samples <= 0 || step_samples > window_samples)
    throw std::invalid_argument("WindowBuffer: need 0 < step <= window");
}

void WindowBuffer::push(const float* samples, size_t n, const WindowFn& on_window) {
  size_t done = 0;
  while (done < n) {
    const int64_t boundary = last_end_ + step_;
    const size_t take = static_cast<size_t>(std::min<int64_t>(boundary - total_, n - done));
    for (size_t i = 0; i < take; ++i)
      ring_[static_cast<size_t>((total_ + static_cast<int64_t>(i)) % window_)] =
          samples ? samples[done + i] : 0.f;
    total_ += static_cast<int64_t>(take);
    done += take;
    if (total_ == boundary) emit(on_window);
  }
}

void WindowBuffer::flush_tail(const WindowFn& on_window) {
  if (has_tail()) emit(on_window);
}

void WindowBuffer::emit(const WindowFn& on_window) {
  const int64_t start = total_ - window_;
  for (int64_t i = 0; i < window_; ++i) {
    const int64_t pos = start + i;
    scratch_[static_cast<size_t>(i)] = pos < 0 ? 0.f : ring_[static_cast<size_t>(pos % window_)];
  }
  last_end_ = total_;
  on_window(start, scratch_.data());
}

void WindowBuffer::reset() {
  std::fill(ring_.begin(), ring_.end(), 0.f);
  total_ = last_end_ = 0;
}

}  // namespace speakerseg
