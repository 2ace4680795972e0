#include "identity/utterance_embedding.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "identity/squared_norm.h"

namespace speakerseg {

std::vector<int64_t> partial_starts(int64_t frames, int step) {
  std::vector<int64_t> starts;
  if (step < 1) return starts;
  for (int64_t s = 0; s + kPartialFrames <= frames; s += step) starts.push_back(s);
  return starts;
}

namespace {

// The partials of partial_starts() gathered one after the other from the spectrum they overlap in.
std::vector<float> gather_partials(const std::vector<float>& spectrum,
                                   const std::vector<int64_t>& starts) {
  std::vector<float> batch(starts.size() * kPartialFrames * kMelBands);
  for (size_t i = 0; i < starts.size(); ++i)
    std::copy_n(&spectrum[static_cast<size_t>(starts[i]) * kMelBands], kPartialFrames * kMelBands,
                &batch[i * kPartialFrames * kMelBands]);
  return batch;
}

}  // namespace

std::vector<float> embed_partials(VoiceEncoder& encoder, const MelSpectrogram& mel,
                                  const float* audio, int64_t n, int step) {
  const auto starts = partial_starts(MelSpectrogram::frames_for(n), step);
  std::vector<float> out(starts.size() * kEmbeddingDim);
  if (starts.empty()) return out;
  const std::vector<float> batch = gather_partials(mel.compute(audio, n), starts);
  encoder.embed(batch.data(), static_cast<int>(starts.size()), kPartialFrames, out.data());
  return out;
}

float volume_gain(const float* audio, int64_t n) {
  double power = 0;
  for (int64_t i = 0; i < n; ++i) power += static_cast<double>(audio[i]) * audio[i];
  if (n == 0 || power <= 0) return 1.f;
  const double change_db = kTargetDbfs - 10 * std::log10(power / n);
  if (change_db <= 0) return 1.f;
  return static_cast<float>(std::pow(10.0, std::min(change_db, kMaxGainDb) / 20));
}

std::vector<float> normalise_volume(const float* audio, int64_t n) {
  std::vector<float> out(audio, audio + n);
  const float gain = volume_gain(audio, n);
  if (gain != 1.f)
    for (float& x : out) x *= gain;
  return out;
}

UtteranceRequest utterance_request(const MelSpectrogram& mel, const float* audio, int64_t n) {
  UtteranceRequest r;
  const auto starts = partial_starts(MelSpectrogram::frames_for(n));
  if (starts.empty()) return r;
  const std::vector<float> spectrogram = mel.compute(audio, n, volume_gain(audio, n));
  r.partials = gather_partials(spectrogram, starts);
  r.count = static_cast<int>(starts.size());
  r.high_band = high_band_ratio(mel, spectrogram);
  return r;
}

bool UtteranceRequest::narrowband() const {
  return high_band < kNarrowbandRatio;
}

float high_band_ratio(const MelSpectrogram& mel, const std::vector<float>& spectrogram) {
  // +1: at or above 4.2 kHz; -1: in the top of the telephone band, 2.4-3.4 kHz.
  int band[kMelBands];
  for (int m = 0; m < kMelBands; ++m) {
    const double hz = mel.peak_hz()[m];
    band[m] = hz >= 4200 ? 1 : hz >= 2400 && hz <= 3400 ? -1 : 0;
  }
  double above = 0, top = 0;
  for (size_t f = 0; f + kMelBands <= spectrogram.size(); f += kMelBands)
    for (int m = 0; m < kMelBands; ++m) {
      if (band[m] > 0) above += spectrogram[f + m];
      if (band[m] < 0) top += spectrogram[f + m];
    }
  return top > 0 ? static_cast<float>(above / top) : 1.f;
}

int embed_utterances(VoiceEncoder& encoder, const std::vector<const UtteranceRequest*>& requests,
                     std::vector<std::vector<float>>& embeddings, int max_batch) {
  constexpr size_t kPartial = static_cast<size_t>(kPartialFrames) * kMelBands;
  int total = 0;
  for (const UtteranceRequest* r : requests) total += r->count;
  max_batch = std::max(1, max_batch);
  // The thread's scratch: one call's partials gathered, and every partial's embedding. A voice
  // round of a few hundred utterances would otherwise take megabytes of fresh pages.
  thread_local std::vector<float> call_mel, partials;
  const size_t call_floats = static_cast<size_t>(std::min(max_batch, total)) * kPartial;
  if (call_mel.size() < call_floats) call_mel.resize(call_floats);
  if (partials.size() < static_cast<size_t>(total) * kEmbeddingDim)
    partials.resize(static_cast<size_t>(total) * kEmbeddingDim);
  int calls = 0, embedded = 0, gathered = 0;
  const auto call = [&] {
    encoder.embed(call_mel.data(), gathered, kPartialFrames,
                  &partials[static_cast<size_t>(embedded) * kEmbeddingDim]);
    embedded += gathered;
    gathered = 0;
    ++calls;
  };
  for (const UtteranceRequest* r : requests)
    for (int p = 0; p < r->count; ++p) {
      std::copy_n(&r->partials[static_cast<size_t>(p) * kPartial], kPartial,
                  &call_mel[static_cast<size_t>(gathered) * kPartial]);
      if (++gathered == max_batch) call();
    }
  if (gathered > 0) call();
  embeddings.assign(requests.size(), {});
  int row = 0;
  for (size_t q = 0; q < requests.size(); ++q) {
    const int count = requests[q]->count;
    if (count == 0) continue;
    std::vector<float> mean(kEmbeddingDim, 0.f);
    for (int p = row; p < row + count; ++p)
      for (int k = 0; k < kEmbeddingDim; ++k)
        mean[k] += partials[static_cast<size_t>(p) * kEmbeddingDim + k];
    row += count;
    const double norm = squared_norm(mean);
    const float inv = norm > 0 ? static_cast<float>(1.0 / std::sqrt(norm)) : 0.f;
    for (float& v : mean) v *= inv;
    embeddings[q] = std::move(mean);
  }
  return calls;
}

std::vector<float> utterance_embedding(VoiceEncoder& encoder, const MelSpectrogram& mel,
                                       const float* audio, int64_t n, bool* narrowband) {
  const UtteranceRequest r = utterance_request(mel, audio, n);
  if (narrowband) *narrowband = r.narrowband();
  std::vector<std::vector<float>> out;
  embed_utterances(encoder, {&r}, out);
  return std::move(out[0]);
}

float cosine(const float* a, const float* b) {
  double dot = 0;
  for (int k = 0; k < kEmbeddingDim; ++k) dot += static_cast<double>(a[k]) * b[k];
  return static_cast<float>(dot);
}

}  // namespace speakerseg
