#include "streaming/sliding_windows.h"

#include <algorithm>
#include <stdexcept>

namespace speakerseg {

std::vector<int64_t> window_starts(int64_t total, int window, int step) {
  if (window <= 0 || step <= 0) throw std::invalid_argument("window and step must be positive");
  std::vector<int64_t> starts;
  const int64_t full = total >= window ? (total - window) / step + 1 : 0;
  for (int64_t i = 0; i < full; ++i) starts.push_back(i * step);
  const bool partial_tail = total > 0 && (total < window || (total - window) % step > 0);
  if (partial_tail) starts.push_back(full * step);
  return starts;
}

void extract_window(const std::vector<float>& audio, int64_t start, int window, float* out) {
  const int64_t size = static_cast<int64_t>(audio.size());
  const int64_t available = std::clamp<int64_t>(size - start, 0, window);
  std::copy_n(audio.begin() + std::min(start, size), available, out);
  std::fill(out + available, out + window, 0.f);
}

}  // namespace speakerseg
