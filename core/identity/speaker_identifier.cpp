#include "identity/speaker_identifier.h"

#include <algorithm>
#include <stdexcept>

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

}  // namespace

SpeakerIdentifier::SpeakerIdentifier(const StreamSettings& settings,
                                     std::shared_ptr<const Voiceprints> enrolled)
    : settings_(settings.identity),
      onset_(settings.onset),
      enrolled_(std::move(enrolled)),
      voices_(static_cast<size_t>(std::max(1, settings.identity.capacity))) {
  settings_.match_threshold = voice_threshold(settings);
  reset();
}

void SpeakerIdentifier::reset() {
  voices_ = VoiceRegistry(static_cast<size_t>(std::max(1, settings_.capacity)));
  if (enrolled_)
    for (const auto& p : enrolled_->speakers) voices_.enroll(p.name, p.embedding);
  labels_.clear();
  scores_.clear();
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
  for (const auto& [h, l] : labels_)
    if (h != label && l.voice >= 0 && l.last_active >= 0 && l.last_active + kWindowFrames >= frame)
      out.push_back(l.voice);
  for (const auto& f : ahead)
    for (const auto& [h, v] : f.activity)
      if (h != label && v > onset_) {
        auto it = labels_.find(h);
        if (it != labels_.end() && it->second.voice >= 0) out.push_back(it->second.voice);
      }
  return out;
}

bool SpeakerIdentifier::decide(int label, int64_t frame, const SpeakerStitcher& stitcher,
                               int& voice) {
  std::vector<FrameActivity> ahead;
  stitcher.peek_from(frame, ahead);
  std::vector<float> clean;
  int64_t learned = -1;
  const auto budget = static_cast<size_t>(settings_.decision_seconds * kSampleRate);
  for (const auto& f : ahead) {
    if (clean.size() >= budget) break;
    if (clean_speaker(f) != label) continue;
    audio_.copy(frame_audio_start(f.frame), frame_audio_start(f.frame) + kFrameSamples, clean);
    learned = f.frame;
  }
  const bool enough = static_cast<int64_t>(clean.size()) >= kPartialAudio;
  const std::vector<float>* embedded = enough ? embedding_of(clean) : nullptr;
  if (enough && !embedded) return false;
  ++stats_.decisions;
  Label& l = labels_[label];
  const std::vector<int> excluded = touching(label, frame, ahead);
  auto allowed = [&](int id) {
    return std::find(excluded.begin(), excluded.end(), id) == excluded.end();
  };
  const int64_t now = frame_audio_start(frame);
  if (!enough) {
    // Too little clean speech yet: a provisional voice; evidence may merge it later.
    ++stats_.provisional;
    l.learned_until = -1;
    if (at_limit()) {
      const Voice* recent = nullptr;
      for (int id = 0; id < static_cast<int>(voices_.names().size()); ++id)
        if (const Voice* v = voices_.find(id); v && allowed(id))
          if (!recent || v->last_heard > recent->last_heard) recent = v;
      if (recent) {
        voice = recent->id;
        return true;
      }
    }
    voice = voices_.add({}, 0, now);
    return true;
  }
  l.learned_until = learned;
  const std::vector<float> e = *embedded;
  const double seconds = static_cast<double>(clean.size()) / kSampleRate;
  const Match m = voices_.nearest(e, allowed);
  if (m.id >= 0 && (m.score >= settings_.match_threshold || at_limit())) {
    ++stats_.recognised;
    voices_.learn(m.id, e, seconds, now);
    scores_[m.id] = m.score;
    voice = m.id;
    return true;
  }
  voice = voices_.add(e, seconds, now);
  scores_[voice] = 0;
  return true;
}

void SpeakerIdentifier::merge(int voice, const Match& into, TurnTracker& tracker) {
  ++stats_.merged;
  for (auto& [h, l] : labels_)
    if (l.voice == voice) l.voice = into.id;
  tracker.rename(voice, into.id);
  voices_.forget(voice);
  scores_[into.id] = into.score;
}

bool SpeakerIdentifier::weigh_evidence(int label, int64_t frame, TurnTracker& tracker) {
  Label& l = labels_[label];
  const std::vector<float>* embedded = embedding_of(l.evidence);
  if (!embedded) return false;
  const std::vector<float> e = *embedded;
  const double seconds = static_cast<double>(l.evidence.size()) / kSampleRate;
  l.evidence.clear();
  weigh(l, label, frame, e, seconds, tracker);
  return true;
}

