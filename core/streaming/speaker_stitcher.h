// Stitches the per-window speaker activities of segmentation-3.0 into stream-wide speakers.
// Local speaker labels are arbitrary per window, so each new window's speakers are mapped onto
// the stream's by the best assignment over the frames the window shares with what is known; an
// active window speaker that matches nobody becomes a new stream speaker ("speaker-0", "speaker-1",
// ... in order of first appearance). Each stream speaker's activity on a frame is the weighted
// mean over every window that covered the frame.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

namespace speakerseg {

// One frame of the stream-wide timeline: mean activity of the stream speakers some window gave
// activity there, as (label number, activity) in label order; everyone else is 0. Sparse because
// a stream collects labels for as long as it runs, while a frame only ever sees a few of them:
// the cost of a window must not grow with the age of the stream.
using SpeakerValues = std::vector<std::pair<int, float>>;  // (label number, value), label order

// The value of `speaker` in `values`, 0 where it is not listed.
inline float value_of(const SpeakerValues& values, int speaker) {
  for (const auto& [g, v] : values)
    if (g == speaker) return v;
  return 0.f;
}

struct FrameActivity {
  int64_t frame = 0;
  SpeakerValues activity;
  float of(int speaker) const { return value_of(activity, speaker); }
};

class SpeakerStitcher {
 public:
  SpeakerStitcher(double match_threshold, double onset);

  // activity [frames][3] of the window whose first sample is at stream position `start_sample`.
  void add_window(int64_t start_sample, const float* activity, int frames);

  // Appends, in order, the frames below `end_frame` not yet returned.
  void finalize_before(int64_t end_frame, std::vector<FrameActivity>& out);
  // Appends the frames from `from` to covered_end() as they stand now, final or not (what the
  // voice decisions read ahead of the final horizon).
  void peek_from(int64_t from, std::vector<FrameActivity>& out) const;
  // One past the last frame any window covered.
  int64_t covered_end() const { return first_frame_ + static_cast<int64_t>(frames_.size()); }

  const std::vector<std::string>& labels() const { return labels_; }
  // Frames of history held (bounded by a window plus what is not yet final).
  size_t held_frames() const { return frames_.size(); }
  void reset();

  // The frame grid: frame k is centred at sample k * 270 + 495 of the stream.
  static int64_t frame_of_window_start(int64_t start_sample);
  static int64_t frame_centre_sample(int64_t frame);

 private:
  struct Frame {
    SpeakerValues sum;  // weighted activity per stream speaker
    float weight = 0;
    float& at(int speaker);  // the entry, made (0) where missing
  };
  std::vector<int> match(int64_t k0, const float* activity, int frames) const;
  FrameActivity frame_activity(int64_t k) const;  // frame k's mean activities

  double match_threshold_, onset_;
  std::vector<std::string> labels_;
  std::deque<Frame> frames_;  // frames [first_frame_, first_frame_ + size)
  int64_t first_frame_ = 0;
  int64_t finalized_end_ = 0;  // frames below it have been returned
  std::vector<float> taper_;   // per-frame weight inside a window
};

}  // namespace speakerseg
