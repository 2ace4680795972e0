#include "identity/speaker_identifier.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "identity/squared_norm.h"
#include "identity/utterance_embedding.h"
#include "model/model_spec.h"

namespace speakerseg {
namespace {

constexpr int64_t kFrameSamples = 270;
constexpr int64_t kWindowFrames = 589;
constexpr int64_t kPartialAudio = static_cast<int64_t>(kPartialFrames - 1) * kMelHop;

// The audio a frame stands for: its 270 samples around its centre, so that frames tile the stream.
int64_t frame_audio_start(int64_t frame) {
  return SpeakerStitcher::frame_centre_sample(frame) - kFrameSamples / 2;
}

std::vector<float> unit(const std::vector<float>& sum) {
  const double norm = squared_norm(sum);
  std::vector<float> out(sum);
  if (norm > 0)
    for (float& v : out) v = static_cast<float>(v / std::sqrt(norm));
  return out;
}

IdentitySettings resolved(const StreamSettings& settings) {
  IdentitySettings s = settings.identity;
  s.match_threshold = voice_threshold(settings);
  s.enrolled_threshold = enrolled_threshold(settings);
  s.enrolled_merge_threshold = enrolled_merge_threshold(settings);
  return s;
}

}  // namespace

SpeakerIdentifier::SpeakerIdentifier(const StreamSettings& settings,
                                     std::shared_ptr<const Voiceprints> enrolled)
    : settings_(resolved(settings)),
      policy_(settings_),
      onset_(settings.onset),
      turn_gap_frames_(std::llround(settings.identity.turn_gap / kFrameStepSeconds)),
      enrolled_(std::move(enrolled)),
      voices_(static_cast<size_t>(std::max(1, settings.identity.capacity))) {
  reset();
}

void SpeakerIdentifier::reset() {
  voices_ = VoiceRegistry(static_cast<size_t>(std::max(1, settings_.capacity)));
  if (enrolled_)
    for (const auto& p : enrolled_->speakers)
      voices_.enroll(p.name, p.embedding, p.is_narrowband());
  labels_.clear();
  scores_.clear();
  revisions_.clear();
  apart_.clear();
  together_.clear();
  audio_.reset();
  request_ = {};
  asked_ = 0;
  answered_ = false;
}

void SpeakerIdentifier::add_audio(int64_t start, const float* samples, int64_t n) {
  audio_.add(start, samples, n);
}

double SpeakerIdentifier::score(int id) const {
  auto it = scores_.find(id);
  return it == scores_.end() ? 0.0 : it->second;
}

int SpeakerIdentifier::clean_speaker(const FrameActivity& f) const {
  int who = -1;
  for (const auto& [g, v] : f.activity) {
    if (v > onset_) {
      if (who >= 0) return -1;
      who = g;
    } else if (v > settings_.clean_others) {
      return -1;
    }
  }
  return who;
}

bool SpeakerIdentifier::at_limit() const {
  return settings_.max_speakers > 0 &&
         voices_.anonymous() + (enrolled_ ? enrolled_->speakers.size() : 0) >=
             static_cast<size_t>(settings_.max_speakers);
}

const std::vector<float>* SpeakerIdentifier::embedding_of(const std::vector<float>& audio) {
  if (answered_) {
    // relabel() stopped for this embedding and is back: it must ask for the same audio.
    if (audio.size() != asked_)
      throw std::logic_error("voice identity: resumed on other audio than it asked to embed");
    answered_ = false;
    asked_ = 0;
  } else {
    if (asked_ > 0)
      throw std::logic_error("voice identity: an embedding is still being waited for");
    request_ = utterance_request(mel_, audio.data(), static_cast<int64_t>(audio.size()));
    narrowband_ = request_.narrowband();
    answer_.clear();
    if (request_.count > 0) {
      asked_ = audio.size();
      return nullptr;
    }
  }
  stats_.embedded_seconds += static_cast<double>(audio.size()) / kSampleRate;
  return &answer_;
}

void SpeakerIdentifier::give_voice(std::vector<float> embedding) {
  if (asked_ == 0 || answered_)
    throw std::logic_error("voice identity: an embedding was given that nobody asked for");
  if (embedding.size() != static_cast<size_t>(kEmbeddingDim))
    throw std::invalid_argument("voice identity: an embedding of " +
                                std::to_string(embedding.size()) + " values, not " +
                                std::to_string(kEmbeddingDim));
  answer_ = std::move(embedding);
  request_ = {};
  answered_ = true;
}

std::vector<int> SpeakerIdentifier::touching(int label, int64_t frame,
                                             const std::vector<FrameActivity>& ahead) const {
  std::vector<int> out;
  const auto add = [&](int h) {
    auto it = labels_.find(h);
    if (it != labels_.end() && it->second.voice >= 0 &&
        std::find(out.begin(), out.end(), it->second.voice) == out.end())
      out.push_back(it->second.voice);
  };
  for (const auto& [pair, when] : together_)
    if (when + kWindowFrames >= frame && (pair.first == label || pair.second == label))
      add(pair.first == label ? pair.second : pair.first);
  for (const auto& f : ahead)
    if (f.of(label) > onset_)
      for (const auto& [h, v] : f.activity)
        if (h != label && v > onset_) add(h);
  return out;
}

void SpeakerIdentifier::start_turn(Label& l, int64_t frame) {
  l.guarded = l.turn_start >= 0 && l.others_spoke;
  l.others_spoke = false;
  l.turn_start = frame;
  l.open = true;
  l.deciding = true;
  l.owns_voice = false;
  l.embedded_until = -1;
  l.pending.clear();
  l.evidence.clear();
  l.evidence_seconds = 0;
  l.narrow_seconds = 0;
  l.unlearned.clear();
}

bool SpeakerIdentifier::first_decision(int label, int64_t frame, const SpeakerStitcher& stitcher) {
  std::vector<FrameActivity> ahead;
  stitcher.peek_from(frame, ahead);
  // The thread's scratch, used within this call only: a fresh 3 s of audio for every decision
  // cost the kernel's page zeroing a share of a many-channel run, and a stream's own would hold
  // it between decisions.
  thread_local std::vector<float> clean;
  clean.clear();
  int64_t read = -1;
  const auto budget = static_cast<size_t>(settings_.decision_seconds * kSampleRate);
  for (const auto& f : ahead) {
    if (clean.size() >= budget) break;
    if (clean_speaker(f) != label) continue;
    audio_.copy(frame_audio_start(f.frame), frame_audio_start(f.frame) + kFrameSamples, clean);
    read = f.frame;
  }
  const bool enough = static_cast<int64_t>(clean.size()) >= kPartialAudio;
  const std::vector<float>* embedded = enough ? embedding_of(clean) : nullptr;
  if (enough && !embedded) return false;
  Label& l = labels_[label];
  l.deciding = false;
  ++stats_.turns;
  const int before = l.voice;
  if (enough) l.embedded_until = read;
  decide(l, frame, enough ? *embedded : std::vector<float>{},
         static_cast<double>(clean.size()) / kSampleRate, touching(label, frame, ahead), false);
  if (l.evidence_seconds <= 0 && l.voice != before) ++stats_.provisional;
  if (l.evidence_seconds > 0 && l.voice != before && !l.owns_voice) ++stats_.recognised;
  return true;
}

bool SpeakerIdentifier::weigh_chunk(int label, int64_t frame) {
  Label& l = labels_[label];
  const std::vector<float>* embedded = embedding_of(l.pending);
  if (!embedded) return false;
  const std::vector<float> e = *embedded;
  const double seconds = static_cast<double>(l.pending.size()) / kSampleRate;
  l.pending.clear();
  if (e.empty()) return true;
  const std::vector<int> excluded = touching(label, frame, {});
  if (l.evidence_seconds > 0 && policy_.taken_over(cosine(e.data(), unit(l.evidence).data()))) {
    // Somebody else speaks under the label without a pause: a turn of theirs from here.
    ++stats_.takeovers;
    ++stats_.turns;
    end_turn(l, label, frame);
    start_turn(l, frame);
    l.deciding = false;
    l.embedded_until = frame;
    decide(l, frame, e, seconds, excluded, false);
    return true;
  }
  decide(l, frame, e, seconds, excluded, true);
  return true;
}

void SpeakerIdentifier::decide(Label& l, int64_t frame, const std::vector<float>& e, double seconds,
                               const std::vector<int>& excluded, bool revise) {
  const int64_t now = frame_audio_start(frame);
  if (!e.empty()) {
    if (l.evidence.empty()) l.evidence.assign(e.size(), 0.f);
    for (size_t k = 0; k < e.size(); ++k) l.evidence[k] += static_cast<float>(seconds) * e[k];
    l.evidence_seconds += seconds;
    if (narrowband_) l.narrow_seconds += seconds;
    l.unlearned.push_back({e, seconds, narrowband_});
  }
  const int present = l.voice;
  const std::vector<Match> candidates =
      l.evidence_seconds > 0 ? candidates_for(l, excluded) : std::vector<Match>{};
  // A voice made by this turn and by nothing else (its speech is at most the turn's evidence).
  bool self_made = false;
  for (const Match& m : candidates)
    if (m.id == present) self_made = l.owns_voice && m.seconds <= l.evidence_seconds + 1e-9;
  const Decision d = policy_.decide(present, l.evidence_seconds, candidates, !at_limit(),
                                    l.narrowband(), l.guarded, self_made);
  int to = d.voice;
  // The cosine as heard, before the policy's telephone calibration: what voice-score reports.
  float cosine = 0;
  for (const Match& m : candidates)
    if (m.id == d.voice) cosine = m.score;
  const Voice* decided = voices_.find(d.voice);
  if (decided && decided->enrolled && l.evidence_seconds > 0 &&
      (d.verdict == Verdict::kKnown || d.verdict == Verdict::kKeep))
    voices_.named(d.voice, now);
  if (self_made && d.verdict == Verdict::kKnown) {
    // The voice this turn made was the known one all along: everything announced as it is
    // revised to the known voice.
    merge(present, to);
    scores_[to] = cosine;
    keep_apart(to, excluded);
    return;
  }
  switch (d.verdict) {
    case Verdict::kKeep:
      if (l.evidence_seconds > 0) scores_[present] = cosine;
      keep_apart(present, excluded);
      if (l.owns_voice) learn(l, frame, excluded);
      return;
    case Verdict::kUnknown:
      l.voice = voices_.add({}, 0, now);
      scores_[l.voice] = 0;
      return;
    case Verdict::kKnown:
      break;
    case Verdict::kNew: {
      const Voice* v = voices_.find(present);
      // A voice without a voiceprint yet is nobody known: the turn's evidence makes it.
      to = v && !v->has_voiceprint() && !v->enrolled ? present : voices_.add({}, 0, now);
      break;
    }
  }
  l.owns_voice = d.verdict == Verdict::kNew;
  scores_[to] = d.verdict == Verdict::kKnown ? cosine : 0.f;
  keep_apart(to, excluded);
  if (to != present) {
    l.voice = to;
    if (present >= 0) {
      if (revise) {
        ++stats_.revised;
        revisions_.push_back({present, to, frame_audio_start(l.turn_start)});
      }
      // A voice that never got a voiceprint and that no label holds any more was this one.
      const Voice* old = voices_.find(present);
      const bool held = std::any_of(labels_.begin(), labels_.end(),
                                    [&](const auto& h) { return h.second.voice == present; });
      if (old && !old->has_voiceprint() && !old->enrolled && !held) voices_.forget(present);
    }
  }
  if (l.owns_voice) learn(l, frame, excluded);
}

std::vector<Match> SpeakerIdentifier::candidates_for(const Label& l,
                                                     const std::vector<int>& excluded) const {
  return voices_.scores(unit(l.evidence), [&](int id) {
    return id == l.voice || std::find(excluded.begin(), excluded.end(), id) == excluded.end();
  });
}

void SpeakerIdentifier::keep_apart(int voice, const std::vector<int>& excluded) {
  for (int other : excluded)
    if (other != voice) apart_.insert({std::min(voice, other), std::max(voice, other)});
}

void SpeakerIdentifier::learn(Label& l, int64_t frame, const std::vector<int>& excluded) {
  const int64_t now = frame_audio_start(frame);
  for (const Chunk& c : l.unlearned)
    voices_.learn(l.voice, c.embedding, c.seconds, now, c.narrowband);
  l.unlearned.clear();
  merge_if_same(l.voice, excluded);
}

void SpeakerIdentifier::end_turn(Label& l, int label, int64_t frame) {
  if (!l.open) return;
  l.open = false;
  if (l.voice < 0 || l.unlearned.empty()) return;
  const std::vector<int> excluded = touching(label, frame, {});
  if (l.owns_voice) {
    learn(l, frame, excluded);
    return;
  }
  if (policy_.learns(l.voice, l.evidence_seconds, candidates_for(l, excluded), l.narrowband()))
    learn(l, frame, excluded);
  l.unlearned.clear();
}

void SpeakerIdentifier::merge_if_same(int voice, const std::vector<int>& excluded) {
  const Voice* v = voices_.find(voice);
  if (!v || v->enrolled || !v->has_voiceprint()) return;
  Match best;
  std::vector<Match> enrolled;
  for (int id = 0; id < static_cast<int>(voices_.names().size()); ++id) {
    if (id == voice || std::find(excluded.begin(), excluded.end(), id) != excluded.end() ||
        apart_.count({std::min(id, voice), std::max(id, voice)}))
      continue;
    const float s = voices_.similarity(voice, id);
    if (s > best.score) best = {id, s};
    const Voice* o = voices_.find(id);
    if (o && o->enrolled) enrolled.push_back({id, s, true, o->narrowband()});
  }
  if (best.id < 0) return;
  const Voice* other = voices_.find(best.id);
  if (!policy_.same_person(best.score, v->narrowband() && other->narrowband())) {
    // An enrolled person whom a turn's evidence has named since this voice was first heard is
    // somebody else: the enrolment finds its person's turns, and this voice's turns never matched
    // it. (Names given by continuity or by a merge do not count: they are no such evidence.)
    const int person = policy_.enrolled_match(std::move(enrolled), v->weight, v->narrowband());
    if (person >= 0 && voices_.find(person)->last_named < v->first_heard) merge(voice, person);
    return;
  }
  // The enrolled name, else the older voice, stays.
  if (other->enrolled || best.id < voice)
    merge(voice, best.id);
  else
    merge(best.id, voice);
}

void SpeakerIdentifier::merge(int voice, int into) {
  ++stats_.merged;
  const Voice* v = voices_.find(voice);
  if (v && v->has_voiceprint()) {
    std::vector<float> mean(v->sum);
    for (float& x : mean) x = static_cast<float>(x / v->weight);
    voices_.learn(into, mean, v->weight - v->narrow, v->last_heard);
    if (v->narrow > 0) voices_.learn(into, mean, v->narrow, v->last_heard, true);
  }
  for (auto& [h, l] : labels_)
    if (l.voice == voice) {
      l.voice = into;
      l.owns_voice = false;
    }
  revisions_.push_back({voice, into, 0});
  std::set<std::pair<int, int>> apart;
  for (auto [a, b] : apart_) {
    if (a == voice) a = into;
    if (b == voice) b = into;
    if (a != b) apart.insert({std::min(a, b), std::max(a, b)});
  }
  apart_.swap(apart);
  voices_.forget(voice);
  scores_[into] = scores_[voice];
}

bool SpeakerIdentifier::relabel(FrameActivity& frame, const SpeakerStitcher& stitcher) {
  // Everything up to the last embedding a frame may wait for is safe to run again: a turn started
  // or decided before the wait stays so, a frame's audio goes into the evidence once.
  const int64_t k = frame.frame;
  bool anyone = false;
  for (const auto& [g, v] : frame.activity) anyone = anyone || v > onset_;
  if (anyone)
    for (auto& [g, l] : labels_)
      if (frame.of(g) <= onset_) l.others_spoke = true;
  for (const auto& [g, v] : frame.activity) {
    if (v <= onset_) continue;
    for (const auto& [h, w] : frame.activity)
      if (h > g && w > onset_) together_[{g, h}] = k;
    Label& l = labels_[g];
    if (l.turn_start < 0 || (l.turn_start != k && k - l.last_active > turn_gap_frames_)) {
      end_turn(l, g, k);
      start_turn(l, k);
    }
    l.last_active = k;
    if (l.deciding && !first_decision(g, k, stitcher)) return false;
  }
  const int clean = clean_speaker(frame);
  if (clean >= 0) {
    Label& l = labels_[clean];
    if (k > l.embedded_until) {
      if (l.heard_until < k) {
        audio_.copy(frame_audio_start(k), frame_audio_start(k) + kFrameSamples, l.pending);
        l.heard_until = k;
      }
      // A turn without evidence yet is weighed as soon as one partial's worth is there: the
      // sooner a returning speaker is recognised, the shorter the stretch a revision corrects.
      const double wanted = l.evidence_seconds > 0 ? settings_.evidence_seconds * kSampleRate
                                                   : static_cast<double>(kPartialAudio);
      if (static_cast<double>(l.pending.size()) >= std::max(wanted, double{kPartialAudio}) &&
          !weigh_chunk(clean, k))
        return false;
    }
  }

  SpeakerValues by_voice;
  for (const auto& [g, v] : frame.activity) {
    auto it = labels_.find(g);
    if (it == labels_.end() || it->second.voice < 0) continue;  // never active: no voice
    const int id = it->second.voice;
    if (v > onset_) voices_.heard(id, frame_audio_start(k));
    auto at = std::lower_bound(by_voice.begin(), by_voice.end(), id,
                               [](const std::pair<int, float>& e, int i) { return e.first < i; });
    if (at != by_voice.end() && at->first == id)
      at->second = std::max(at->second, v);
    else
      by_voice.insert(at, {id, v});
  }
  frame.activity.swap(by_voice);

  for (auto it = together_.begin(); it != together_.end();)
    it = it->second + kWindowFrames < k ? together_.erase(it) : std::next(it);
  // A label silent for turn_gap has ended its turn; one silent for a few windows holds nothing a
  // decision needs.
  for (auto it = labels_.begin(); it != labels_.end();) {
    if (it->second.last_active + turn_gap_frames_ < k) end_turn(it->second, it->first, k);
    if (it->second.last_active + 4 * kWindowFrames < k) {
      end_turn(it->second, it->first, k);
      it = labels_.erase(it);
      // Pairs of voices forgotten since (capacity) will never be asked about: a long stream's
      // memory stays bounded by the voices it remembers.
      for (auto a = apart_.begin(); a != apart_.end();)
        a = voices_.find(a->first) && voices_.find(a->second) ? std::next(a) : apart_.erase(a);
    } else {
      ++it;
    }
  }
  audio_.drop_before(frame_audio_start(k + 1));
  return true;
}

}  // namespace speakerseg
