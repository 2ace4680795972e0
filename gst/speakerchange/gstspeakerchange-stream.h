// What the element owns between start() and stop(), and the streaming side that maps buffers,
// gaps and time jumps onto core/ (WindowBuffer, a WindowSegmenter) and the changes it returns
// onto messages and events. Runs on the streaming thread, under the stream lock.
#pragma once

#include <gst/audio/audio.h>
#include <gst/gst.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engines/segmentation_engine.h"
#include "engines/voice_encoder.h"
#include "gstspeakerchange-settings.h"
#include "gstspeakerchange.h"
#include "identity/voiceprints.h"
#include "scheduling/shared_segmenter.h"
#include "scheduling/window_segmenter.h"
#include "streaming/stream_settings.h"
#include "streaming/time_line.h"
#include "streaming/window_buffer.h"

namespace gstspeakerchange {

constexpr GstClockTime kMaxFilledGap = 5 * GST_SECOND;  // GAP events shorter than this: silence

// What the streaming side owns: touched by start()/stop() and, between them, only by the streaming
// thread (buffers and serialized events, under the stream lock).
struct Stream {
  speakerseg::StreamSettings settings;
  GstSpeakerChangeMode mode = GST_SPEAKER_CHANGE_MODE_AUTO;
  int batch_size = kDefaultBatchSize;
  double max_batch_wait = 0;                      // seconds (shared engine only)
  GstClockTime stats_interval = 0;                // 0: no speaker-change-stats messages
  GstClockTime next_stats = GST_CLOCK_TIME_NONE;  // buffer time of the next one
  std::unique_ptr<speakerseg::SegmentationEngine>
      engine;  // own engine, until the segmenter takes it
  // The process-wide engine and worker (shared-engine=true), held from start() to stop() only,
  // so that the pool frees them when the last element stops.
  std::shared_ptr<speakerseg::SharedScheduler> scheduler;
  // With reidentify: the own engine's voice encoder (until the segmenter takes it; a shared
  // scheduler has its own) and the people to know by name.
  std::unique_ptr<speakerseg::VoiceEncoder> voice;
  std::shared_ptr<const speakerseg::Voiceprints> enrolled;
  std::unique_ptr<speakerseg::WindowSegmenter> segmenter;  // from the first buffer on
  std::unique_ptr<speakerseg::WindowBuffer> windows;
  GstAudioInfo info;
  std::vector<float> scratch;
  std::vector<int16_t> s16_scratch;
  // Where the stretch's samples lie in buffer time, and the order of what is announced.
  speakerseg::TimeLine time_line;
  uint64_t dropped_reported = 0;
  // The engine outage last reported ("": none) and the unanalysed stream time last posted.
  std::string outage_reported;
  double unanalysed_reported = 0;
  double stall_margin = speakerseg::kDefaultStallMargin;                 // seconds; < 0: no stalls
  double outage_wait = speakerseg::SharedScheduler::kDefaultOutageWait;  // an own engine's
  bool live = false;  // upstream's answer to the LATENCY query on the first buffer
};

// Feeds `n` samples (null: silence) whose first sample has buffer time `pts` (NONE: whatever
// follows the previous samples), after checking the time line for gaps and jumps (`discont`: a
// buffer flagged DISCONT); sends the changes the worker has ready.
GstFlowReturn process(GstSpeakerChange* self, GstClockTime pts, const float* samples, size_t n,
                      bool discont = false);

// Ends the current stretch: runs the last partial window, makes every frame final, sends what is
// left; then starts afresh (EOS, discontinuity, long gap). `next_start`, where known (a long
// GAP's end), anchors the next stretch, also for a first buffer without a timestamp; otherwise
// the next buffer's PTS, or the segment start, does.
GstFlowReturn end_stretch(GstSpeakerChange* self, GstClockTime next_start = GST_CLOCK_TIME_NONE);

// A live feed stopped delivering for `waited` (StallTimer decided, under the stream lock): ends
// the stretch as end_stretch() does, then announces nobody, marked stalled.
GstFlowReturn stall_stretch(GstSpeakerChange* self, GstClockTime waited);

// Forgets the current stretch without announcing anything (flush).
void forget_stretch(Stream* s);

// After a flush: what follows is on a new time line.
void restart_time_line(Stream* s);

}  // namespace gstspeakerchange
