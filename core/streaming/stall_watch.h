// When a live stream counts as stalled. A live source that stops delivering (a dropped feed, a
// network stream whose end never arrives) sends no EOS: without this the turn that was going on
// would stay "current" for ever, and its last changes, which wait for `latency` of newer audio,
// would never become final. A stream is stalled once its clock has run `wait` past the end of
// its newest audio: the newest audio's own lateness (upstream's latency), the right context a
// frame waits for (`latency`) and a margin for network jitter.
//
// Plain arithmetic on one time line in nanoseconds (the element: running time); the host reads
// the clock and guards the watch against its threads.
#pragma once

#include <cstdint>
#include <limits>

#include "streaming/stream_settings.h"

namespace speakerseg {

// The element's stall-margin: seconds past upstream's latency and `latency`; -1: never stalls.
inline constexpr SettingRange kStallMarginRange{"stall-margin", -1.0, 3600.0, " s"};
inline constexpr double kDefaultStallMargin = 1.0;

// How long a stream may go without audio before it counts as stalled (ns), from the element's
// latency and stall margin (seconds) and upstream's latency (ns); -1 when the margin is negative
// (never).
int64_t stall_wait(double latency, double margin, int64_t upstream_latency);

class StallWatch {
 public:
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

  // `wait` < 0: the watch is off and never declares a stall.
  explicit StallWatch(int64_t wait = -1) : wait_(wait) {}

  // Audio, or a gap (time that goes on without audio), up to `end`. True when it is the first
  // since a declared stall: the stream resumes.
  bool audio(int64_t end);
  // When the stream counts as stalled if nothing more arrives; kNever while off, before any
  // audio and once stalled (a stall is declared once).
  int64_t deadline() const;
  // The clock reads `now`: true, once, when it has reached the deadline. The stream is stalled
  // from then until audio arrives.
  bool stall(int64_t now);
  // How long `now` is past the end of the newest audio (0 before any).
  int64_t silent_for(int64_t now) const;
  bool stalled() const { return stalled_; }
  // No audio is expected any more (flush, EOS, stop): forgets the newest audio and any stall.
  void reset();

 private:
  int64_t wait_;
  bool have_audio_ = false, stalled_ = false;
  int64_t end_ = 0;
};

}  // namespace speakerseg
