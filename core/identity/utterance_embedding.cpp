#include "identity/utterance_embedding.h"

#include <algorithm>
#include <cmath>

namespace speakerseg {

std::vector<int64_t> partial_starts(int64_t frames, int step) {
  std::vector<int64_t> starts;
  if (step < 1) return starts;
  for (int64_t s = 0; s + kPartialFrames <= frames; s += step) starts.push_back(s);
  return starts;
}

std::vector<float> embed_partials(VoiceEncoder& encoder, const MelSpectrogram& mel,
                                  const float* audio, int64_t n, int step) {
  const std::vector<float> spectrum = mel.compute(audio, n);
  const auto starts = partial_starts(MelSpectrogram::frames_for(n), step);
  std::vector<float> out(starts.size() * kEmbeddingDim);
  if (starts.empty()) return out;
  // Partials overlap in the spectrum: gather them one after the other for one batched call.
  std::vector<float> batch(starts.size() * kPartialFrames * kMelBands);
  for (size_t i = 0; i < starts.size(); ++i)
    std::copy_n(&spectrum[static_cast<size_t>(starts[i]) * kMelBands], kPartialFrames * kMelBands,
                &batch[i * kPartialFrames * kMelBands]);
  encoder.embed(batch.data(), static_cast<int>(starts.size()), kPartialFrames, out.data());
  return out;
}

std::vector<float> normalise_volume(const float* audio, int64_t n) {
  std::vector<float> out(audio, audio + n);
  double power = 0;
  for (int64_t i = 0; i < n; ++i) power += static_cast<double>(audio[i]) * audio[i];
  if (n == 0 || power <= 0) return out;
  const double change_db = kTargetDbfs - 10 * std::log10(power / n);
  if (change_db <= 0) return out;
  const float gain = static_cast<float>(std::pow(10.0, std::min(change_db, kMaxGainDb) / 20));
  for (float& x : out) x *= gain;
  return out;
}

std::vector<float> utterance_embedding(VoiceEncoder& encoder, const MelSpectrogram& mel,
                                       const float* audio, int64_t n) {
  const std::vector<float> scaled = normalise_volume(audio, n);
  const std::vector<float> partials = embed_partials(encoder, mel, scaled.data(), n);
  if (partials.empty()) return {};
  std::vector<float> mean(kEmbeddingDim, 0.f);
  const size_t count = partials.size() / kEmbeddingDim;
  for (size_t p = 0; p < count; ++p)
    for (int k = 0; k < kEmbeddingDim; ++k) mean[k] += partials[p * kEmbeddingDim + k];
  double norm = 0;
  for (float v : mean) norm += static_cast<double>(v) * v;
  const float inv = norm > 0 ? static_cast<float>(1.0 / std::sqrt(norm)) : 0.f;
  for (float& v : mean) v *= inv;
  return mean;
}

float cosine(const float* a, const float* b) {
  double dot = 0;
  for (int k = 0; k < kEmbeddingDim; ++k) dot += static_cast<double>(a[k]) * b[k];
  return static_cast<float>(dot);
}

}  // namespace speakerseg
