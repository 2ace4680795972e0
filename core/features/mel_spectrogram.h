// The voice encoder's front end, as Resemblyzer computes it with librosa.feature.melspectrogram
// (sr 16000, n_fft 400, hop 160, 40 mels): frames centred on every 160th sample with zero padding
// beyond the clip, a periodic Hann window of 400, power spectrum, slaney mel scale with slaney
// normalisation over 0-8000 Hz, no log. Host code for every voice engine; no state between calls.
// Its tables (the Hann window, the DFT's two stages, the filters and where they peak) are computed
// once per process and shared: every stream with identity by voice holds a MelSpectrogram.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace speakerseg {

class MelSpectrogram {
 public:
  MelSpectrogram();

  // 1 + samples / 160: the frames of a clip of `samples` samples.
  static int64_t frames_for(int64_t samples);

  // The mel power spectrogram [frames_for(n)][kMelBands] of `audio` (n samples at 16 kHz), each
  // sample scaled by `gain` first (exactly as a scaled copy of the audio would give it).
  std::vector<float> compute(const float* audio, int64_t n, float gain = 1.f) const;

  // The mel filters [kMelBands][kMelBins], as librosa.filters.mel gives them.
  const std::vector<float>& filters() const { return tables_->filters; }
  // The frequency of each filter's highest bin [kMelBands], in Hz: where each band sits.
  const std::vector<double>& peak_hz() const { return tables_->peak_hz; }

  struct Tables {
    std::vector<float> window;      // [kMelFft]: periodic Hann
    std::vector<float> stage1;      // [13 bins: re, im][25]: the DFT's first stage (see the .cpp)
    std::vector<float> twiddle_re;  // [25][16]
    std::vector<float> twiddle_im;  // [25][16]
    std::vector<float> stage2;      // [2 x 16][9 bins: re, im]: its second stage
    std::vector<float> filters;     // [kMelBands][kMelBins]
    std::vector<float> filters_t;   // [kMelBins][kMelBands], for the product
    std::vector<double> peak_hz;    // [kMelBands]
  };

 private:
  std::shared_ptr<const Tables> tables_;
};

}  // namespace speakerseg
