// Audio in, speaker changes out. Two pieces, so that a host can put a thread between them:
//   WindowBuffer (audio side) cuts windows;  SegmentationRunner (inference side) runs batches of
//   windows through an engine and into the SpeakerTimeline.
// SpeakerChangeDetector joins them on one thread, for offline jobs and tests.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engines/segmentation_engine.h"
#include "model/model_spec.h"
#include "streaming/speaker_timeline.h"
#include "streaming/window_buffer.h"

namespace speakerseg {

class SegmentationRunner {
 public:
  // With settings.identity.enabled, `voice` names the speakers (from `enrolled`, if given).
  SegmentationRunner(SegmentationEngine& engine, const StreamSettings& settings,
                     VoiceEncoder* voice = nullptr,
                     std::shared_ptr<const Voiceprints> enrolled = nullptr);

  // Runs `jobs` (all of one length) as one batch and stitches their results in order.
  void run(const std::vector<WindowJob>& jobs);
  void finish(int64_t end) { timeline_.finish(end, voice_); }
  const SpeakerTimeline& timeline() const { return timeline_; }
  std::vector<SpeakerChange> take_changes() { return timeline_.take_changes(); }
  const std::vector<std::string>& speakers() const { return timeline_.speakers(); }
  size_t held_frames() const { return timeline_.held_frames(); }
  void reset() { timeline_.reset(); }

 private:
  SegmentationEngine& engine_;
  VoiceEncoder* voice_;
  SpeakerTimeline timeline_;
  std::vector<const float*> windows_;
  std::vector<float> logprobs_;
};

class SpeakerChangeDetector {
 public:
  SpeakerChangeDetector(SegmentationEngine& engine, const StreamSettings& settings,
                        int batch_size = 1, VoiceEncoder* voice = nullptr,
                        std::shared_ptr<const Voiceprints> enrolled = nullptr);

  void push(const float* samples, size_t n);  // null samples: n samples of silence
  void finish();                              // end of stream: run what is left, finalise all
  std::vector<SpeakerChange> take_changes() { return runner_.take_changes(); }
  const std::vector<std::string>& speakers() const { return runner_.speakers(); }
  size_t held_frames() const { return runner_.held_frames(); }
  int64_t samples_pushed() const { return windows_.total(); }
  const SpeakerTimeline& timeline() const { return runner_.timeline(); }
  void reset();

 private:
  void queue(WindowJob&& window);
  void run_queued();

  WindowBuffer windows_;
  SegmentationRunner runner_;
  int batch_size_;
  std::vector<WindowJob> queued_;
};

int step_samples(const StreamSettings& settings);

}  // namespace speakerseg
