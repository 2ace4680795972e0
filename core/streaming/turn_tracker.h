// Decides, frame by final frame, who the current speaker is and when that changes. The current
// speaker keeps the turn while still active, so overlaps do not flip it back and forth; a new state
// becomes a change only once it has lasted min-speech (a speaker) or min-silence (nobody), and the
// change is dated where that state began.
#pragma once

#include <string>
#include <vector>

#include "streaming/speaker_change.h"
#include "streaming/speaker_stitcher.h"
#include "streaming/stream_settings.h"

namespace speakerseg {

class TurnTracker {
 public:
  explicit TurnTracker(const StreamSettings& settings);

  void push(const FrameActivity& frame, const std::vector<std::string>& labels,
            int64_t announced_sample, std::vector<SpeakerChange>& out);
  // The audio stopped at stream position `sample` (StretchEnd::kStalled): a change to nobody
  // there, marked `stalled`, even from nobody. A pending state not yet confirmed is dropped, as at
  // the end of a stream.
  void stall(int64_t sample, const std::vector<std::string>& labels,
             std::vector<SpeakerChange>& out);
  // Forgets the current speaker and any pending state (a pending state that has not lasted long
  // enough at the end of a stream is simply never confirmed).
  void reset();

  int current() const { return current_; }
  // `from` is `to` from now on (a provisional voice found to be a known one): the current or
  // pending speaker keeps its turn under the new id, without a change.
  void rename(int from, int to) {
    if (current_ == from) current_ = to;
    if (pending_ == from) pending_ = to;
  }

 private:
  static constexpr int kNone = -2;  // no pending state; -1 is "nobody"
  double onset_, switch_margin_;
  int64_t min_speech_frames_, min_silence_frames_;
  int current_ = -1;
  int pending_ = kNone;
  int64_t pending_start_ = 0, pending_frames_ = 0;
  double pending_confidence_ = 0;
  std::vector<std::string> pending_active_;
};

}  // namespace speakerseg
