// Who each stitched speaker is, all stream long. The stitcher ties a window's speakers to the
// stream's by the frames windows share; that cannot see a speaker come back after a pause, and it
// carries a label from one person onto the next across a short gap. This layer sits between the
// stitcher and the turn tracker and re-keys every final frame from stitcher labels to voices
// (VoiceRegistry ids), from what the GE2E encoder hears in each label's clean frames (frames where
// that speaker alone is active). What decides is IdentityPolicy; this is the bookkeeping:
//
// - A label's turn starts when it speaks after turn_gap of silence. Its first decision, before its
//   first frame is tracked, embeds the clean speech the stitcher already holds ahead (up to
//   decision_seconds; `latency` of it): the label's voice so far is only the prior.
// - Every evidence_seconds of further clean speech is embedded and the turn re-decided on all of
//   its evidence (chunk embeddings, weighted by seconds). A different voice for the turn revises
//   it: the changes announced in it are re-announced with the new name (TurnTracker::revise),
//   from the turn's start. A chunk far from the rest of the turn (taken_over) is somebody else
//   speaking without a pause: a new turn from there, announced as a change.
// - Voices heard at once with the label (overlapping speech, within a window) are never candidates,
//   and two voices once heard at once are never merged: two people who talk together are two.
// - A voiceprint learns a turn's evidence when the turn ends, if the policy says the evidence
//   clearly belongs to it; a voice a turn made learns that turn as it goes. Two anonymous voices
//   whose voiceprints become one person's, and that were never heard at once, are merged,
//   revising the changes announced to the newer.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engines/voice_encoder.h"
#include "features/mel_spectrogram.h"
#include "identity/audio_history.h"
#include "identity/identity_policy.h"
#include "identity/utterance_embedding.h"
#include "identity/voice_registry.h"
#include "identity/voiceprints.h"
#include "streaming/speaker_stitcher.h"
#include "streaming/stream_settings.h"

namespace speakerseg {

struct IdentityStats {
  uint64_t turns = 0;           // labels' turns decided (each speech after turn_gap of silence)
  uint64_t recognised = 0;      // ... by a known voice at their first decision
  uint64_t provisional = 0;     // ... too little clean speech to tell at their first decision
  uint64_t revised = 0;         // turns whose voice later evidence changed (revisions announced)
  uint64_t merged = 0;          // anonymous voices found to be another voice
  uint64_t takeovers = 0;       // somebody else found speaking under a label without a pause
  double embedded_seconds = 0;  // audio run through the encoder
};

// A voice that the changes since `since` (stream position) announced as `from` was `to`.
struct VoiceRevision {
  int from = -1, to = -1;
  int64_t since = 0;
};

class SpeakerIdentifier {
 public:
  SpeakerIdentifier(const StreamSettings& settings, std::shared_ptr<const Voiceprints> enrolled);

  // The stream's samples [start, start + n) (a window's; overlaps are skipped).
  void add_audio(int64_t start, const float* samples, int64_t n);

  // Re-keys one final frame (the next in order) from stitcher labels to voice ids, deciding and
  // learning voices on the way. Returns false, having changed nothing a second call would redo,
  // when the frame needs a voice embedding first: voice_request() is then what to embed, and after
  // give_voice() with its embedding, relabel() of the same frame carries on. Hosts can so gather
  // the requests of many streams into one encoder call (SharedScheduler). After a true return,
  // take_revisions() holds what the turn tracker must revise before it takes the frame.
  bool relabel(FrameActivity& frame, const SpeakerStitcher& stitcher);
  std::vector<VoiceRevision> take_revisions() {
    std::vector<VoiceRevision> out;
    out.swap(revisions_);
    return out;
  }
  const UtteranceRequest* voice_request() const {
    return asked_ > 0 && !answered_ ? &request_ : nullptr;
  }
  void give_voice(std::vector<float> embedding);

  // Names by voice id ("speaker-N" or enrolled names), for the turn tracker.
  const std::vector<std::string>& names() const { return voices_.names(); }
  // The cosine with which `id` was last decided (0: a new or provisional voice).
  double score(int id) const;
  const IdentityStats& stats() const { return stats_; }
  void reset();

