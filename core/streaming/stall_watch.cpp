#include "streaming/stall_watch.h"

#include <algorithm>
#include <cmath>

namespace speakerseg {

int64_t stall_wait(double latency, double margin, int64_t upstream_latency) {
  if (margin < 0) return -1;
  return std::max<int64_t>(upstream_latency, 0) + std::llround((latency + margin) * 1e9);
}

bool StallWatch::audio(int64_t end) {
  const bool resumed = stalled_;
  // The newest audio, not the furthest: after a jump back in time the stream goes on from there.
  end_ = end;
  have_audio_ = true;
  stalled_ = false;
  return resumed;
}

int64_t StallWatch::deadline() const {
  if (wait_ < 0 || !have_audio_ || stalled_) return kNever;
  return end_ > kNever - wait_ ? kNever : end_ + wait_;
}

bool StallWatch::stall(int64_t now) {
  const int64_t due = deadline();
  if (due == kNever || now < due) return false;
  stalled_ = true;
  return true;
}

int64_t StallWatch::silent_for(int64_t now) const {
  return have_audio_ ? std::max<int64_t>(now - end_, 0) : 0;
}

void StallWatch::reset() {
  have_audio_ = false;
  stalled_ = false;
  end_ = 0;
}

}  // namespace speakerseg
