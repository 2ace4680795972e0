#include "features/mel_spectrogram.h"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "engines/cpu/omp_threads.h"
#include "model/voice_model.h"

namespace speakerseg {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr int kRate = 16000;
constexpr int kFrameBlock = 256;  // frames per product: bounds the scratch to ~2 MB

// The DFT of 400 = 16 x 25 points in two stages of products (Cooley-Tukey): sample n = n1 + 16 n2,
// bin k = k2 + 25 k1. Stage 1 takes the 25-point DFT over n2 for every n1; the input being real,
// bins k2 and 25 - k2 are conjugates, so 13 are computed. A twiddle W400^(n1 k2) joins the stages,
// and stage 2's 16-point DFT over n1 is taken for k1 <= 8 only (k <= 200 is all the power
// spectrum needs): 26 000 multiply-adds a frame where the DFT as one product took 160 800. Each
// frame's 16 samples n1 of every n2 are contiguous, and the block is laid out so that every step
// between the products runs over them.
constexpr int kN1 = 16, kN2 = 25;
constexpr int kStage1Bins = kN2 / 2 + 1;               // k2 = 0..12
constexpr int kStage2Bins = (kMelBins - 1) / kN2 + 1;  // k1 = 0..8
static_assert(kN1 * kN2 == kMelFft, "the two stages factor the mel's DFT");

// One block's scratch (2.3 MB at most), kept by each thread that computes spectrograms: fresh for
// every utterance, it was a fifth of the page faults of a many-channel run with identity, whose
// stitch threads each compute many a second.
struct BlockScratch {
  std::vector<float> framed;    // [n2][frame][n1]
  std::vector<float> stage1;    // [k2: re, im][frame][n1]
  std::vector<float> twiddled;  // [frame][k2][re of n1 ..., im of n1 ...]
  std::vector<float> stage2;    // [frame][k2][k1: re, im]
  std::vector<float> power;     // [frame][kMelBins]

