// The stream's recent audio, by stream sample position, for the voice embeddings of frames that
// are already stitched: windows arrive overlapping, each adds what is new, and what no decision
// will read again is dropped, so what is held stays at about latency + one window (the ring that
// holds it: the next power of two, at most twice that).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace speakerseg {

class AudioHistory {
 public:
  // The samples [start, start + n) of the stream; only those past end() are taken.
  void add(int64_t start, const float* samples, int64_t n) {
    if (size_ > 0 && start > end()) {
      // Windows were dropped (overload, an outage): the audio between is lost, and the samples
      // that come must land at their own positions. A gap of up to one window is silence; a
      // longer one starts the history again, so that an outage does not fill it with silence (a
      // decision over frames before the gap then finds no audio there, as for audio never heard).
      if (start - end() > kLongestGap)
        size_ = 0;
      else
        append(start - end(), nullptr);
    }
    if (size_ == 0 && start > begin_) begin_ = start;
    // end() is never negative: a first window's left padding (negative samples) is not taken.
    const int64_t from = std::max(start, end());
    if (from < start + n) append(start + n - from, samples + (from - start));
  }
  // Forgets every sample before `sample`.
  void drop_before(int64_t sample) {
    const int64_t drop = std::min(sample - begin_, size_);
    if (drop <= 0) return;
    begin_ += drop;
    size_ -= drop;
  }
  // Appends [from, to) to `out`, the part of it that is held; returns how many samples came.
  int64_t copy(int64_t from, int64_t to, std::vector<float>& out) const {
    from = std::max(from, begin_);
    to = std::min(to, end());
    for (int64_t s = from; s < to;) {
      const int64_t run = std::min(to - s, room_after(s));
      const float* at = &ring_[index(s)];
      out.insert(out.end(), at, at + run);
      s += run;
    }
    return std::max<int64_t>(0, to - from);
  }
  int64_t end() const { return begin_ + size_; }
  void reset() {
    begin_ = 0;
    size_ = 0;
  }

 private:
  static constexpr int64_t kLongestGap = 10 * 16000;  // the longest gap filled: one window

  // A ring whose size is a power of two, sample s at s & (size - 1): it grows to what the stream
  // holds and is then reused, where a deque of samples allocated a block every 128 samples.
  size_t index(int64_t s) const { return static_cast<size_t>(s) & (ring_.size() - 1); }
  int64_t room_after(int64_t s) const { return static_cast<int64_t>(ring_.size() - index(s)); }
  // Appends `count` samples at end(): `samples`, or silence where it is null.
  void append(int64_t count, const float* samples) {
    reserve(size_ + count);
    for (int64_t done = 0; done < count;) {
      const int64_t run = std::min(count - done, room_after(end()));
      float* to = &ring_[index(end())];
      if (samples)
        std::copy_n(samples + done, run, to);
      else
        std::fill_n(to, run, 0.f);
      done += run;
      size_ += run;
    }
  }
  void reserve(int64_t samples) {
    if (static_cast<size_t>(samples) <= ring_.size()) return;
    size_t size = std::max<size_t>(ring_.size(), 4096);
    while (size < static_cast<size_t>(samples)) size *= 2;
    std::vector<float> grown(size);
    for (int64_t s = begin_; s < end(); ++s)
      grown[static_cast<size_t>(s) & (size - 1)] = ring_[index(s)];
    ring_.swap(grown);
  }

  std::vector<float> ring_;
  int64_t begin_ = 0;  // the stream sample of the oldest one held
  int64_t size_ = 0;   // samples held
};

}  // namespace speakerseg
