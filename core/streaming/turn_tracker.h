// Decides, frame by final frame, who the current speaker is and when that changes. The current
// speaker keeps the turn while still active, so overlaps do not flip it back and forth; a new state
// becomes a change only once it has lasted min-speech (a speaker) or min-silence (nobody), and the
// change is dated where that state began. A silence shorter than min-silence is a pause inside the
// turn when the same speaker goes on after it; when somebody else does, it is a change to nobody
// too (from min-gap on), announced with the change to the next speaker.
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
  // `from` was `to` from stream position `since` on (identity by voice found out later): every
  // change announced to `from` at or after `since`, among the last kRemembered, is revised (a
  // revision in `out`, see SpeakerChange::revision), and the current or pending speaker goes on
  // under the new id. A current turn of `from` that began before `since` ends there: a change to
  // `to` at `since`, announced now.
  void revise(int from, int to, int64_t since, const std::vector<std::string>& labels,
              int64_t announced_sample, std::vector<SpeakerChange>& out);
  static constexpr size_t kRemembered = 256;

 private:
  static constexpr int kNone = -2;  // no pending state; -1 is "nobody"
  double onset_, switch_margin_;
  int64_t min_speech_frames_, min_silence_frames_, min_gap_frames_;
  int current_ = -1;
  int pending_ = kNone;
  int64_t pending_start_ = 0, pending_frames_ = 0;
  double pending_confidence_ = 0;
  std::vector<std::string> pending_active_;
  // The silence just before the pending speaker: a change to nobody if they take over.
  struct Gap {
    int64_t start = 0, frames = 0;
    double confidence = 0;
  } gap_;
  struct Announced {
    int64_t sample;
    int speaker;
  };
  std::vector<Announced> announced_;  // the last kRemembered changes to a speaker
  int64_t current_since_ = 0;         // where the current speaker's change was dated
  void remember(int64_t sample, int speaker);
};

}  // namespace speakerseg
