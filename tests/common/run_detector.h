// Runs a whole recording through a SpeakerChangeDetector as a live source would deliver it.
#pragma once

#include <algorithm>
#include <vector>

#include "streaming/speaker_change_detector.h"

namespace speakerseg::test {

// Feeds `audio` in 20 ms buffers, collecting changes as they come, then ends the stream; returns
// every change in order.
inline std::vector<SpeakerChange> run_detector(SpeakerChangeDetector& d,
                                               const std::vector<float>& audio) {
  std::vector<SpeakerChange> out;
  for (size_t i = 0; i < audio.size(); i += 320) {
    d.push(&audio[i], std::min<size_t>(320, audio.size() - i));
    for (auto& c : d.take_changes()) out.push_back(c);
  }
  d.finish();
  for (auto& c : d.take_changes()) out.push_back(c);
  return out;
}

}  // namespace speakerseg::test
