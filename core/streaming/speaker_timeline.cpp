#include "streaming/speaker_timeline.h"

#include <cmath>
#include <stdexcept>

#include "model/model_spec.h"
#include "model/powerset.h"

namespace speakerseg {

SpeakerTimeline::SpeakerTimeline(const StreamSettings& s,
                                 std::shared_ptr<const Voiceprints> enrolled)
    : settings_(s), stitcher_(s.match_threshold, s.onset), tracker_(s) {
  if (s.identity.enabled) identifier_ = std::make_unique<SpeakerIdentifier>(s, std::move(enrolled));
}

void SpeakerTimeline::add_window(int64_t start, int64_t end, const float* logprobs, int frames,
                                 const float* audio, VoiceEncoder* voice) {
  if (identifier_) {
    if (!audio || !voice)
      throw std::invalid_argument("identity by voice needs each window's audio and an encoder");
    identifier_->add_audio(start, audio, end - start);
  }
  activity_.resize(static_cast<size_t>(frames) * kLocalSpeakers);
  powerset_to_activity(logprobs, frames, activity_.data());
  stitcher_.add_window(start, activity_.data(), frames);
  // Frame k is final once its centre lies `latency` behind the newest sample.
  const int64_t latency = std::llround(settings_.latency * kSampleRate);
  const int64_t horizon = end - latency - SpeakerStitcher::frame_centre_sample(0);
  const int64_t end_frame = horizon < 0 ? 0 : horizon / 270 + 1;
  finalize(end_frame, end, voice);
}

void SpeakerTimeline::finish(int64_t end, VoiceEncoder* voice) {
  if (identifier_ && !voice) throw std::invalid_argument("identity by voice needs an encoder");
  finalize(stitcher_.covered_end(), end, voice);
}

void SpeakerTimeline::finalize(int64_t end_frame, int64_t announced_sample, VoiceEncoder* voice) {
  final_.clear();
  stitcher_.finalize_before(end_frame, final_);
  const size_t first = changes_.size();
  for (auto& f : final_) {
    if (identifier_) identifier_->relabel(f, stitcher_, *voice, tracker_);
    tracker_.push(f, speakers(), announced_sample, changes_);
  }
  if (identifier_)
    for (size_t i = first; i < changes_.size(); ++i)
      changes_[i].voice_score = identifier_->score(changes_[i].speaker_id);
}

std::vector<SpeakerChange> SpeakerTimeline::take_changes() {
  std::vector<SpeakerChange> out;
  out.swap(changes_);
  return out;
}

void SpeakerTimeline::reset() {
  stitcher_.reset();
  if (identifier_) identifier_->reset();
  tracker_.reset();
  changes_.clear();
}

}  // namespace speakerseg
