#include "gstspeakerchange-stall.h"

#include <gst/base/gstbasetransform.h>

#include "gstspeakerchange-private.h"

namespace gstspeakerchange {
namespace {

using speakerseg::StallWatch;

int64_t running(GstClockTime clock_time, GstClockTime base_time) {
  return clock_time > base_time ? static_cast<int64_t>(clock_time - base_time) : 0;
}

// The element's running time now; false without a clock to read.
bool running_now(GstElement* element, int64_t* now) {
  GstClock* clock = gst_element_get_clock(element);
  if (!clock) return false;
  *now = running(gst_clock_get_time(clock), gst_element_get_base_time(element));
  gst_object_unref(clock);
  return true;
}

void disarm_locked(StallTimer& t) {
  if (!t.id) return;
  gst_clock_id_unschedule(t.id);
  gst_clock_id_unref(t.id);
  t.id = nullptr;
}

void announce_stall(GstElement* element, gpointer);
gboolean on_clock(GstClock*, GstClockTime time, GstClockID id, gpointer data);

// Why `clock` cannot wait asynchronously for `due` (running time) after `base_time`, or null.
// Checked first because gst_clock_id_wait_async() fails these cases before it takes over the
// reference to the element it is given, and for an invalid time calls on_clock() at once, here,
// under the timer's mutex.
const char* cannot_wait(GstClock* clock, GstClockTime base_time, int64_t due) {
  if (!GST_OBJECT_FLAG_IS_SET(clock, GST_CLOCK_FLAG_CAN_DO_SINGLE_ASYNC) ||
      !GST_CLOCK_GET_CLASS(clock)->wait_async)
    return "the clock cannot wait asynchronously";
  if (!GST_CLOCK_TIME_IS_VALID(base_time) ||
      static_cast<GstClockTime>(due) >= GST_CLOCK_TIME_NONE - base_time)
    return "the deadline is beyond the clock's range";
  return nullptr;
}

// Armed once per deadline, not re-armed on every buffer: when the id fires and audio came in the
// meantime, on_clock() moves it on. One clock wake-up per `wait` instead of fifty a second on
// each of a hundred channels.
void arm_locked(GstSpeakerChange* self, StallTimer& t) {
  if (t.id || !t.playing || t.cannot_wait) return;
  const int64_t due = t.watch.deadline();
  if (due == StallWatch::kNever) return;
  GstClock* clock = gst_element_get_clock(GST_ELEMENT(self));
  if (!clock) return;
  const GstClockTime base_time = gst_element_get_base_time(GST_ELEMENT(self));
  const char* why = cannot_wait(clock, base_time, due);
  if (!why) {
    t.base_time = base_time;
    t.id = gst_clock_new_single_shot_id(clock, base_time + static_cast<GstClockTime>(due));
    // The id holds the element until it is freed, so that a late callback never sees it
    // finalised; past the checks above the clock owns that reference even if the wait fails.
    if (gst_clock_id_wait_async(t.id, on_clock, gst_object_ref(self), gst_object_unref) !=
        GST_CLOCK_OK) {
      gst_clock_id_unref(t.id);
      t.id = nullptr;
      why = "the clock refused the wait";
    }
  }
  gst_object_unref(clock);
  if (why) {
    // Once: this would otherwise repeat on every buffer.
    t.cannot_wait = true;
    GST_WARNING_OBJECT(self, "%s: stalls will not be announced", why);
  }
}

// The clock thread: decides only, and hands a stall to a thread that may wait.
gboolean on_clock(GstClock*, GstClockTime time, GstClockID id, gpointer data) {
  auto* self = GST_SPEAKER_CHANGE(data);
  StallTimer& t = *self->stall;
  bool due = false;
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    if (id != t.id) return TRUE;  // disarmed meanwhile
    gst_clock_id_unref(t.id);     // the clock holds the id until this returns
    t.id = nullptr;
    due = t.playing && running(time, t.base_time) >= t.watch.deadline();
    if (!due) arm_locked(self, t);
  }
  if (due) gst_element_call_async(GST_ELEMENT(self), announce_stall, nullptr, nullptr);
  return TRUE;
}

// A thread of GStreamer's pool: under the stream lock, as the streaming thread pushes, so that
// the announcement stays in order with the audio and events around it.
void announce_stall(GstElement* element, gpointer) {
  auto* self = GST_SPEAKER_CHANGE(element);
  GstPad* sinkpad = GST_BASE_TRANSFORM_SINK_PAD(self);
  GST_PAD_STREAM_LOCK(sinkpad);
  // Deactivating the pad (stop) sets flushing first and then waits for this lock; a flush
  // forgets the watch on FLUSH_STOP.
  GST_OBJECT_LOCK(sinkpad);
  const bool flushing = GST_PAD_IS_FLUSHING(sinkpad);
  GST_OBJECT_UNLOCK(sinkpad);
  bool stalled = false;
  GstClockTime waited = 0;
  if (!flushing) {
    StallTimer& t = *self->stall;
    std::lock_guard<std::mutex> lock(t.mutex);
    int64_t now = 0;
    // Audio may have come since the clock fired: the watch decides again.
    if (t.playing && running_now(element, &now)) {
      stalled = t.watch.stall(now);
      waited = static_cast<GstClockTime>(t.watch.silent_for(now));
    }
    // Not (yet) stalled: the clock fired, so nothing is armed, and in a real stall no audio will
    // come to arm it again (the clock may also read a little short of the time it fired for).
    if (!stalled) arm_locked(self, t);
  }
  if (stalled) stall_stretch(self, waited);
  GST_PAD_STREAM_UNLOCK(sinkpad);
}

}  // namespace

void stall_start(GstSpeakerChange* self, int64_t wait, int64_t lateness) {
  StallTimer& t = *self->stall;
  std::lock_guard<std::mutex> lock(t.mutex);
  disarm_locked(t);
  t.watch = StallWatch(wait, lateness);
  t.cannot_wait = false;
}

void stall_audio(GstSpeakerChange* self, GstClockTime running_time) {
  StallTimer& t = *self->stall;
  bool resumed = false;
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    // When it arrives, not only how far it reaches: time stamps may lag the clock. Only while
    // PLAYING: the base time the clock counts from is set anew on the way back to PLAYING.
    int64_t arrived = StallWatch::kUnread;
    if (t.playing) running_now(GST_ELEMENT(self), &arrived);
    if (GST_CLOCK_TIME_IS_VALID(running_time))
      resumed = t.watch.audio(static_cast<int64_t>(running_time), arrived);
    else
      t.watch.alive(arrived);
    arm_locked(self, t);
  }
  if (resumed)
    GST_INFO_OBJECT(self, "audio again at running time %" GST_TIME_FORMAT " after a stall",
                    GST_TIME_ARGS(running_time));
}

void stall_reset(GstSpeakerChange* self) {
  StallTimer& t = *self->stall;
  std::lock_guard<std::mutex> lock(t.mutex);
  disarm_locked(t);
  t.watch.reset();
}

void stall_set_playing(GstSpeakerChange* self, bool playing) {
  StallTimer& t = *self->stall;
  std::lock_guard<std::mutex> lock(t.mutex);
  t.playing = playing;
  // Leaving PLAYING: the base time changes on the way back, so the id is made again then, perhaps
  // on another clock (worth another try if this one could not wait).
  if (!playing) disarm_locked(t);
  if (playing) t.cannot_wait = false;
  arm_locked(self, t);
}

}  // namespace gstspeakerchange
