#include "features/mel_spectrogram.h"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "engines/cpu/omp_threads.h"
#include "model/voice_model.h"

namespace speakerseg {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr int kRate = 16000;
constexpr int kFrameBlock = 256;  // frames per product: bounds the scratch to ~1 MB

// One block's scratch, kept by each thread that computes spectrograms. A fresh 1 MB for every
// utterance cost the kernel's page zeroing 7.4 % of a 2 000-channel run with identity (the
// stitch threads each compute many a second); a thread keeps at most one block's worth.
struct BlockScratch {
  std::vector<float> framed, spectrum, power;

  void reserve(size_t rows) {
    const auto grow = [](std::vector<float>& v, size_t n) {
      if (v.size() < n) v.resize(n);
    };
    grow(framed, rows * kMelFft);
    grow(spectrum, rows * 2 * kMelBins);
    grow(power, rows * kMelBins);
  }
};
thread_local BlockScratch block_scratch;

// Slaney's mel scale (librosa's htk=False): linear below 1 kHz, logarithmic above.
constexpr double kLinearHzPerMel = 200.0 / 3;
constexpr double kLogMelStart = 1000.0 / kLinearHzPerMel;  // 15
const double kLogStep = std::log(6.4) / 27.0;

double hz_to_mel(double hz) {
  return hz < 1000.0 ? hz / kLinearHzPerMel : kLogMelStart + std::log(hz / 1000.0) / kLogStep;
}
double mel_to_hz(double mel) {
  return mel < kLogMelStart ? mel * kLinearHzPerMel
                            : 1000.0 * std::exp(kLogStep * (mel - kLogMelStart));
}

void gemm(int m, int n, int k, const float* a, const float* b, float* c) {
  if (dnnl_sgemm('N', 'N', m, n, k, 1.f, a, k, b, n, 0.f, c, n) != dnnl_success)
    throw std::runtime_error("oneDNN sgemm failed in the mel spectrogram");
}

std::shared_ptr<const MelSpectrogram::Tables> make_tables() {
  auto t = std::make_shared<MelSpectrogram::Tables>();
  t->basis.resize(static_cast<size_t>(kMelFft) * 2 * kMelBins);
  t->filters.resize(static_cast<size_t>(kMelBands) * kMelBins);
  t->filters_t.resize(t->filters.size());
  for (int n = 0; n < kMelFft; ++n) {
    const double window = 0.5 - 0.5 * std::cos(2 * kPi * n / kMelFft);  // periodic Hann
    for (int k = 0; k < kMelBins; ++k) {
      // n * k reduced mod n_fft first: the angle stays small and exact.
      const double angle = 2 * kPi * ((static_cast<int64_t>(n) * k) % kMelFft) / kMelFft;
      t->basis[static_cast<size_t>(n) * 2 * kMelBins + k] =
          static_cast<float>(window * std::cos(angle));
      t->basis[static_cast<size_t>(n) * 2 * kMelBins + kMelBins + k] =
          static_cast<float>(-window * std::sin(angle));
    }
  }
  // librosa.filters.mel(sr=16000, n_fft=400, n_mels=40, fmin=0, fmax=8000, htk=False,
  // norm="slaney"): triangles between mel-spaced edges, each scaled to unit area in Hz.
  double edges[kMelBands + 2];
  const double top = hz_to_mel(kRate / 2.0);
  for (int i = 0; i < kMelBands + 2; ++i) edges[i] = mel_to_hz(top * i / (kMelBands + 1));
  for (int m = 0; m < kMelBands; ++m) {
    const double norm = 2.0 / (edges[m + 2] - edges[m]);
    for (int k = 0; k < kMelBins; ++k) {
      const double hz = static_cast<double>(k) * kRate / kMelFft;
      const double lower = (hz - edges[m]) / (edges[m + 1] - edges[m]);
      const double upper = (edges[m + 2] - hz) / (edges[m + 2] - edges[m + 1]);
      const float w = static_cast<float>(std::max(0.0, std::min(lower, upper)) * norm);
      t->filters[static_cast<size_t>(m) * kMelBins + k] = w;
      t->filters_t[static_cast<size_t>(k) * kMelBands + m] = w;
    }
  }
  return t;
}

}  // namespace

MelSpectrogram::MelSpectrogram() {
  static const std::shared_ptr<const Tables> shared = make_tables();  // thread-safe, once
  tables_ = shared;
}

int64_t MelSpectrogram::frames_for(int64_t samples) {
  return samples < 0 ? 0 : 1 + samples / kMelHop;
}

std::vector<float> MelSpectrogram::compute(const float* audio, int64_t n, float gain) const {
  // One thread per spectrogram: streams' utterances are computed side by side (the stitch
  // threads), and each thread that called sgemm with OpenMP's default would keep a team of every
  // core's size.
  cpu::ScopedOmpThreads one_thread(1);
  const int64_t frames = frames_for(n);
  std::vector<float> mel(static_cast<size_t>(frames) * kMelBands);
  // Scratch for one block of frames, no more than the clip has (a 1.6 s utterance: 161 rows).
  BlockScratch& scratch = block_scratch;
  scratch.reserve(static_cast<size_t>(std::min<int64_t>(kFrameBlock, frames)));
  float* framed = scratch.framed.data();
  float* spectrum = scratch.spectrum.data();
  float* power = scratch.power.data();
  constexpr int64_t kHalf = kMelFft / 2;
  for (int64_t f0 = 0; f0 < frames; f0 += kFrameBlock) {
    const int rows = static_cast<int>(std::min<int64_t>(kFrameBlock, frames - f0));
    for (int r = 0; r < rows; ++r) {
      const int64_t first = (f0 + r) * kMelHop - kHalf;  // frame centred on sample (f0 + r) * 160
      float* row = &framed[static_cast<size_t>(r) * kMelFft];
      for (int i = 0; i < kMelFft; ++i) {
        const int64_t s = first + i;
        row[i] = s >= 0 && s < n ? audio[s] * gain : 0.f;
      }
    }
    gemm(rows, 2 * kMelBins, kMelFft, framed, tables_->basis.data(), spectrum);
    for (int r = 0; r < rows; ++r) {
      const float* re = &spectrum[static_cast<size_t>(r) * 2 * kMelBins];
      const float* im = re + kMelBins;
      float* p = &power[static_cast<size_t>(r) * kMelBins];
      for (int k = 0; k < kMelBins; ++k) p[k] = re[k] * re[k] + im[k] * im[k];
    }
    gemm(rows, kMelBands, kMelBins, power, tables_->filters_t.data(),
         &mel[static_cast<size_t>(f0) * kMelBands]);
  }
  return mel;
}

}  // namespace speakerseg
