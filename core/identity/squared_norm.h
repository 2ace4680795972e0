// The squared length of an embedding or voiceprint, summed in double in order: every unit-length
// normalisation in identity goes through it, so that they all round alike.
#pragma once

#include <vector>

namespace speakerseg {

inline double squared_norm(const std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += static_cast<double>(x) * x;
  return sum;
}

}  // namespace speakerseg
