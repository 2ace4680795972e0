// What a host needs from a worker that runs windows through the segmentation network off its own
// thread. SharedSegmenterChannel (one stream of a shared engine, or of a private one from
// make_async_segmenter()) provides it; hosts hold this interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "streaming/speaker_change.h"
#include "streaming/speaker_change_detector.h"

namespace speakerseg {

class WindowSegmenter {
 public:
  virtual ~WindowSegmenter() = default;

  virtual void submit(WindowJob job) = 0;
  // Changes ready so far, in order; never blocks on inference.
  virtual std::vector<SpeakerChange> take_changes() = 0;
  // Waits until every submitted window has been run.
  virtual void drain() = 0;
  // drain(), then finalises every frame up to stream position `end` (end of stream, or with
  // StretchEnd::kStalled of a live feed that stopped delivering).
  virtual void finish(int64_t end, StretchEnd how = StretchEnd::kEnded) = 0;
  // Forgets queued windows, the timeline and unread changes (flush, discontinuity).
  virtual void reset() = 0;

  // The first inference error, if any ("" otherwise); no more windows are taken after it.
  virtual std::string error() const = 0;
  // Windows dropped because inference fell behind a live stream.
  virtual uint64_t dropped_windows() const = 0;
  // While the engine is unavailable (a remote server lost), why ("" otherwise); windows it could
  // not analyse in time are dropped, not failed, and counted here, not in dropped_windows().
  virtual std::string outage() const = 0;
  virtual uint64_t unanalysed_windows() const = 0;
  // Seconds of stream time, since the first window, that no analysed window covered (dropped
  // windows' audio that their analysed neighbours did not cover either), whatever the cause.
  virtual double unanalysed_seconds() const = 0;
  virtual size_t queue_depth() const = 0;
  // Windows of this stream in the last forward call that ran any, and that call's size counting
  // every stream's windows (the same without a shared engine).
  virtual int last_batch_size() const = 0;
  virtual int last_shared_batch_size() const = 0;
  // With identity by voice: utterance embeddings made for this stream so far, and the voice
  // encoder batch (in partials, every stream's) that embedded its latest one; 0 without.
  virtual uint64_t voice_embeddings() const = 0;
  virtual int last_voice_batch_size() const = 0;
  // What inference adds to the announcement delay now: seconds from submission to results of the
  // last window run, or the age of the oldest window still waiting if that is longer (a backlog).
  virtual double current_delay_seconds() const = 0;

 protected:
  WindowSegmenter() = default;
  WindowSegmenter(const WindowSegmenter&) = default;
  WindowSegmenter& operator=(const WindowSegmenter&) = default;
};

}  // namespace speakerseg
