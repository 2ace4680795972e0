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
// that never waits for company, so the threading lives in one place (shared_segmenter.cpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "shared_segmenter.h"
#include "window_segmenter.h"

namespace speakerseg {

struct AsyncSegmenterOptions {
  int batch_size = 1;
  int max_queue = 4;
  bool drop_when_late = false;
};

class AsyncSegmenter final : public WindowSegmenter {
 public:
  AsyncSegmenter(std::unique_ptr<SegmentationEngine> engine, const StreamSettings& settings,
                 const AsyncSegmenterOptions& options);
  ~AsyncSegmenter() override;
  AsyncSegmenter(const AsyncSegmenter&) = delete;
  AsyncSegmenter& operator=(const AsyncSegmenter&) = delete;

  void submit(WindowJob job) override;
  // Changes ready so far, in order; never blocks on inference.
  std::vector<SpeakerChange> take_changes() override;
  // Waits until every submitted window has been run.
  void drain() override;
  // drain(), then finalises every frame up to stream position `end` (end of stream).
  void finish(int64_t end) override;
  // Forgets queued windows, the timeline and unread changes (flush, discontinuity).
  void reset() override;

  // The first inference error, if any ("" otherwise); the worker stops taking windows after it.
  std::string error() const override;
  uint64_t dropped_windows() const override;
  size_t queue_depth() const override;
  int last_batch_size() const override;
  int last_shared_batch_size() const override;
  double current_delay_seconds() const override;

 private:
  std::shared_ptr<SharedScheduler> scheduler_;
  SharedSegmenterChannel channel_;
};

}  // namespace speakerseg
