// Which evidence decides who: every identity decision of a stream, in one place, apart from the
// bookkeeping (SpeakerIdentifier: labels, turns, audio, embeddings; VoiceRegistry: voiceprints).
//
// The voice decides; the stitcher's continuity is only a prior. A label's turn (its speech since
// it was last silent for turn_gap) gathers evidence, the utterance embedding of its clean speech
// so far, and is re-decided at every step as it grows: a known voice takes the turn when it is
// the best match, at match_threshold or more (an enrolled one: enrolled_threshold, lower, as an
// enrolment is usually another recording than the stream), and ahead of the turn's present voice
// and of every other voice by `margin` (enrolled people too: a closed set decided with a margin),
// an enrolled one also from lead_floor when it leads the present voice by `lead` (a label carried
// onto them); the turn keeps its voice while that scores at least keep_floor() of the shorter of
// its evidence and the voiceprint's speech (1.6 s scores a person's own voice lower than 6 s does);
// below that the turn is somebody new. An anonymous voice grown from the stream's turns is an
// enrolled person once its voiceprint matches the enrolment (enrolled_match()): a person enrolled
// from another recording is then named even where no single turn scored the enrolment high. A voice
// the turn made from its own evidence scores that evidence high whoever speaks: it keeps the turn,
// but an enrolled voice that the grown evidence matches takes it over, judged against the other
// voices only; an enrolled present voice keeps a turn only while no other voice scores higher.
// Telephone-band speech is calibrated (calibrate()), and a turn in conversation (guarded) needs
// more evidence to be somebody new. Scores are cosines of GE2E utterance embeddings with
// voiceprints (the seconds-weighted mean of a person's evidence, or an enrolment).
#pragma once

#include <vector>

#include "identity/voice_registry.h"
#include "streaming/stream_settings.h"

namespace speakerseg {

enum class Verdict {
  kKeep,     // the turn keeps its present voice
  kKnown,    // a known voice (`voice`) takes the turn
  kNew,      // somebody not heard before: a new voice from the evidence
  kUnknown,  // too little evidence to tell, and no present voice: a voice without voiceprint
};

struct Decision {
  Verdict verdict = Verdict::kUnknown;
  int voice = -1;  // kKeep: the present voice; kKnown: the known one
  float score = 0;
};

class IdentityPolicy {
 public:
  explicit IdentityPolicy(const IdentitySettings& settings) : s_(settings) {}

  // The turn's voice, from `seconds` of its clean speech embedded (0: none yet) scored against
  // every voice it may be (`candidates`: those with a voiceprint that nobody heard at once with
  // the turn holds; the present voice among them when it has a voiceprint). `present`: the turn's
  // voice so far (-1: none); `may_add`: a new voice may still be made (max-speakers);
  // `narrowband`: the turn's speech is telephone band; `guarded`: the turn's label speaks again
  // after other people spoke (conversation), not after silence alone: continuity counts for more;
  // `self_made`: the present voice's voiceprint is this turn's evidence and nothing else.
  Decision decide(int present, double seconds, std::vector<Match> candidates, bool may_add,
                  bool narrowband, bool guarded = false, bool self_made = false) const;

  // Whether a turn of `seconds` of evidence (`narrowband` as above) decided as `voice` may train
  // that voice's voiceprint: only evidence that clearly belongs to it, ahead of every other voice
  // by the margin (`candidates` as above, `voice` among them).
  bool learns(int voice, double seconds, std::vector<Match> candidates, bool narrowband) const;

  // Whether two anonymous voiceprints this close (cosine) are one person, who then keeps the
  // older voice; `narrowband`: both are telephone band.
  bool same_person(float voiceprints_cosine, bool narrowband) const {
    return calibrated(voiceprints_cosine, narrowband) >= s_.merge_threshold;
  }

  // The enrolled person an anonymous voiceprint of `seconds` of speech (`narrowband`: mostly
  // telephone band) is, from `enrolled`: the cosines of its voiceprint with theirs, ranked as a
  // turn ranks them. -1: none.
  int enrolled_match(std::vector<Match> enrolled, double seconds, bool narrowband) const;

  // Whether a new stretch of a turn's clean speech scoring `score` against the rest of the turn
  // is somebody else taking over under the same label, without a pause.
  bool taken_over(float score) const { return score < s_.takeover_threshold; }

  // The least score a turn of `seconds` of evidence needs to keep its voice.
  double keep_floor(double seconds) const;

 private:
  // Telephone band takes away what tells voices apart: different people on the telephone score
  // about 0.13 higher against each other than in the studio (docs/identity.md). Between a
  // narrowband turn and a narrowband voice, the score counts narrowband_shift less.
  void calibrate(std::vector<Match>& candidates, bool narrowband) const;
  // A score as the decisions count it; `narrowband`: both sides are telephone band.
  float calibrated(float score, bool narrowband) const {
    return narrowband ? score - static_cast<float>(s_.narrowband_shift) : score;
  }
  // The score from which `m` may take a turn.
  double threshold(const Match& m) const {
    return m.enrolled ? s_.enrolled_threshold : s_.match_threshold;
  }
  // The best candidate other than `except`.
  static Match best(const std::vector<Match>& candidates, int except = -1);

  IdentitySettings s_;
};

}  // namespace speakerseg
