#include "streaming/stall_watch.h"

#include <algorithm>
#include <cmath>

namespace speakerseg {

int64_t stall_wait(double latency, double margin, int64_t upstream_latency) {
  if (margin < 0) return -1;
  return std::max<int64_t>(upstream_latency, 0) + std::llround((latency + margin) * 1e9);
}

bool StallWatch::audio(int64_t end, int64_t arrived) {
  const bool resumed = stalled_;
  // The newest audio, not the furthest: after a jump back in time the stream goes on from there.
  end_ = end;
  alive(arrived);
  have_audio_ = true;
  stalled_ = false;
  return resumed;
}

void StallWatch::alive(int64_t arrived) {
  if (arrived != kUnread) arrived_ = arrived;
}

int64_t StallWatch::deadline() const {
  if (wait_ < 0 || !have_audio_ || stalled_) return kNever;
  const auto after = [](int64_t t, int64_t d) { return t > kNever - d ? kNever : t + d; };
  return std::max(after(end_, wait_), after(arrived_, arrival_wait_));
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
  arrived_ = kUnread;
}

}  // namespace speakerseg
