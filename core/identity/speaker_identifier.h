// Who each stitched speaker is, all stream long. The stitcher ties a window's speakers to the
// stream's by the frames windows share; that cannot see a speaker come back after a pause, and a
// window that gives two people one local label hands both the same stream label. This layer sits
// between the stitcher and the turn tracker and re-keys every final frame from stitcher labels to
// voices (VoiceRegistry ids), from what the GE2E encoder hears in each label's clean frames
// (frames where that speaker alone is active):
//
// - A label's voice is decided at its first final frame, from its clean speech in the frames the
//   stitcher holds so far (up to decision_seconds of it; those run `latency` ahead of the final
//   horizon): the nearest known voice at or above match_threshold, else a new one. Voices heard
//   in the same window as the label (held by another label active there) are never candidates:
//   two people who touch are never merged. With less clean speech than one partial (1.59 s) the
//   label gets a provisional new voice; the overlap continuity then stands until evidence comes.
// - Every evidence_seconds of a label's clean speech is embedded: close to its voice
//   (keep_threshold) it trains the voiceprint; a provisional voice that turns out to match a known
//   one is merged into it (the turn tracker renames it, without announcing a change), and so is
//   a young voice (less than trusted_seconds of speech: a first decision or a split on a few
//   seconds) whose evidence matches a known voice better than its own by young_merge_margin;
//   evidence far from the voice (split_threshold) means someone else now speaks under the
//   label, which then takes the nearest known voice or a new one, and the tracker announces it.
// - A voiceprint with trusted_seconds of speech behind it learns only from evidence that matches
//   it (match_threshold): people of one room score 0.6-0.75 against each other, so evidence in
//   that band could be a newcomer the stitcher carried across a turn. It is kept as a candidate;
//   a known voice it matches clearly better takes the label at once, and the next evidence that
//   matches the candidate clearly better than the voiceprint splits the label onto a new voice.
//
// Decisions take effect from the frame they are made on: announced turns are never relabelled.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engines/voice_encoder.h"
#include "features/mel_spectrogram.h"
#include "identity/audio_history.h"
#include "identity/utterance_embedding.h"
#include "identity/voice_registry.h"
#include "identity/voiceprints.h"
#include "streaming/speaker_stitcher.h"
#include "streaming/stream_settings.h"
#include "streaming/turn_tracker.h"

namespace speakerseg {

struct IdentityStats {
  uint64_t decisions = 0;       // labels given a voice at their first final frame
  uint64_t recognised = 0;      // ... of them, a known voice (by evidence at the decision)
  uint64_t provisional = 0;     // ... of them, too little clean speech to tell
  uint64_t merged = 0;          // provisional voices later found to be known ones
  uint64_t splits = 0;          // labels whose voice changed under them
  double embedded_seconds = 0;  // audio run through the encoder
};

class SpeakerIdentifier {
 public:
  SpeakerIdentifier(const StreamSettings& settings, std::shared_ptr<const Voiceprints> enrolled);

  // The stream's samples [start, start + n) (a window's; overlaps are skipped).
  void add_audio(int64_t start, const float* samples, int64_t n);

  // Re-keys one final frame (the next in order) from stitcher labels to voice ids, deciding and
  // learning voices on the way; `tracker` is renamed when a provisional voice is merged.
  // Returns false, having changed nothing a second call would redo, when the frame needs a voice
  // embedding first: voice_request() is then what to embed, and after give_voice() with its
  // embedding, relabel() of the same frame carries on. Hosts can so gather the requests of many
  // streams into one encoder call (SharedScheduler).
  bool relabel(FrameActivity& frame, const SpeakerStitcher& stitcher, TurnTracker& tracker);
  const UtteranceRequest* voice_request() const {
    return asked_ > 0 && !answered_ ? &request_ : nullptr;
  }
  void give_voice(std::vector<float> embedding);

  // Names by voice id ("speaker-N" or enrolled names), for the turn tracker.
  const std::vector<std::string>& names() const { return voices_.names(); }
  // The cosine with which `id` was last matched (0: a new or provisional voice).
  double score(int id) const;
  const IdentityStats& stats() const { return stats_; }
  void reset();

 private:
  struct Label {
    int voice = -1;
    int64_t last_active = -1;     // frame
    int64_t learned_until = -1;   // frames up to here were embedded by the decision
    int64_t heard_until = -1;     // the last frame whose clean audio went into `evidence`
    std::vector<float> evidence;  // clean audio not embedded yet
    int strikes = 0;              // evidence in a row far from the voice (split_threshold)
    // The last evidence a trusted voiceprint did not match: perhaps a newcomer under the label.
    std::vector<float> candidate;
    double candidate_seconds = 0;
  };

  // Both return false, having changed nothing, while they wait for an embedding.
  bool decide(int label, int64_t frame, const SpeakerStitcher& stitcher, int& voice);
  bool weigh_evidence(int label, int64_t frame, TurnTracker& tracker);
  void weigh(Label& l, int label, int64_t frame, const std::vector<float>& e, double seconds,
             TurnTracker& tracker);
  // The label's voice is `to` from `now` on (-1: a new voice from `e`); the tracker announces it.
  void split(Label& l, int to, float score, const std::vector<float>& e, double seconds,
             int64_t now);
  // `voice` is `into` after all: every label holding it, and the turn tracker, move over without
  // a change being announced, and the voice is forgotten.
  void merge(int voice, const Match& into, TurnTracker& tracker);
  // Voices another label holds that was active within a window of `frame`, or that is active
  // in `ahead` (the frames the stitcher holds past it).
  std::vector<int> touching(int label, int64_t frame,
                            const std::vector<FrameActivity>& ahead) const;
  bool at_limit() const;
  // The embedding of `audio`: the one given for it, or null after asking for it.
  const std::vector<float>* embedding_of(const std::vector<float>& audio);
  // The clean speaker of `f`, or -1.
  int clean_speaker(const FrameActivity& f) const;

  IdentitySettings settings_;
  double onset_;
  std::shared_ptr<const Voiceprints> enrolled_;
  VoiceRegistry voices_;
  std::map<int, Label> labels_;
  std::map<int, float> scores_;
  AudioHistory audio_;
  MelSpectrogram mel_;
  IdentityStats stats_;
  // The embedding asked for (of asked_ samples), then the one given for it.
  UtteranceRequest request_;
  size_t asked_ = 0;
  bool answered_ = false;
  std::vector<float> answer_;
};

}  // namespace speakerseg
