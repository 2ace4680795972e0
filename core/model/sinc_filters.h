// SincNet band-pass filters from their learnt band edges (asteroid's ParamSincFB with pyannote's
// settings: 16 kHz, 251 taps, min_low_hz = min_band_hz = 50). Some exports keep this computation in
// the graph instead of folding it into a constant Conv weight.
#pragma once

#include <vector>

namespace speakerseg {

// low_hz_ and band_hz_ hold 40 values each; returns [80][251], 40 cosine filters then 40 sine ones.
std::vector<float> sinc_filters_from_band_edges(const std::vector<float>& low_hz_,
                                                const std::vector<float>& band_hz_);

}  // namespace speakerseg
