// What a user tunes in the streaming speaker-change logic; the element's properties map onto it.
#pragma once

namespace speakerseg {

struct StreamSettings {
  double step = 1.0;             // seconds between the ends of successive 10 s windows
  double latency = 2.0;          // seconds of right context a frame waits for before it is final
  double min_speech = 0.3;       // seconds a new current speaker must last to count as a change
  double min_silence = 0.3;      // seconds nobody must speak before "nobody" counts as a change
  double onset = 0.5;            // speaker activity above which a speaker is active
  double match_threshold = 0.2;  // least overlap similarity for a window speaker to keep a label
  // In overlap the current speaker keeps the turn unless another is more active by this much.
  double switch_margin = 1.0;
};

}  // namespace speakerseg
