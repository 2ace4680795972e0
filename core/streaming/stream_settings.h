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
inline constexpr SettingRange kMaxSpeakersRange{"max-speakers", 0, 1000, ""};

// Identity by voice (core/identity): who a stream speaker is, all stream long. The cosine
// thresholds are on GE2E utterance embeddings (same person ~0.82 on average, different ~0.60 on
// the shared meeting recordings) and were tuned on the train recordings (docs/identity.md).
struct IdentitySettings {
  bool enabled = false;
  // A voice at least this close to a known one is that person; 0: by latency (voice_threshold()).
  double match_threshold = 0;
  double keep_threshold = 0.6;    // a label's new evidence this close trains its voiceprint
  double split_threshold = 0.45;  // below this, someone else now speaks under the label
  // A voiceprint on this much clean speech is trusted: only evidence that matches it
  // (match_threshold) trains it, since different people of one room score 0.6-0.75 too. Evidence
  // below that is kept as a candidate, and the next evidence that is closer to the candidate than
  // to the voiceprint by candidate_margin (and matches the candidate) splits the label.
  double trusted_seconds = 6.0;
  double candidate_margin = 0.15;
  // A voice not yet trusted whose evidence matches a known voice (match_threshold) better than
  // its own by this much is merged into it (negative: never).
  double young_merge_margin = 0.15;
  double clean_others = 0.5;      // a frame is clean for a speaker when nobody else is above this
  double evidence_seconds = 3.0;  // clean speech per evidence embedding
  // Clean speech of the evidence after a candidate (at least one partial): the one that confirms
  // a newcomer carried into a trusted label, and so how long the old name stays on them.
  double candidate_seconds = 3.0;
  double decision_seconds = 3.0;  // most clean speech a first decision embeds
  int max_speakers = 0;           // 0: no limit; beyond it, new voices go to the nearest known
  int capacity = 1000;            // people remembered; the least recently heard go first
};

struct StreamSettings {
  double step = 1.0;             // seconds between the ends of successive 10 s windows
  double latency = 2.0;          // seconds of right context a frame waits for before it is final
  double min_speech = 0.3;       // seconds a new current speaker must last to count as a change
  double min_silence = 0.3;      // seconds nobody must speak before "nobody" counts as a change
  double onset = 0.5;            // speaker activity above which a speaker is active
  double match_threshold = 0.2;  // least overlap similarity for a window speaker to keep a label
  // In overlap the current speaker keeps the turn unless another is more active by this much.
  double switch_margin = 1.0;
  IdentitySettings identity;
};

// The match threshold a stream uses: match_threshold where set, else by latency, as tuned on the
// train recordings (docs/identity.md): at latency 2 s or less a decision embeds less speech, and
// 0.70 told people apart best there; with more, 0.70 merged people that 0.75 keeps apart.
constexpr double kShortLatencyVoiceThreshold = 0.70, kVoiceThreshold = 0.75;
double voice_threshold(const StreamSettings& settings);

// Throws std::invalid_argument naming the first setting outside its range (and the range).
// `offline`: the latency is the whole stream, not a user's value, and is not checked.
void validate_settings(const StreamSettings& settings, bool offline = false);
void check_range(const SettingRange& range, double value);

}  // namespace speakerseg
