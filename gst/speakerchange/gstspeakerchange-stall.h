// A live feed that stops delivering, the clock side: core's StallWatch decides when the stream
// counts as stalled; this arms one asynchronous clock id on the element's clock for that moment
// and, when it fires, hands the announcement to a thread that may wait for the stream lock (the
// clock thread must not: it serves every asynchronous wait of the process). The announcement
// itself is gstspeakerchange-stream's stall_stretch(), under the stream lock like every other
// event the element pushes.
#pragma once

#include <gst/gst.h>

#include <cstdint>
#include <mutex>

#include "gstspeakerchange.h"
#include "streaming/stall_watch.h"

namespace gstspeakerchange {

// Shared by the streaming thread (audio), the clock thread (the id fires), the announcing thread
// and state changes, all under `mutex`. Held only briefly, but not alone: under it object locks
// are taken (the element's and, to log, its parents'; the clock's, to read it and to arm and
// unschedule the id), so nothing may take `mutex` while holding one of those (the clock calls
// on_clock() without its own). The stream lock is taken before it, never under it.
struct StallTimer {
  std::mutex mutex;
  speakerseg::StallWatch watch;  // in running time
  bool playing = false;          // the clock counts only while PLAYING
  GstClockID id = nullptr;       // armed for the watch's deadline, if any
  GstClockTime base_time = 0;    // the element's base time when `id` was armed
  // The clock could not wait for the deadline (no asynchronous waits, a time out of its range):
  // not tried again, and said once, until the next stream or PLAYING (perhaps another clock).
  bool cannot_wait = false;
};

// Live upstream (streaming thread): from now on the stream stalls `wait` ns after its newest
// audio and `wait` - `lateness` (upstream's latency) after it arrived; `wait` < 0: never.
void stall_start(GstSpeakerChange* self, int64_t wait, int64_t lateness = 0);
// Audio or a gap up to `running_time` arrives now (streaming thread); GST_CLOCK_TIME_NONE: a GAP
// event without a duration, no audio but a sign that the feed is alive.
void stall_audio(GstSpeakerChange* self, GstClockTime running_time);
// No audio is expected any more (flush, EOS, stop): disarms and forgets.
void stall_reset(GstSpeakerChange* self);
// PLAYING entered or left (a paused live pipeline delivers nothing and is not stalled).
void stall_set_playing(GstSpeakerChange* self, bool playing);

}  // namespace gstspeakerchange
