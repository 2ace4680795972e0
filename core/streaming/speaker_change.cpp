#include "streaming/speaker_change.h"

namespace speakerseg {

std::vector<SpeakerChange> apply_revisions(const std::vector<SpeakerChange>& changes) {
  std::vector<SpeakerChange> out;
  for (const SpeakerChange& c : changes) {
    if (!c.revision) {
      out.push_back(c);
      continue;
    }
    for (auto it = out.rbegin(); it != out.rend(); ++it)
      if (it->sample == c.sample && !it->speaker.empty()) {
        it->speaker = c.speaker;
        it->speaker_id = c.speaker_id;
        it->voice_score = c.voice_score;
        break;
      }
  }
  return out;
}

}  // namespace speakerseg
