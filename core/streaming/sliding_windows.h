// Offline windowing, as pyannote.audio slides over a file: full windows at 0, step, 2 step, ...
// and then one zero-padded window for the samples the last full one did not reach.
#pragma once

#include <cstdint>
#include <vector>

namespace speakerseg {

std::vector<int64_t> window_starts(int64_t total_samples, int window_samples, int step_samples);

// Copies window_samples samples starting at `start`, zero-padding past the end of `audio`.
void extract_window(const std::vector<float>& audio, int64_t start, int window_samples, float* out);

}  // namespace speakerseg
