// Sample format conversion for hosts that receive 16-bit PCM.
#pragma once

#include <cstddef>
#include <cstdint>

namespace speakerseg {

// Scales as libsndfile and torchaudio do: x / 32768.
inline void s16_to_float(const int16_t* in, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]) * (1.0f / 32768.0f);
}

}  // namespace speakerseg
