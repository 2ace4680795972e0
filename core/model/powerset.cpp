#include "model/powerset.h"

#include <cmath>

#include "model/model_spec.h"

namespace speakerseg {

void powerset_to_activity(const float* logprobs, int frames, float* activity) {
  for (int f = 0; f < frames; ++f) {
    const float* lp = logprobs + f * kClasses;
    float p[kClasses];
    for (int k = 0; k < kClasses; ++k) p[k] = std::exp(lp[k]);
    float* a = activity + f * kLocalSpeakers;
    a[0] = p[1] + p[4] + p[5];
    a[1] = p[2] + p[4] + p[6];
    a[2] = p[3] + p[5] + p[6];
  }
}

}  // namespace speakerseg
