// From window results to speaker changes: powerset decoding, stitching, finalisation `latency`
// behind the newest audio, and the turn decisions. Owned by whoever runs inference (the element's
// worker thread); holds a bounded history, so memory does not grow with the stream.
#pragma once

#include <cstdint>
#include <vector>

#include "streaming/speaker_change.h"
#include "streaming/speaker_stitcher.h"
#include "streaming/stream_settings.h"
#include "streaming/turn_tracker.h"

namespace speakerseg {

class SpeakerTimeline {
 public:
  explicit SpeakerTimeline(const StreamSettings& settings);

  // Log-probabilities [frames][7] of the window whose first sample is at `start`; `end` is the
  // stream position just past its last sample (the newest audio it saw).
  void add_window(int64_t start, int64_t end, const float* logprobs, int frames);
  // End of stream (or of a stretch of it, before a reset): every covered frame becomes final.
  void finish(int64_t end);

  std::vector<SpeakerChange> take_changes();
  const std::vector<std::string>& speakers() const { return stitcher_.labels(); }
  size_t held_frames() const { return stitcher_.held_frames(); }
  void reset();

 private:
  void finalize(int64_t end_frame, int64_t announced_sample);

  StreamSettings settings_;
  SpeakerStitcher stitcher_;
  TurnTracker tracker_;
  std::vector<float> activity_;
  std::vector<FrameActivity> final_;
  std::vector<SpeakerChange> changes_;
};

}  // namespace speakerseg
