#include "streaming/time_line.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "model/model_spec.h"

namespace speakerseg {
namespace {

constexpr int64_t kNsPerSample = 1'000'000'000 / kSampleRate;  // 62 500, exactly
static_assert(1'000'000'000 % kSampleRate == 0);

int64_t samples_in(int64_t ns) {
  return std::llround(static_cast<double>(ns) / kNsPerSample);
}

std::string seconds(int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f s", static_cast<double>(ns) / 1e9);
  return text;
}

}  // namespace

void TimeLine::begin_stretch(int64_t start) {
  const bool used = line_used_ || stamped_;
  std::string why;
  if (!restart_.empty()) {
    why = restart_;
  } else if (line_used_ && start < line_end_ - options_.alignment) {
    why = "the timestamps went back " + seconds(line_end_ - start) + ", to " + seconds(start) +
          ", before the end of the audio already analysed (" + seconds(line_end_) + ")";
    if (!after_.empty()) why += " " + after_;
  }
  restart_.clear();
  after_.clear();
  if (used && !why.empty()) {
    ++line_;
    line_used_ = false;
    stamped_ = false;
    new_line_ = why;
  }
  in_stretch_ = true;
  base_ = start;
  behind_since_ = -1;
  skipping_ = false;
}

void TimeLine::restart(const std::string& why) {
  in_stretch_ = false;
  restart_ = why;
}

Placement TimeLine::place(int64_t pts, int64_t total, int64_t n, bool discont) {
  const int64_t jump = pts - time_of(total);
  Placement p;
  // Once dropping, to the sample: what is left behind would stay as an offset.
  if (jump >= (skipping_ ? 0 : -options_.alignment)) {
    behind_since_ = -1;
    skipping_ = false;
    if (jump <= options_.alignment) return p;
    if (jump < options_.max_filled) {
      p.silence = samples_in(jump);
      return p;
    }
    p.action = Placement::Action::kNewStretch;
    p.why = "the timestamps jump forward " + seconds(jump) + ", from " + seconds(pts - jump) +
            " to " + seconds(pts);
    return p;
  }
  // Behind the samples: jitter, or a source that sends what it owes at once, until it lasts.
  const int64_t behind = -jump;
  if (behind_since_ < 0) {
    behind_since_ = total;
    behind_first_ = behind;
  }
  const int64_t waited = (total - behind_since_) * kNsPerSample;
  if (discont && !skipping_) {
    behind_since_ = -1;
    p.action = Placement::Action::kNewStretch;
    p.why = "a discontinuity " + seconds(behind) + " back, from " + seconds(pts + behind) + " to " +
            seconds(pts);
    return p;
  }
  if (!skipping_ && waited < options_.discont_wait) return p;
  // Timestamps that kept pace with the audio moved back for good (a clock that restarted, a
  // shifted source): a small shift costs the audio that repeats time, a large one a new stretch.
  // Timestamps that fell further behind as audio came (a backlog stamped on arrival) catch up
  // once the source runs at real time again: until then its audio repeats time.
  const bool kept_pace = behind - behind_first_ < waited / 2;
  if (!skipping_ && kept_pace && behind > options_.max_skipped) {
    behind_since_ = -1;
    p.action = Placement::Action::kNewStretch;
    p.why = "the timestamps went back " + seconds(behind) + ", from " + seconds(pts + behind) +
            " to " + seconds(pts) + ", and stayed there";
    return p;
  }
  p.skip = std::min(n, samples_in(behind));
  if (!skipping_)
    p.why = "the timestamps stayed " + seconds(behind) + " behind the audio for " +
            seconds(waited) + ": dropping the audio that repeats time already analysed";
  skipping_ = true;
  return p;
}

int64_t TimeLine::time_of(int64_t sample) const {
  return base_ + sample * kNsPerSample;
}

void TimeLine::reached(int64_t sample) {
  const int64_t end = time_of(sample);
  if (!line_used_ || end > line_end_) line_end_ = end;
  line_used_ = true;
}

TimeLine::Stamp TimeLine::stamp(int64_t time) {
  Stamp s;
  s.line = line_;
  s.time = stamped_ ? std::max(time, last_stamp_) : time;
  last_stamp_ = s.time;
  stamped_ = true;
  s.new_line = std::move(new_line_);
  new_line_.clear();
  return s;
}

}  // namespace speakerseg
