// One voice embedding from a stretch of audio, computed the same way wherever one is needed (the
// stream's speakers, `speakerseg voiceprint`, `speakerseg enroll`): the GE2E encoder on 160-frame
// partials of the stretch's mel spectrogram.
#pragma once

#include <cstdint>
#include <vector>

#include "engines/voice_encoder.h"
#include "features/mel_spectrogram.h"

namespace speakerseg {

// Mel frames between successive partials by default (0.8 s; Resemblyzer takes 1.3 per second).
constexpr int kPartialStep = 80;
// Loudness an utterance is raised to before its mel, as Resemblyzer's preprocess_wav does: the mel
// is a power spectrum, so the embedding depends on gain. Only raised, never lowered, and by at
// most kMaxGainDb, so that near-silence is not blown up into noise.
constexpr double kTargetDbfs = -30.0;
constexpr double kMaxGainDb = 40.0;

// First mel frame of every partial wholly inside `frames` mel frames: 0, step, 2 step, ...
std::vector<int64_t> partial_starts(int64_t frames, int step = kPartialStep);

// [partials][kEmbeddingDim]: one row per partial of partial_starts(), of `audio` as it is (no
// volume scaling; `speakerseg voiceprint --raw`). Empty when the audio is shorter than a partial.
std::vector<float> embed_partials(VoiceEncoder& encoder, const MelSpectrogram& mel,
                                  const float* audio, int64_t n, int step = kPartialStep);

// The gain that brings `audio` up to kTargetDbfs (at most kMaxGainDb; 1 when it is loud enough).
float volume_gain(const float* audio, int64_t n);

// `audio` scaled by volume_gain(), as the utterance embedding sees it.
std::vector<float> normalise_volume(const float* audio, int64_t n);

// An utterance ready for the encoder: the partials of its volume-normalised mel, one after the
// other. Requests of many speakers and streams are embedded together by embed_utterances().
struct UtteranceRequest {
  std::vector<float> partials;  // [count][kPartialFrames][kMelBands]
  int count = 0;                // 0: shorter than one partial, the embedding is empty
  float high_band = 1;          // high_band_ratio() of the utterance
  bool narrowband() const;      // telephone band: high_band under kNarrowbandRatio
};
UtteranceRequest utterance_request(const MelSpectrogram& mel, const float* audio, int64_t n);

// The utterance embedding of each request (empty for a request without partials): the mean of its
// partial embeddings, renormalised to unit length. Every request's partials go through the encoder
// together, in calls of at most `max_batch` partials, since a batched call costs the encoder much
// less per partial than one call per utterance. Returns the encoder calls made.
int embed_utterances(VoiceEncoder& encoder, const std::vector<const UtteranceRequest*>& requests,
                     std::vector<std::vector<float>>& embeddings, int max_batch = 64);

// The utterance embedding of `audio` alone. Empty when the audio is shorter than one partial
// (25 440 samples, 1.59 s: 160 frames centred 160 samples apart). `narrowband`, where given:
// whether the audio is telephone band (high_band_ratio() under kNarrowbandRatio).
std::vector<float> utterance_embedding(VoiceEncoder& encoder, const MelSpectrogram& mel,
                                       const float* audio, int64_t n, bool* narrowband = nullptr);

// The power of a mel spectrogram [frames][kMelBands] in the bands centred at 4.2 kHz or more,
// over that in the bands centred at 2.4-3.4 kHz: how sharply the spectrum ends above the
// telephone band. Telephone speech (300-3400 Hz) gives about 0.007 (under kNarrowbandRatio);
// studio, Opus-coded and meeting-room speech give 0.1-2, however steep their natural tilt.
float high_band_ratio(const MelSpectrogram& mel, const std::vector<float>& spectrogram);
constexpr float kNarrowbandRatio = 0.03f;

// Cosine similarity of two unit vectors of kEmbeddingDim.
float cosine(const float* a, const float* b);

}  // namespace speakerseg
