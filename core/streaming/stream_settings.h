// What a user tunes in the streaming speaker-change logic; the element's properties map onto it.
#pragma once

#include <string>

namespace speakerseg {

// What each setting accepts, in one place: the element's property ranges and the tool's option
// checks both come from here, so the two front doors take the same values.
struct SettingRange {
  const char* name;
  double min, max;
  const char* unit;
};
inline constexpr SettingRange kStepRange{"step", 0.1, 10.0, " s"};
inline constexpr SettingRange kLatencyRange{"latency", 0.0, 60.0, " s"};
inline constexpr SettingRange kMinSpeechRange{"min-speech", 0.0, 10.0, " s"};
inline constexpr SettingRange kMinSilenceRange{"min-silence", 0.0, 10.0, " s"};
inline constexpr SettingRange kVoiceThresholdRange{"voice-threshold", 0.0, 1.0, ""};
inline constexpr SettingRange kEnrolledThresholdRange{"enrolled-threshold", 0.0, 1.0, ""};
inline constexpr SettingRange kEnrolledMergeThresholdRange{"enrolled-merge-threshold", 0.0, 1.0,
                                                           ""};
inline constexpr SettingRange kMaxSpeakersRange{"max-speakers", 0, 1000, ""};

// Identity by voice (core/identity): who a stream speaker is, all stream long. The cosines are of
// GE2E utterance embeddings with voiceprints (core/identity/identity_policy.h says how each is
// used); tuned on the train programmes and recordings (docs/identity.md).
struct IdentitySettings {
  bool enabled = false;
  // A known voice takes a turn from this score (0: kVoiceThreshold, see voice_threshold()) ...
  double match_threshold = 0;
  // An enrolled voice takes a turn from this score (0: kEnrolledThreshold, see
  // enrolled_threshold()) ...
  double enrolled_threshold = 0;
  // ... and ahead of the turn's own voice and of every other voice by this much.
  double margin = 0.10;
  // From lead_floor, an enrolled voice this far ahead of the turn's present voice takes the turn
  // too (still clear of every other voice by `margin`).
  double lead = 0.15;
  double lead_floor = 0.70;
  // A turn keeps its voice while that scores at least keep_floor_short on 1.6 s of evidence,
  // rising to keep_floor_long at 6 s or more; below, the turn is somebody new.
  double keep_floor_short = 0.50;
  double keep_floor_long = 0.70;
  double merge_threshold = 0.80;  // two anonymous voiceprints this close are one person
  // An anonymous voiceprint of 6 s or more this close to an enrolled one, and ahead of every
  // other enrolled voiceprint by `margin`, is that person (0: enrolled_merge_threshold(), see
  // there; 1: off).
  double enrolled_merge_threshold = 0;
  // Between telephone-band speech and a telephone-band voiceprint, scores count this much less.
  double narrowband_shift = 0.10;
  double takeover_threshold = 0.45;  // a turn's new speech this far from the rest: someone else
  double turn_gap = 0.25;            // seconds a label is silent before its next speech is a turn
  double clean_others = 0.5;      // a frame is clean for a speaker when nobody else is above this
  double evidence_seconds = 1.6;  // clean speech between re-decisions of a turn
  double decision_seconds = 3.0;  // most clean speech a turn's first decision reads ahead
  int max_speakers = 0;           // 0: no limit; beyond it, new voices go to the nearest known
  int capacity = 1000;            // people remembered; the least recently heard go first
};

struct StreamSettings {
  double step = 1.0;        // seconds between the ends of successive 10 s windows
  double latency = 2.0;     // seconds of right context a frame waits for before it is final
  double min_speech = 0.3;  // seconds a new current speaker must last to count as a change
  // Seconds nobody must speak before "nobody" counts as a change; a shorter silence is a pause
  // inside the current speaker's turn, unless somebody else speaks after it (see min_gap).
  double min_silence = 0.8;
  // A silence between two different speakers counts as "nobody" from this long, even when it is
  // shorter than min_silence (announced with the change to the next speaker).
  double min_gap = 0.3;
  double onset = 0.5;            // speaker activity above which a speaker is active
  double match_threshold = 0.2;  // least overlap similarity for a window speaker to keep a label
  // In overlap the current speaker keeps the turn unless another is more active by this much.
  double switch_margin = 1.0;
  IdentitySettings identity;
};

// The match threshold a stream uses: match_threshold where set, else kVoiceThreshold, tuned with
// the turn decisions of session 16 on the train programmes and train meetings at latency 2 s
// (docs/identity.md; not re-tuned at other latencies).
constexpr double kVoiceThreshold = 0.78;
double voice_threshold(const StreamSettings& settings);
// The threshold for enrolled voices: enrolled_threshold where set, else kEnrolledThreshold, lower
// than a stream-made voice's because an enrolment usually comes from another recording (another
// day, microphone, room), which scores its person's turns 0.07 lower on average
// (docs/identity.md, "Enrolled from another recording"), and a short enrolment lower still. Tuned
// on the train programmes at latency 2 s with enrolments from the same recording and through
// another microphone, of 6 s, 10 s and about 20 s.
constexpr double kEnrolledThreshold = 0.68;
double enrolled_threshold(const StreamSettings& settings);
// The threshold from which an anonymous voice the stream grew is an enrolled person:
// enrolled_merge_threshold where set, else the enrolled threshold raised as far as merging two
// anonymous voices is above a turn's match (merge_threshold - voice_threshold(): 0.70 by
// default). The enrolment's offset applied to merges as to turns; tuned on nothing else
// (docs/identity.md, "A grown voice named by its enrolment").
double enrolled_merge_threshold(const StreamSettings& settings);

// Throws std::invalid_argument naming the first setting outside its range (and the range).
// `offline`: the latency is the whole stream, not a user's value, and is not checked.
void validate_settings(const StreamSettings& settings, bool offline = false);
void check_range(const SettingRange& range, double value);

}  // namespace speakerseg
