// When a live stream counts as stalled. A live source that stops delivering (a dropped feed, a
// network stream whose end never arrives) sends no EOS: without this the turn that was going on
// would stay "current" for ever, and its last changes, which wait for `latency` of newer audio,
// would never become final. A stream is stalled once its clock has run `wait` past the end of
// its newest audio: the newest audio's own lateness (upstream's latency), the right context a
// frame waits for (`latency`) and a margin for network jitter. And as long past the moment that
// audio arrived, less the lateness upstream announced (audio that arrives that late is on time):
// a live source's time stamps may lag the clock by more than `wait` (an app that stamps from 0
// after the pipeline has played for a while, a streaming thread held up downstream), and judged by
// its time stamps alone such a feed would count as stalled on every buffer while it delivers.
//
// Plain arithmetic on one time line in nanoseconds (the element: running time); the host reads
// the clock and guards the watch against its threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "streaming/stream_settings.h"

namespace speakerseg {

// The element's stall-margin: seconds past upstream's latency and `latency`; negative (the range
// allows down to -1): never stalls.
inline constexpr SettingRange kStallMarginRange{"stall-margin", -1.0, 3600.0, " s"};
inline constexpr double kDefaultStallMargin = 1.0;

// How long a stream may go without audio before it counts as stalled (ns), from the element's
// latency and stall margin (seconds) and upstream's latency (ns); -1 when the margin is negative
// (never).
int64_t stall_wait(double latency, double margin, int64_t upstream_latency);

class StallWatch {
 public:
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
  // An arrival whose clock reading is unknown (the clock does not count): the previous one stands.
  static constexpr int64_t kUnread = std::numeric_limits<int64_t>::min();

  // `wait` < 0: the watch is off and never declares a stall. `lateness` (upstream's latency, part
  // of `wait`): how long after its end audio may arrive on time.
  explicit StallWatch(int64_t wait = -1, int64_t lateness = 0)
      : wait_(wait), arrival_wait_(std::max<int64_t>(wait - std::max<int64_t>(lateness, 0), 0)) {}

  // Audio, or a gap (time that goes on without audio), up to `end`, arriving when the clock reads
  // `arrived`. True when it is the first since a declared stall: the stream resumes.
  bool audio(int64_t end, int64_t arrived);
  // Something without audio that shows the feed alive (a GAP event without a duration) arrives
  // when the clock reads `arrived`; it does not end a declared stall, as it adds no audio.
  void alive(int64_t arrived);
  // When the stream counts as stalled if nothing more arrives: `wait` past the end of the newest
  // audio and `wait` less `lateness` past the newest arrival, whichever is later. The end alone
  // would stall a feed whose time stamps lag the clock; the arrival alone, one that delivered a
  // burst ahead of its time; and with the whole `wait` after the arrival, audio that arrives as
  // late as upstream said it would would count upstream's latency twice. kNever while off, before
  // any audio and once stalled (a stall is declared once).
  int64_t deadline() const;
  // The clock reads `now`: true, once, when it has reached the deadline. The stream is stalled
  // from then until audio arrives.
  bool stall(int64_t now);
  // How long `now` is past the end of the newest audio (0 before any).
  int64_t silent_for(int64_t now) const;
  bool stalled() const { return stalled_; }
  // No audio is expected any more (flush, EOS, stop): forgets the newest audio, its arrival and
  // any stall.
  void reset();

 private:
  int64_t wait_, arrival_wait_;
  bool have_audio_ = false, stalled_ = false;
  int64_t end_ = 0;
  int64_t arrived_ = kUnread;
};

}  // namespace speakerseg