  void reserve(size_t rows) {
    const auto grow = [](std::vector<float>& v, size_t n) {
      if (v.size() < n) v.resize(n);
    };
    grow(framed, rows * kMelFft);
    grow(stage1, rows * 2 * kStage1Bins * kN1);
    grow(twiddled, rows * kN2 * 2 * kN1);
    grow(stage2, rows * kN2 * 2 * kStage2Bins);
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
  t->window.resize(kMelFft);
  t->stage1.resize(static_cast<size_t>(2 * kStage1Bins) * kN2);
  t->twiddle_re.resize(static_cast<size_t>(kN2) * kN1);
  t->twiddle_im.resize(t->twiddle_re.size());
  t->stage2.resize(static_cast<size_t>(2 * kN1) * 2 * kStage2Bins);
  t->filters.resize(static_cast<size_t>(kMelBands) * kMelBins);
  t->filters_t.resize(t->filters.size());
  // e^(-2 pi i a / n), the angle reduced mod n first so that it stays small and exact.
  const auto unit_root = [](int64_t a, int n) {
    const double angle = 2 * kPi * static_cast<double>(a % n) / n;
    return std::pair<double, double>{std::cos(angle), -std::sin(angle)};
  };
  for (int n = 0; n < kMelFft; ++n)
    t->window[n] = static_cast<float>(0.5 - 0.5 * std::cos(2 * kPi * n / kMelFft));  // periodic
  for (int k2 = 0; k2 < kStage1Bins; ++k2)
    for (int n2 = 0; n2 < kN2; ++n2) {
      const auto [re, im] = unit_root(static_cast<int64_t>(n2) * k2, kN2);
      t->stage1[static_cast<size_t>(2 * k2) * kN2 + n2] = static_cast<float>(re);
      t->stage1[static_cast<size_t>(2 * k2 + 1) * kN2 + n2] = static_cast<float>(im);
    }
  for (int k2 = 0; k2 < kN2; ++k2)
    for (int n1 = 0; n1 < kN1; ++n1) {
      const auto [re, im] = unit_root(static_cast<int64_t>(n1) * k2, kMelFft);
      t->twiddle_re[static_cast<size_t>(k2) * kN1 + n1] = static_cast<float>(re);
      t->twiddle_im[static_cast<size_t>(k2) * kN1 + n1] = static_cast<float>(im);
    }
  // Stage 2 multiplies (a + ib) by (c + id): rows n1 hold a's weights, rows 16 + n1 b's.
  for (int n1 = 0; n1 < kN1; ++n1)
    for (int k1 = 0; k1 < kStage2Bins; ++k1) {
      const auto [c, d] = unit_root(static_cast<int64_t>(n1) * k1, kN1);
      float* a = &t->stage2[static_cast<size_t>(n1) * 2 * kStage2Bins + 2 * k1];
      float* b = &t->stage2[static_cast<size_t>(kN1 + n1) * 2 * kStage2Bins + 2 * k1];
      a[0] = static_cast<float>(c);
      a[1] = static_cast<float>(d);
      b[0] = static_cast<float>(-d);
      b[1] = static_cast<float>(c);
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
    const float* f = &t->filters[static_cast<size_t>(m) * kMelBins];
    t->peak_hz.push_back(static_cast<double>(std::max_element(f, f + kMelBins) - f) * kRate /
                         kMelFft);
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
  const Tables& t = *tables_;
  constexpr int64_t kHalf = kMelFft / 2;
  for (int64_t f0 = 0; f0 < frames; f0 += kFrameBlock) {
    const int rows = static_cast<int>(std::min<int64_t>(kFrameBlock, frames - f0));
    const auto frame_runs = static_cast<size_t>(rows) * kN1;  // one n2's run of every frame
    for (int r = 0; r < rows; ++r) {
      const int64_t first = (f0 + r) * kMelHop - kHalf;  // frame centred on sample (f0 + r) * 160
      for (int n2 = 0; n2 < kN2; ++n2) {
        float* to = &scratch.framed[n2 * frame_runs + static_cast<size_t>(r) * kN1];
        const float* w = &t.window[n2 * kN1];
        const int64_t at = first + n2 * kN1;
        if (at >= 0 && at + kN1 <= n) {
          for (int n1 = 0; n1 < kN1; ++n1) to[n1] = audio[at + n1] * gain * w[n1];
        } else {
          for (int n1 = 0; n1 < kN1; ++n1) {
            const int64_t s = at + n1;
            to[n1] = s >= 0 && s < n ? audio[s] * gain * w[n1] : 0.f;
          }
        }
      }
    }
    gemm(2 * kStage1Bins, static_cast<int>(frame_runs), kN2, t.stage1.data(), scratch.framed.data(),
         scratch.stage1.data());
    for (int r = 0; r < rows; ++r)
      for (int k2 = 0; k2 < kN2; ++k2) {
        // Bins past 12 are the conjugates of 25 - k2's.
        const int from = k2 < kStage1Bins ? k2 : kN2 - k2;
        const float sign = k2 < kStage1Bins ? 1.f : -1.f;
        const float* a = &scratch.stage1[2 * from * frame_runs + static_cast<size_t>(r) * kN1];
        const float* b = a + frame_runs;
        const float* c = &t.twiddle_re[static_cast<size_t>(k2) * kN1];
        const float* d = &t.twiddle_im[static_cast<size_t>(k2) * kN1];
        float* re = &scratch.twiddled[(static_cast<size_t>(r) * kN2 + k2) * 2 * kN1];
        float* im = re + kN1;
        for (int n1 = 0; n1 < kN1; ++n1) {
          re[n1] = a[n1] * c[n1] - sign * b[n1] * d[n1];
          im[n1] = a[n1] * d[n1] + sign * b[n1] * c[n1];
        }
      }
    gemm(rows * kN2, 2 * kStage2Bins, 2 * kN1, scratch.twiddled.data(), t.stage2.data(),
         scratch.stage2.data());
    for (int r = 0; r < rows; ++r) {
      float* p = &scratch.power[static_cast<size_t>(r) * kMelBins];
      for (int k2 = 0; k2 < kN2; ++k2) {
        const float* x = &scratch.stage2[(static_cast<size_t>(r) * kN2 + k2) * 2 * kStage2Bins];
        for (int k1 = 0; k1 < kStage2Bins && k2 + kN2 * k1 < kMelBins; ++k1)
          p[k2 + kN2 * k1] = x[2 * k1] * x[2 * k1] + x[2 * k1 + 1] * x[2 * k1 + 1];
      }
    }
    gemm(rows, kMelBands, kMelBins, scratch.power.data(), t.filters_t.data(),
         &mel[static_cast<size_t>(f0) * kMelBands]);
  }
  return mel;
}

}  // namespace speakerseg
