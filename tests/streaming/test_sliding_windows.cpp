#include "streaming/sliding_windows.h"

#include <gtest/gtest.h>

namespace speakerseg {
namespace {

TEST(SlidingWindows, PyannoteSlidingWithPaddedTail) {
  // 30 s at 1 s steps: 21 full windows end exactly at 30 s, no tail.
  EXPECT_EQ(window_starts(480000, 160000, 16000).size(), 21u);
  // 30 s at 3 s steps: full windows at 0..18 s, then one padded window at 21 s.
  const auto s = window_starts(480000, 160000, 48000);
  ASSERT_EQ(s.size(), 8u);
  EXPECT_EQ(s.back(), 21 * 16000);
  // Shorter than one window: one padded window at 0.
  EXPECT_EQ(window_starts(1000, 160000, 16000), std::vector<int64_t>{0});
  EXPECT_TRUE(window_starts(0, 160000, 16000).empty());
  EXPECT_THROW(window_starts(1000, 160000, 0), std::invalid_argument);
}

TEST(SlidingWindows, ExtractPadsWithZeros) {
  std::vector<float> audio{1, 2, 3, 4, 5};
  float out[4];
  extract_window(audio, 3, 4, out);
  EXPECT_EQ(std::vector<float>(out, out + 4), (std::vector<float>{4, 5, 0, 0}));
  extract_window(audio, 9, 4, out);
  EXPECT_EQ(std::vector<float>(out, out + 4), (std::vector<float>{0, 0, 0, 0}));
}

}  // namespace
}  // namespace speakerseg
