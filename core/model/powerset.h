// segmentation-3.0 answers in powerset classes: {}, {S0}, {S1}, {S2}, {S0,S1}, {S0,S2}, {S1,S2}.
// A speaker's soft activity is the total probability of the classes that contain it.
#pragma once

namespace speakerseg {

// logprobs [frames][7] -> activity [frames][3], each in [0, 1].
void powerset_to_activity(const float* logprobs, int frames, float* activity);

}  // namespace speakerseg
