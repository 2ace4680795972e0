#include "streaming/turn_tracker.h"

#include <algorithm>
#include <cmath>

#include "model/model_spec.h"

namespace speakerseg {

TurnTracker::TurnTracker(const StreamSettings& s)
    : onset_(s.onset),
      switch_margin_(s.switch_margin),
      min_speech_frames_(std::llround(s.min_speech / kFrameStepSeconds)),
      min_silence_frames_(std::llround(s.min_silence / kFrameStepSeconds)),
      min_gap_frames_(std::max<int64_t>(1, std::llround(s.min_gap / kFrameStepSeconds))) {}

void TurnTracker::reset() {
  current_ = -1;
  pending_ = kNone;
  pending_frames_ = 0;
  pending_active_.clear();
  gap_ = {};
  announced_.clear();
  current_since_ = 0;
}

void TurnTracker::revise(int from, int to, int64_t since, const std::vector<std::string>& labels,
                         int64_t announced_sample, std::vector<SpeakerChange>& out) {
  if (from == to) return;
  if (pending_ == from) pending_ = to;
  for (Announced& a : announced_) {
    if (a.speaker != from || a.sample < since) continue;
    a.speaker = to;
    SpeakerChange r;
    r.sample = a.sample;
    r.speaker = labels[to];
    r.was = labels[from];
    r.announced_sample = announced_sample;
    r.speaker_id = to;
    r.revision = true;
    out.push_back(std::move(r));
  }
  if (current_ != from) return;
  current_ = to;
  if (current_since_ >= since) return;  // its change was revised above
  // The turn began before `since` (the stitcher carried its label on to somebody else): the
  // change that was never announced is, now, dated where the other voice began.
  SpeakerChange c;
  c.sample = since;
  c.speaker = labels[to];
  c.previous = labels[from];
  c.active = {labels[to]};
  c.confidence = 1.0;
  c.announced_sample = announced_sample;
  c.speaker_id = to;
  remember(c.sample, to);
  out.push_back(std::move(c));
}

void TurnTracker::remember(int64_t sample, int speaker) {
  current_since_ = sample;
  if (speaker < 0) return;
  if (announced_.size() == kRemembered) announced_.erase(announced_.begin());
  announced_.push_back({sample, speaker});
}

void TurnTracker::stall(int64_t sample, const std::vector<std::string>& labels,
                        std::vector<SpeakerChange>& out) {
  SpeakerChange c;
  c.sample = sample;
  c.previous = current_ >= 0 ? labels[current_] : "";
  c.confidence = 1.0;  // nothing at all is heard
  c.announced_sample = sample;
  c.stalled = true;
  out.push_back(std::move(c));
  current_since_ = sample;
  current_ = -1;
  pending_ = kNone;
  gap_ = {};
}

void TurnTracker::push(const FrameActivity& frame, const std::vector<std::string>& labels,
                       int64_t announced_sample, std::vector<SpeakerChange>& out) {
  const auto& a = frame.activity;  // (label, activity) in label order; others are 0
  auto active = [&](int g) { return g >= 0 && frame.of(g) > onset_; };

  // Who holds the turn on this frame, before smoothing.
  int dominant = -1;
  float top = onset_;
  for (const auto& [g, v] : a)
    if (v > top) top = v, dominant = g;
  int raw = dominant;
  if (active(current_) && (dominant < 0 || top - frame.of(current_) < switch_margin_)) {
    raw = current_;
  } else if (pending_ >= 0 && active(pending_) &&
             (dominant < 0 || top - frame.of(pending_) < switch_margin_)) {
    raw = pending_;
  }

  if (raw == current_) {  // a pause inside the turn, or a blip that did not last
    pending_ = kNone;
    gap_ = {};
    return;
  }
  double confidence = 0;
  if (raw >= 0) {
    confidence = frame.of(raw);
  } else {
    float loudest = 0;
    for (const auto& [g, v] : a) loudest = std::max(loudest, v);
    confidence = 1.0 - loudest;
  }
  if (raw != pending_) {
    if (pending_ == -1) gap_ = {pending_start_, pending_frames_, pending_confidence_};
    pending_ = raw;
    pending_start_ = frame.frame;
    pending_frames_ = 0;
    pending_confidence_ = 0;
    pending_active_.clear();
    for (const auto& [g, v] : a)
      if (v > onset_) pending_active_.push_back(labels[g]);
  }
  ++pending_frames_;
  pending_confidence_ += confidence;
  if (pending_frames_ < std::max<int64_t>(1, raw >= 0 ? min_speech_frames_ : min_silence_frames_))
    return;

  if (raw >= 0 && current_ >= 0 && gap_.frames >= min_gap_frames_) {
    // The current speaker stopped, and after a silence shorter than min-silence somebody else
    // took over: the silence was nobody's.
    SpeakerChange g;
    g.sample = SpeakerStitcher::frame_centre_sample(gap_.start);
    g.previous = labels[current_];
    g.confidence = gap_.confidence / gap_.frames;
    g.announced_sample = announced_sample;
    remember(g.sample, -1);
    out.push_back(std::move(g));
    current_ = -1;
  }
  gap_ = {};

  SpeakerChange c;
  c.sample = SpeakerStitcher::frame_centre_sample(pending_start_);
  c.speaker = raw >= 0 ? labels[raw] : "";
  c.previous = current_ >= 0 ? labels[current_] : "";
  c.active = pending_active_;
  c.confidence = pending_confidence_ / pending_frames_;
  c.announced_sample = announced_sample;
  c.speaker_id = raw;
  remember(c.sample, raw);
  out.push_back(std::move(c));
  current_ = raw;
  pending_ = kNone;
}

}  // namespace speakerseg
