// The stream's recent audio, by stream sample position, for the voice embeddings of frames that
// are already stitched: windows arrive overlapping, each adds what is new, and what no decision
// will read again is dropped, so memory stays at about latency + one window.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <vector>

namespace speakerseg {

class AudioHistory {
 public:
  // The samples [start, start + n) of the stream; only those past end() are taken.
  void add(int64_t start, const float* samples, int64_t n) {
    if (audio_.empty() && start > begin_) begin_ = start;
    for (int64_t s = std::max(start, end()); s < start + n; ++s)
      audio_.push_back(s < 0 ? 0.f : samples[s - start]);  // negative: the window's left padding
  }
  // Forgets every sample before `sample`.
  void drop_before(int64_t sample) {
    while (!audio_.empty() && begin_ < sample) {
      audio_.pop_front();
      ++begin_;
    }
  }
  // Appends [from, to) to `out`, the part of it that is held; returns how many samples came.
  int64_t copy(int64_t from, int64_t to, std::vector<float>& out) const {
    from = std::max(from, begin_);
    to = std::min(to, end());
    for (int64_t s = from; s < to; ++s) out.push_back(audio_[static_cast<size_t>(s - begin_)]);
    return std::max<int64_t>(0, to - from);
  }
  int64_t end() const { return begin_ + static_cast<int64_t>(audio_.size()); }
  void reset() {
    audio_.clear();
    begin_ = 0;
  }

 private:
  std::deque<float> audio_;
  int64_t begin_ = 0;
};

}  // namespace speakerseg
