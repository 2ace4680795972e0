// TimeLine on the timestamp patterns live sources send: jitter, lost packets, a frozen source
// that sends what it owes at once, a source whose clock restarted, a flush.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "streaming/time_line.h"

namespace speakerseg {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kS = 1'000 * kMs;
constexpr int64_t kChunk = 320;  // 20 ms of 16 kHz audio, as RTP carries it

using Action = Placement::Action;

// What the element does with a placement: the stretch's sample count.
struct Feed {
  TimeLine line;
  int64_t total = 0;
  int64_t skipped = 0;
  int stretches = 0;
  std::vector<std::string> why;

  explicit Feed(TimeLine::Options o = {}) : line(o) {}
  void buffer(int64_t pts, int64_t n = kChunk) {
    if (!line.in_stretch()) begin(pts);
    Placement p = line.place(pts, total, n);
    if (!p.why.empty()) why.push_back(p.why);
    if (p.action == Action::kNewStretch) {
      line.end_stretch();
      begin(pts);
      p = line.place(pts, total, n);
    }
    total += p.silence + n - p.skip;
    skipped += p.skip;
    line.reached(total);
  }
  void begin(int64_t pts) {
    line.begin_stretch(pts);
    total = 0;
    ++stretches;
  }
};

TEST(TimeLine, JitterFollowsTheSamplesNotTheTimestamps) {
  Feed f;
  for (int i = 0; i < 100; i++) f.buffer(10 * kS + i * 20 * kMs + (i % 2 ? 15 : -15) * kMs);
  EXPECT_EQ(f.stretches, 1);
  EXPECT_EQ(f.total, 100 * kChunk);
  EXPECT_EQ(f.skipped, 0);
  EXPECT_EQ(f.line.time_of(16000), 10 * kS - 15 * kMs + kS);
}

TEST(TimeLine, ShortGapsBecomeSilenceLongOnesANewStretchOnTheSameLine) {
  TimeLine t;
  t.begin_stretch(0);
  EXPECT_EQ(t.place(0, 0, kChunk).action, Action::kAppend);
  const Placement gap = t.place(kS + 500 * kMs, 16000, kChunk);
  EXPECT_EQ(gap.action, Action::kAppend);
  EXPECT_EQ(gap.silence, 8000);
  t.reached(24000 + kChunk);
  const Placement jump = t.place(5 * kS, 24000 + kChunk, kChunk);
  EXPECT_EQ(jump.action, Action::kNewStretch);
  EXPECT_NE(jump.why.find("forward"), std::string::npos) << jump.why;
  t.end_stretch();
  t.begin_stretch(5 * kS);
  EXPECT_EQ(t.line(), 0u);
  EXPECT_EQ(t.stamp(5 * kS).new_line, "");
}

TEST(TimeLine, ASingleLateBufferIsAbsorbed) {
  Feed f;
  for (int i = 0; i < 200; i++) f.buffer(i * 20 * kMs - (i == 50 ? 300 * kMs : 0));
  EXPECT_EQ(f.stretches, 1);
  EXPECT_EQ(f.skipped, 0);
  EXPECT_TRUE(f.why.empty());
}

// A source frozen for 13 s sends the 13 s it owes at once, each buffer stamped on arrival: a
// second of it is analysed on the samples' clock, the rest (whose times the line has passed) is
// dropped until the timestamps catch up, and the line never goes back.
TEST(TimeLine, WhatAFrozenSourceOwesIsNotPutBeforeTimeAlreadyAnalysed) {
  Feed f;
  int64_t pts = 0;
  for (int i = 0; i < 700; i++, pts += 20 * kMs) f.buffer(pts);  // 14 s
  pts += 13 * kS;
  for (int i = 0; i < 650; i++) f.buffer(pts + i * 20 * kMs / 100);  // 13 s stamped within 0.13 s
  pts += 130 * kMs;
  for (int i = 0; i < 300; i++, pts += 20 * kMs) f.buffer(pts);  // then at real time
  // The 13 s jump forward began a second stretch, on the same line.
  EXPECT_EQ(f.stretches, 2);
  EXPECT_EQ(f.line.line(), 0u);
  // Of the 13 s owed, the first 1.02 s (the wait) was kept at 27-28.02 s; the other 11.98 s, and
  // the real-time audio of 27.13-28 s, were dropped.
  EXPECT_NEAR(static_cast<double>(f.skipped) / 16000, 11.98 + 0.85, 0.05);
  ASSERT_EQ(f.why.size(), 2u);
  EXPECT_NE(f.why[1].find("dropping"), std::string::npos) << f.why[1];
  // Back in step with upstream once it runs at real time again.
  EXPECT_NEAR(static_cast<double>(f.line.time_of(f.total) - pts) / kS, 0.0, 0.05);
}

TEST(TimeLine, TimestampsThatStayALittleBehindDropWhatTheyRepeat) {
  Feed f;
  for (int i = 0; i < 100; i++) f.buffer(i * 20 * kMs);
  for (int i = 100; i < 300; i++) f.buffer(i * 20 * kMs - 500 * kMs);  // upstream moved 0.5 s back
  EXPECT_EQ(f.stretches, 1);
  EXPECT_NEAR(static_cast<double>(f.skipped) / 16000, 0.5, 0.021);
  EXPECT_NEAR(static_cast<double>(f.line.time_of(f.total)) / kS, 299 * 0.02 - 0.5 + 0.02, 0.021);
}

TEST(TimeLine, AClockThatRestartsBeginsANewLineAndSaysWhy) {
  Feed f;
  for (int i = 0; i < 500; i++) f.buffer(20 * kS + i * 20 * kMs);  // 20..30 s
  EXPECT_EQ(f.line.stamp(25 * kS).line, 0u);
  for (int i = 0; i < 200; i++) f.buffer(i * 20 * kMs);  // from 0 again
  EXPECT_EQ(f.stretches, 2);
  EXPECT_EQ(f.line.line(), 1u);
  // The first second from 0 went on the old stretch (the wait); the new one began at 1 s.
  const TimeLine::Stamp first = f.line.stamp(2 * kS);
  EXPECT_EQ(first.line, 1u);
  EXPECT_NE(first.new_line.find("went back"), std::string::npos) << first.new_line;
  EXPECT_EQ(first.time, 2 * kS);  // earlier than the old line's 25 s: a new line allows it
  EXPECT_EQ(f.line.stamp(3 * kS).new_line, "");
}

TEST(TimeLine, ADiscontinuityBackIsBelievedAtOnce) {
  TimeLine t;
  t.begin_stretch(0);
  t.reached(15 * 16000);
  EXPECT_EQ(t.place(0, 15 * 16000, 30 * 16000).action, Action::kAppend);  // jitter, for now
  const Placement p = t.place(0, 15 * 16000, 30 * 16000, true);
  EXPECT_EQ(p.action, Action::kNewStretch);
  t.end_stretch();
  t.begin_stretch(0);
  EXPECT_EQ(t.line(), 1u);
  EXPECT_NE(t.stamp(0).new_line.find("went back 15.000 s"), std::string::npos);
}

TEST(TimeLine, AnnouncementsOnALineNeverGoBack) {
  TimeLine t;
  t.begin_stretch(0);
  EXPECT_EQ(t.stamp(5 * kS).time, 5 * kS);
  EXPECT_EQ(t.stamp(4 * kS).time, 5 * kS);
  EXPECT_EQ(t.stamp(6 * kS).time, 6 * kS);
}

TEST(TimeLine, AFeedThatResumesBeforeItsLastAudioAfterAStallBeginsANewLine) {
  TimeLine t;
  t.begin_stretch(10 * kS);
  t.reached(16000 * 4);  // to 14 s
  t.stamp(14 * kS);      // the stall's announcement
  t.end_stretch("after a stall");
  t.begin_stretch(14 * kS - 20 * kMs);  // jitter: the same line
  EXPECT_EQ(t.line(), 0u);
  t.end_stretch("after a stall");
  t.begin_stretch(12 * kS);
  EXPECT_EQ(t.line(), 1u);
  const TimeLine::Stamp s = t.stamp(12 * kS);
  EXPECT_NE(s.new_line.find("after a stall"), std::string::npos) << s.new_line;
}

TEST(TimeLine, AFlushBeginsANewLineOnceThereWasOne) {
  TimeLine t;
  t.restart("flushed");
  t.begin_stretch(0);
  EXPECT_EQ(t.line(), 0u);  // nothing came before it
  t.reached(16000);
  t.restart("flushed (a seek)");
  t.begin_stretch(30 * kS);  // forward, and still a new line
  EXPECT_EQ(t.line(), 1u);
  EXPECT_EQ(t.stamp(31 * kS).new_line, "flushed (a seek)");
}

}  // namespace
}  // namespace speakerseg
