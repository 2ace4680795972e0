// One announced change of the current speaker. Positions are stream sample positions (16 kHz),
// counted from the first sample after the last reset; the element turns them into buffer times.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace speakerseg {

struct SpeakerChange {
  int64_t sample = 0;               // where the new turn starts
  std::string speaker;              // new current speaker ("" = nobody)
  std::string previous;             // current speaker before ("" = nobody)
  std::vector<std::string> active;  // everyone active at `sample`
  double confidence = 0;         // mean activity of the new state over the frames that confirmed it
  int64_t announced_sample = 0;  // newest audio when the change became final
};

}  // namespace speakerseg
