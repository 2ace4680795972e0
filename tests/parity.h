// How every engine is held to ONNX Runtime's log-probabilities (tests/reference/make_reference.py):
// max |difference| <= 1e-3, and no argmax change on a frame whose two best reference classes are
// more than 1e-3 apart (a change at a near-tie is counted apart and allowed).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "model_spec.h"

namespace speakerseg::test {

constexpr double kParityTolerance = 1e-3;
constexpr double kTieGap = 1e-3;

struct Comparison {
  double max_diff = 0;
  int flips = 0, ties_flipped = 0;
  bool finite = true;
};

// `out` and `ref`: [frames][kClasses] log-probabilities, any number of windows.
inline Comparison compare(const std::vector<float>& out, const std::vector<float>& ref) {
  Comparison c;
  for (size_t f = 0; f < out.size() / kClasses; ++f) {
    const float* ours = &out[f * kClasses];
    const float* want = &ref[f * kClasses];
    for (int k = 0; k < kClasses; ++k) {
      c.finite = c.finite && std::isfinite(ours[k]);
      c.max_diff = std::max(c.max_diff, std::fabs(double(ours[k]) - want[k]));
    }
    const int ours_top = std::max_element(ours, ours + kClasses) - ours;
    const int ref_top = std::max_element(want, want + kClasses) - want;
    if (ours_top == ref_top) continue;
    float second = -INFINITY;
    for (int k = 0; k < kClasses; ++k)
      if (k != ref_top) second = std::max(second, want[k]);
    if (want[ref_top] - second > kTieGap)
      ++c.flips;
    else
      ++c.ties_flipped;
  }
  return c;
}

}  // namespace speakerseg::test
