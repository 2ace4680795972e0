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
  if (identifier_ && (!audio || !voice))
    throw std::invalid_argument("identity by voice needs each window's audio and an encoder");
  begin_window(start, end, logprobs, frames, audio);
  run_voice(voice);
}

void SpeakerTimeline::finish(int64_t end, VoiceEncoder* voice, StretchEnd how) {
  if (identifier_ && !voice) throw std::invalid_argument("identity by voice needs an encoder");
  begin_finish(end, how);
  run_voice(voice);
}

void SpeakerTimeline::run_voice(VoiceEncoder* voice) {
  while (const UtteranceRequest* r = voice_request()) {
    std::vector<std::vector<float>> e;
    embed_utterances(*voice, {r}, e);
    give_voice(std::move(e[0]));
  }
}

void SpeakerTimeline::begin_window(int64_t start, int64_t end, const float* logprobs, int frames,
                                   const float* audio) {
  if (voice_request())
    throw std::logic_error("a window arrived while the last one still waits for a voice");
  if (identifier_) {
    if (!audio) throw std::invalid_argument("identity by voice needs each window's audio");
    identifier_->add_audio(start, audio, end - start);
  }
  activity_.resize(static_cast<size_t>(frames) * kLocalSpeakers);
  powerset_to_activity(logprobs, frames, activity_.data());
  stitcher_.add_window(start, activity_.data(), frames);
  // Frame k is final once its centre lies `latency` behind the newest sample.
  const int64_t latency = std::llround(settings_.latency * kSampleRate);
  const int64_t horizon = end - latency - SpeakerStitcher::frame_centre_sample(0);
  const int64_t end_frame = horizon < 0 ? 0 : horizon / 270 + 1;
  finalize(end_frame, end);
}

void SpeakerTimeline::begin_finish(int64_t end, StretchEnd how) {
  if (voice_request())
    throw std::logic_error("the stream ended while its last window still waits for a voice");
  // After the final frames, which may wait for voices: the stall comes last.
  if (how == StretchEnd::kStalled) stall_at_ = end;
  finalize(stitcher_.covered_end(), end);
}

void SpeakerTimeline::give_voice(std::vector<float> embedding) {
  if (!identifier_) throw std::logic_error("a voice was given to a timeline without identity");
  identifier_->give_voice(std::move(embedding));
  ++voice_embeddings_;
  advance();
}

void SpeakerTimeline::finalize(int64_t end_frame, int64_t announced_sample) {
  final_.clear();
  next_final_ = 0;
  stitcher_.finalize_before(end_frame, final_);
  announced_ = announced_sample;
  first_new_change_ = changes_.size();
  advance();
}

void SpeakerTimeline::advance() {
  for (; next_final_ < final_.size(); ++next_final_) {
    FrameActivity& f = final_[next_final_];
    if (identifier_) {
      if (!identifier_->relabel(f, stitcher_)) return;
      for (const VoiceRevision& r : identifier_->take_revisions())
        tracker_.revise(r.from, r.to, r.since, speakers(), announced_, changes_);
    }
    tracker_.push(f, speakers(), announced_, changes_);
  }
  if (stall_at_ >= 0) {
    tracker_.stall(stall_at_, speakers(), changes_);
    stall_at_ = -1;
  }
  if (identifier_)
    for (size_t i = first_new_change_; i < changes_.size(); ++i)
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
  final_.clear();
  next_final_ = 0;
  first_new_change_ = 0;
  stall_at_ = -1;
}

}  // namespace speakerseg