 private:
  struct Chunk {
    std::vector<float> embedding;
    double seconds;
    bool narrowband;
  };
  struct Label {
    int voice = -1;
    int64_t last_active = -1;  // frame
    // The current turn.
    int64_t turn_start = -1;      // its first frame
    bool open = false;            // not ended yet (end_turn)
    bool guarded = false;         // it began while others spoke, not after silence
    bool others_spoke = false;    // others spoke since the label was last active
    bool deciding = false;        // its first decision is still to make
    bool owns_voice = false;      // it made its voice: its evidence is that voiceprint
    int64_t embedded_until = -1;  // frames up to here are in `evidence` (read ahead)
    int64_t heard_until = -1;     // the last frame whose clean audio went into `pending`
    std::vector<float> pending;   // clean audio not embedded yet
    std::vector<float> evidence;  // seconds-weighted sum of its chunk embeddings
    double evidence_seconds = 0;
    double narrow_seconds = 0;     // ... of it telephone band
    std::vector<Chunk> unlearned;  // chunks no voiceprint has
    bool narrowband() const { return 2 * narrow_seconds > evidence_seconds; }
  };

  // The turn's first decision (reading ahead) and a re-decision on a new chunk; both return false,
  // having changed nothing, while they wait for an embedding.
  bool first_decision(int label, int64_t frame, const SpeakerStitcher& stitcher);
  bool weigh_chunk(int label, int64_t frame);
  // Adds chunk `e` to the turn's evidence, decides, and applies the decision (`revise`: by a
  // revision of the turn from its start, else from `frame` on).
  void decide(Label& l, int64_t frame, const std::vector<float>& e, double seconds,
              const std::vector<int>& excluded, bool revise);
  void start_turn(Label& l, int64_t frame);
  // The turn is over: its voice learns its evidence if that clearly belongs to it.
  void end_turn(Label& l, int label, int64_t frame);
  void learn(Label& l, int64_t frame, const std::vector<int>& excluded);
  // The turn's evidence scored against every voice it may be: its own, and any not `excluded`.
  std::vector<Match> candidates_for(const Label& l, const std::vector<int>& excluded) const;
  // `voice` and every voice of `excluded` were heard at once: never one person (apart_).
  void keep_apart(int voice, const std::vector<int>& excluded);
  // `voice` is `into` after all: every label holding it moves over, the changes announced to it
  // are revised, and the voice is forgotten.
  void merge(int voice, int into);
  // Merges `voice` into a voice whose voiceprint is now the same person's, if there is one.
  void merge_if_same(int voice, const std::vector<int>& excluded);
  // Voices of other labels heard at once with `label` (overlapping speech) within a window before
  // `frame` or in `ahead` (the frames the stitcher holds past it): other people for sure.
  std::vector<int> touching(int label, int64_t frame,
                            const std::vector<FrameActivity>& ahead) const;
  bool at_limit() const;
  // The embedding of `audio`: the one given for it, or null after asking for it.
  const std::vector<float>* embedding_of(const std::vector<float>& audio);
  // The clean speaker of `f`, or -1.
  int clean_speaker(const FrameActivity& f) const;

  IdentitySettings settings_;
  IdentityPolicy policy_;
  double onset_;
  int64_t turn_gap_frames_;
  std::shared_ptr<const Voiceprints> enrolled_;
  VoiceRegistry voices_;
  std::map<int, Label> labels_;
  std::map<int, float> scores_;
  std::vector<VoiceRevision> revisions_;
  // Pairs of voices heard at once: two people, never merged.
  std::set<std::pair<int, int>> apart_;
  // Pairs of labels (lower first) heard at once, and the last frame they were.
  std::map<std::pair<int, int>, int64_t> together_;
  AudioHistory audio_;
  MelSpectrogram mel_;
  IdentityStats stats_;
  // The embedding asked for (of asked_ samples), then the one given for it.
  UtteranceRequest request_;
  size_t asked_ = 0;
  bool answered_ = false;
  std::vector<float> answer_;
  bool narrowband_ = false;  // the audio last asked for is telephone band
};

}  // namespace speakerseg
