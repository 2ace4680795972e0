#include "model/sinc_filters.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "model/model_spec.h"

namespace speakerseg {

std::vector<float> sinc_filters_from_band_edges(const std::vector<float>& low_hz_,
                                                const std::vector<float>& band_hz_) {
  constexpr int kHalf = kSincFilters / 2;
  constexpr int kSide = (kSincKernel - 1) / 2;  // 125 taps left of the centre
  constexpr double kMinLow = 50.0, kMinBand = 50.0, kNyquist = kSampleRate / 2.0;
  if (low_hz_.size() != kHalf || band_hz_.size() != kHalf)
    throw std::invalid_argument("sinc band edges must hold 40 values each");

  // The reference computes in float32; do the same so that the folded and the computed forms of
  // one model agree to the last bit that matters.
  float n[kSide], window[kSide];
  for (int k = 0; k < kSide; ++k) {
    n[k] = static_cast<float>(2.0 * M_PI * (k - kSide) / kSampleRate);
    // torch.hamming_window(251, periodic=False)[:125]
    window[k] = static_cast<float>(0.54 - 0.46 * std::cos(2.0 * M_PI * k / (kSincKernel - 1)));
  }

  std::vector<float> filters(static_cast<size_t>(kSincFilters) * kSincKernel);
  for (int f = 0; f < kHalf; ++f) {
    const float low = static_cast<float>(kMinLow) + std::fabs(low_hz_[f]);
    const float high = std::clamp(low + static_cast<float>(kMinBand) + std::fabs(band_hz_[f]),
                                  static_cast<float>(kMinLow), static_cast<float>(kNyquist));
    const float band = high - low;
    float* even = &filters[static_cast<size_t>(f) * kSincKernel];
    float* odd = &filters[static_cast<size_t>(f + kHalf) * kSincKernel];
    for (int k = 0; k < kSide; ++k) {
      const float half_n = n[k] / 2.f;
      const float cos_left = (std::sin(high * n[k]) - std::sin(low * n[k])) / half_n * window[k];
      const float sin_left = (std::cos(low * n[k]) - std::cos(high * n[k])) / half_n * window[k];
      even[k] = cos_left / (2.f * band);
      even[kSincKernel - 1 - k] = cos_left / (2.f * band);
      odd[k] = sin_left / (2.f * band);
      odd[kSincKernel - 1 - k] = -sin_left / (2.f * band);
    }
    even[kSide] = 1.f;  // 2 * band / (2 * band)
    odd[kSide] = 0.f;
  }
  return filters;
}

}  // namespace speakerseg
