// From window results to speaker changes: powerset decoding, stitching, finalisation `latency`
// behind the newest audio, and the turn decisions. Owned by whoever runs inference (the element's
// worker thread); holds a bounded history, so memory does not grow with the stream.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engines/voice_encoder.h"
#include "identity/speaker_identifier.h"
#include "identity/voiceprints.h"
#include "streaming/speaker_change.h"
#include "streaming/speaker_stitcher.h"
#include "streaming/stream_settings.h"
#include "streaming/turn_tracker.h"

namespace speakerseg {

class SpeakerTimeline {
 public:
  // With settings.identity.enabled, speakers are named by voice (core/identity), from `enrolled`
  // where given; every call then needs the window's audio and a voice encoder.
  explicit SpeakerTimeline(const StreamSettings& settings,
                           std::shared_ptr<const Voiceprints> enrolled = nullptr);

  // Log-probabilities [frames][7] of the window whose first sample is at `start`; `end` is the
  // stream position just past its last sample (the newest audio it saw). `audio`: the window's
  // end - start samples; `voice`: the encoder, used on this thread during the call.
  void add_window(int64_t start, int64_t end, const float* logprobs, int frames,
                  const float* audio = nullptr, VoiceEncoder* voice = nullptr);
  // End of stream (or of a stretch of it, before a reset): every covered frame becomes final;
  // with StretchEnd::kStalled the current turn then ends at `end` (TurnTracker::stall).
  void finish(int64_t end, VoiceEncoder* voice = nullptr, StretchEnd how = StretchEnd::kEnded);

  // The same two in steps, for hosts that embed the voices of many streams together: they stop
  // at the first final frame that waits for a voice embedding. While voice_request() is not null,
  // embed it (embed_utterances()) and hand the embedding to give_voice(), which carries on and
  // may stop again; the window or the finish is done when voice_request() is null.
  void begin_window(int64_t start, int64_t end, const float* logprobs, int frames,
                    const float* audio = nullptr);
  void begin_finish(int64_t end, StretchEnd how = StretchEnd::kEnded);
  const UtteranceRequest* voice_request() const {
    return identifier_ ? identifier_->voice_request() : nullptr;
  }
  void give_voice(std::vector<float> embedding);
  // Utterance embeddings given so far; a reset() does not forget them (a statistic).
  uint64_t voice_embeddings() const { return voice_embeddings_; }

  std::vector<SpeakerChange> take_changes();
  // Every speaker name given so far (stitcher labels, or voices with identity by voice).
  const std::vector<std::string>& speakers() const {
    return identifier_ ? identifier_->names() : stitcher_.labels();
  }
  const SpeakerIdentifier* identifier() const { return identifier_.get(); }
  size_t held_frames() const { return stitcher_.held_frames(); }
  void reset();

 private:
  // Makes every frame before `end_frame` final, then advance()s through them.
  void finalize(int64_t end_frame, int64_t announced_sample);
  // Relabels and tracks the final frames not done yet, up to the first that waits for a voice.
  void advance();
  // Embeds whatever voice_request() asks for with `voice` until the frames are done.
  void run_voice(VoiceEncoder* voice);

  StreamSettings settings_;
  SpeakerStitcher stitcher_;
  TurnTracker tracker_;
  std::unique_ptr<SpeakerIdentifier> identifier_;  // with identity by voice
  std::vector<float> activity_;
  std::vector<FrameActivity> final_;
  size_t next_final_ = 0;        // final_[next_final_...] are still to relabel and track
  int64_t announced_ = 0;        // the stream position their changes are announced at
  size_t first_new_change_ = 0;  // changes_ from here on came from final_
  int64_t stall_at_ = -1;        // a stall to announce once final_ is done (-1: none)
  std::vector<SpeakerChange> changes_;
  uint64_t voice_embeddings_ = 0;
};

}  // namespace speakerseg
