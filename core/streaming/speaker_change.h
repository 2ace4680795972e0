// One announced change of the current speaker. Positions are stream sample positions (16 kHz),
// counted from the first sample after the last reset; the element turns them into buffer times.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace speakerseg {

struct SpeakerChange {
  int64_t sample = 0;               // where the new turn starts
  std::string speaker;              // new current speaker ("" = nobody)
  std::string previous;             // current speaker before ("" = nobody)
  std::vector<std::string> active;  // everyone active at `sample`
  double confidence = 0;         // mean activity of the new state over the frames that confirmed it
  int64_t announced_sample = 0;  // newest audio when the change became final
  int speaker_id = -1;           // the turn tracker's id of `speaker` (-1: nobody)
  // With identity by voice: the cosine of the new speaker's voice with the known voiceprint it
  // was matched to (0: a voice heard first here, not yet heard clean, or nobody).
  double voice_score = 0;
  // The live feed stalled (StretchEnd::kStalled): nobody is heard from `sample` on because no
  // audio arrives, not because the network heard silence.
  bool stalled = false;
  // A revision, not a change: later evidence (identity by voice) showed that the change announced
  // at `sample` was `speaker` (with `speaker_id` and `voice_score`), not `was`, as announced. The
  // times of changes stay as announced; `previous` and `active` are left empty.
  bool revision = false;
  std::string was;
};

// The changes as revised: each revision renames the latest change before it at its `sample` and
// is dropped. What a consumer that keeps a timeline (the --rttm output, the tests) does with them.
std::vector<SpeakerChange> apply_revisions(const std::vector<SpeakerChange>& changes);

// How a stretch of stream ends. kEnded: its audio is all there is (EOS, a discontinuity, a long
// gap). kStalled: a live feed stopped delivering; the current turn ends with the last audio, and
// one change to nobody, marked `stalled`, says so (also when nobody was speaking: it is the only
// notice of the stall).
enum class StretchEnd { kEnded, kStalled };

}  // namespace speakerseg
