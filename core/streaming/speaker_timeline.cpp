#include "streaming/speaker_timeline.h"

#include <cmath>

#include "model/model_spec.h"
#include "model/powerset.h"

namespace speakerseg {

SpeakerTimeline::SpeakerTimeline(const StreamSettings& s)
    : settings_(s), stitcher_(s.match_threshold, s.onset), tracker_(s) {}

void SpeakerTimeline::add_window(int64_t start, int64_t end, const float* logprobs, int frames) {
  activity_.resize(static_cast<size_t>(frames) * kLocalSpeakers);
  powerset_to_activity(logprobs, frames, activity_.data());
  stitcher_.add_window(start, activity_.data(), frames);
  // Frame k is final once its centre lies `latency` behind the newest sample.
  const int64_t latency = std::llround(settings_.latency * kSampleRate);
  const int64_t horizon = end - latency - SpeakerStitcher::frame_centre_sample(0);
  const int64_t end_frame = horizon < 0 ? 0 : horizon / 270 + 1;
  finalize(end_frame, end);
}

void SpeakerTimeline::finish(int64_t end) {
  finalize(stitcher_.covered_end(), end);
}

void SpeakerTimeline::finalize(int64_t end_frame, int64_t announced_sample) {
  final_.clear();
  stitcher_.finalize_before(end_frame, final_);
  for (const auto& f : final_) tracker_.push(f, stitcher_.labels(), announced_sample, changes_);
}

std::vector<SpeakerChange> SpeakerTimeline::take_changes() {
  std::vector<SpeakerChange> out;
  out.swap(changes_);
  return out;
}

void SpeakerTimeline::reset() {
  stitcher_.reset();
  tracker_.reset();
  changes_.clear();
}

}  // namespace speakerseg
