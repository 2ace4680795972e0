#include "streaming/speaker_change_detector.h"

#include <cmath>
#include <stdexcept>

#include "model/model_spec.h"

namespace speakerseg {

int step_samples(const StreamSettings& s) {
  const long step = std::lround(s.step * kSampleRate);
  if (step < 1 || step > kWindowSamples)
    throw std::invalid_argument("step must be between 1/16000 s and 10 s");
  return static_cast<int>(step);
}

SegmentationRunner::SegmentationRunner(SegmentationEngine& engine, const StreamSettings& settings,
                                       VoiceEncoder* voice,
                                       std::shared_ptr<const Voiceprints> enrolled)
    : engine_(engine), voice_(voice), timeline_(settings, std::move(enrolled)) {}

void SegmentationRunner::run(const std::vector<WindowJob>& jobs) {
  if (jobs.empty()) return;
  const int samples = static_cast<int>(jobs[0].samples.size());
  const int frames = frames_for_samples(samples);
  windows_.resize(jobs.size());
  logprobs_.resize(jobs.size() * frames * kClasses);
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (static_cast<int>(jobs[i].samples.size()) != samples)
      throw std::invalid_argument("SegmentationRunner::run: windows of different lengths");
    windows_[i] = jobs[i].samples.data();
  }
  engine_.forward_windows(windows_.data(), static_cast<int>(jobs.size()), samples,
                          logprobs_.data());
  for (size_t i = 0; i < jobs.size(); ++i)
    timeline_.add_window(jobs[i].start, jobs[i].end, &logprobs_[i * frames * kClasses], frames,
                         jobs[i].samples.data(), voice_);
}

SpeakerChangeDetector::SpeakerChangeDetector(SegmentationEngine& engine,
                                             const StreamSettings& settings, int batch_size,
                                             VoiceEncoder* voice,
                                             std::shared_ptr<const Voiceprints> enrolled)
    : windows_(kWindowSamples, step_samples(settings)),
      runner_(engine, settings, voice, std::move(enrolled)),
      batch_size_(std::max(1, batch_size)) {}

void SpeakerChangeDetector::queue(WindowJob&& window) {
  queued_.push_back(std::move(window));
  if (static_cast<int>(queued_.size()) >= batch_size_) run_queued();
}

void SpeakerChangeDetector::run_queued() {
  runner_.run(queued_);
  queued_.clear();
}

void SpeakerChangeDetector::push(const float* samples, size_t n) {
  windows_.push(samples, n, [this](WindowJob&& w) { queue(std::move(w)); });
}

void SpeakerChangeDetector::finish() {
  windows_.flush_tail([this](WindowJob&& w) { queue(std::move(w)); });
  run_queued();
  runner_.finish(windows_.total());
}

void SpeakerChangeDetector::reset() {
  queued_.clear();
  windows_.reset();
  runner_.reset();
}

}  // namespace speakerseg