void SpeakerIdentifier::weigh(Label& l, int label, int64_t frame, const std::vector<float>& e,
                              double seconds, TurnTracker& tracker) {
  if (e.empty()) return;
  const int64_t now = frame_audio_start(frame);
  const int current = l.voice;
  const std::vector<int> excluded = touching(label, frame, {});
  auto allowed = [&](int id) {
    return id != current && std::find(excluded.begin(), excluded.end(), id) == excluded.end();
  };
  const Voice* v = voices_.find(current);
  if (!v || !v->has_voiceprint()) {
    const Match m = voices_.nearest(e, allowed);
    if (m.id >= 0 && m.score >= settings_.match_threshold) {
      // The provisional voice was someone known all along: one voice from now on, silently.
      merge(current, m, tracker);
      voices_.learn(m.id, e, seconds, now);
    } else {
      voices_.learn(current, e, seconds, now);
    }
    return;
  }
  const float s = voices_.score(current, e);
  scores_[current] = s;
  if (!v->enrolled) {
    // An anonymous voice that is an enrolled person after all: their name from now on.
    const Match named = voices_.nearest(e, [&](int id) {
      const Voice* o = voices_.find(id);
      return o && o->enrolled && allowed(id);
    });
    if (named.id >= 0 && named.score >= settings_.match_threshold && named.score > s) {
      merge(current, named, tracker);
      return;
    }
  }
  const bool trusted = v->weight >= settings_.trusted_seconds;
  if (!trusted && !v->enrolled && settings_.young_merge_margin >= 0) {
    // A young voice (a first decision or a split on a few seconds of speech) that this evidence
    // gives to a known voice, as a decision on it would, and clearly better than to its own: the
    // known voice all along, from now on, silently (as a provisional voice is merged).
    const Match m = voices_.nearest(e, allowed);
    if (m.id >= 0 && m.score >= settings_.match_threshold &&
        m.score >= s + static_cast<float>(settings_.young_merge_margin)) {
      merge(current, m, tracker);
      voices_.learn(m.id, e, seconds, now);
      return;
    }
  }
  if (trusted && s < settings_.match_threshold && s >= settings_.split_threshold) {
    // Evidence a stranger could have given: it trains nothing. A known voice it matches clearly
    // better takes the label; evidence that twice running agrees with itself more than with the
    // voiceprint is a newcomer.
    const float margin = static_cast<float>(settings_.candidate_margin);
    const Match m = voices_.nearest(e, allowed);
    if (m.id >= 0 && m.score >= settings_.match_threshold && m.score >= s + margin) {
      split(l, m.id, m.score, e, seconds, now);
      return;
    }
    if (!l.candidate.empty()) {
      const float c = cosine(e.data(), l.candidate.data());
      if (c >= settings_.match_threshold && c >= s + margin && !at_limit()) {
        split(l, -1, 0.f, l.candidate, l.candidate_seconds, now);
        voices_.learn(l.voice, e, seconds, now);
        return;
      }
    }
    l.candidate = e;
    l.candidate_seconds = seconds;
    l.strikes = 0;
    return;
  }
  l.candidate.clear();
  if (s >= settings_.keep_threshold) {
    l.strikes = 0;
    voices_.learn(current, e, seconds, now);
    return;
  }
  if (s >= settings_.split_threshold) {  // unsure: neither trains nor splits
    l.strikes = 0;
    return;
  }
  // Someone else speaks under the label, if the evidence says who (a known voice, closer than
  // the label's own) or says twice running that it is not the label's voice.
  const Match m = voices_.nearest(e, allowed);
  const bool known = m.id >= 0 && m.score >= settings_.match_threshold && m.score > s;
  if (!known && ++l.strikes < 2) return;
  if (known) {
    split(l, m.id, m.score, e, seconds, now);
  } else if (!at_limit()) {
    split(l, -1, 0.f, e, seconds, now);
  } else {
    // At max-speakers with no known voice to give, the label keeps its own and the strikes start
    // again; counted in `splits`, as before split() existed.
    ++stats_.splits;
    l.strikes = 0;
  }
}

void SpeakerIdentifier::split(Label& l, int to, float score, const std::vector<float>& e,
                              double seconds, int64_t now) {
  ++stats_.splits;
  l.strikes = 0;
  l.candidate.clear();
  if (to >= 0) {
    l.voice = to;
    voices_.learn(to, e, seconds, now);
  } else {
    l.voice = voices_.add(e, seconds, now);
  }
  scores_[l.voice] = score;
}

bool SpeakerIdentifier::relabel(FrameActivity& frame, const SpeakerStitcher& stitcher,
                                TurnTracker& tracker) {
  // Everything up to the last embedding a frame may wait for is safe to run again: a label
  // decided before the wait keeps its voice, a frame's audio goes into the evidence once.
  const int64_t k = frame.frame;
  for (const auto& [g, v] : frame.activity) {
    if (v <= onset_) continue;
    Label& l = labels_[g];
    l.last_active = k;
    if (l.voice < 0) {
      int voice = -1;
      if (!decide(g, k, stitcher, voice)) return false;
      l.voice = voice;
    }
  }
  const int clean = clean_speaker(frame);
  if (clean >= 0) {
    Label& l = labels_[clean];
    if (k > l.learned_until) {
      if (l.heard_until < k) {
        audio_.copy(frame_audio_start(k), frame_audio_start(k) + kFrameSamples, l.evidence);
        l.heard_until = k;
      }
      // A provisional voice is weighed as soon as one partial's worth is there: the sooner a
      // returning speaker is recognised, the fewer turns carry the wrong name.
      const Voice* v = voices_.find(l.voice);
      const double wanted =
          !(v && v->has_voiceprint()) ? static_cast<double>(kPartialAudio)
          : l.candidate.empty()
              ? settings_.evidence_seconds * kSampleRate
              : std::max(settings_.candidate_seconds * kSampleRate, double{kPartialAudio});
      if (static_cast<double>(l.evidence.size()) >= wanted && !weigh_evidence(clean, k, tracker))
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

  // Labels silent for a window hold nothing a decision needs but their voice.
  for (auto it = labels_.begin(); it != labels_.end();)
    if (it->second.last_active + 4 * kWindowFrames < k && it->second.evidence.empty())
      it = labels_.erase(it);
    else
      ++it;
  audio_.drop_before(frame_audio_start(k + 1));
  return true;
}

}  // namespace speakerseg
