// SegmentationRunner on a worker thread, for hosts whose audio thread must not run inference (a
// live GStreamer pipeline). The audio thread submits windows and collects changes; the worker
// batches whatever windows are waiting, up to `batch_size`.
//
// Back-pressure: with `drop_when_late` off (files), submit() waits while `max_queue` windows are
// waiting, so nothing is lost. With it on (live sources), the oldest waiting window is dropped
// instead, so the announcement delay cannot grow without bound when inference is slower than real
// time; later windows still cover the dropped one's audio.
//
// It is the one-stream case of the shared engine: a private SharedScheduler with a single channel
// that never waits for company, so the threading lives in one place (shared_segmenter.cpp), and
// there is no separate class to keep in step with SharedSegmenterChannel.
#pragma once

#include <memory>

#include "scheduling/shared_segmenter.h"

namespace speakerseg {

struct AsyncSegmenterOptions {
  int batch_size = 1;
  int max_queue = 4;
  bool drop_when_late = false;
  double outage_wait = SharedScheduler::kDefaultOutageWait;  // SharedScheduler
};

// The channel holds the only reference to its scheduler, so destroying it stops and joins the
// worker. The result is used like any WindowSegmenter; it never waits for other streams' windows.
// `voice` (the voice encoder) and `enrolled` (people to know by name): for
// settings.identity.enabled.
std::unique_ptr<SharedSegmenterChannel> make_async_segmenter(
    std::unique_ptr<SegmentationEngine> engine, const StreamSettings& settings,
    const AsyncSegmenterOptions& options, std::unique_ptr<VoiceEncoder> voice = nullptr,
    std::shared_ptr<const Voiceprints> enrolled = nullptr);

}  // namespace speakerseg
