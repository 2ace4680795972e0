// The streaming pieces on their own: windows, stitching, turn decisions, the worker thread.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "model/model_spec.h"
#include "model/powerset.h"
#include "scheduling/async_segmenter.h"
#include "streaming/speaker_change.h"
#include "streaming/speaker_stitcher.h"
#include "streaming/stall_watch.h"
#include "streaming/stream_settings.h"
#include "streaming/turn_tracker.h"
#include "streaming/window_buffer.h"

namespace speakerseg {
namespace {

TEST(WindowBuffer, WindowsEndEveryStepAndStartZeroPadded) {
  WindowBuffer wb(10, 4);
  std::vector<std::pair<int64_t, std::vector<float>>> got;
  auto collect = [&](WindowJob&& w) {
    EXPECT_EQ(w.end, w.start + 10);
    got.emplace_back(w.start, std::vector<float>(w.samples.begin(), w.samples.end()));
  };
  std::vector<float> x(13);
  std::iota(x.begin(), x.end(), 1.f);  // samples 1..13 at positions 0..12
  wb.push(x.data(), 3, collect);
  EXPECT_TRUE(got.empty());
  wb.push(x.data() + 3, 10, collect);  // one push crossing three boundaries loses none
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].first, -6);
  EXPECT_EQ(got[0].second, (std::vector<float>{0, 0, 0, 0, 0, 0, 1, 2, 3, 4}));
  EXPECT_EQ(got[2].first, 2);
  EXPECT_EQ(got[2].second, (std::vector<float>{3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
  EXPECT_TRUE(wb.has_tail());
  wb.flush_tail(collect);  // the final window ends at the newest sample
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[3].first, 3);
  EXPECT_EQ(got[3].second.back(), 13.f);
  EXPECT_FALSE(wb.has_tail());
  wb.push(nullptr, 4, collect);  // silence
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[4].second.back(), 0.f);
  wb.reset();
  EXPECT_EQ(wb.total(), 0);
}

// Pushes of every size (shorter than a step, across several boundaries, longer than a window,
// silence) against the windows cut straight from the whole stream. The windows are kept as the
// buffer gave them, views of its blocks, while it goes on through many blocks: what each shows
// must not change.
TEST(WindowBuffer, AnyPushSizesGiveTheWindowsOfTheWholeStream) {
  const int window = 37, step = 5, first_end = 3;
  WindowBuffer wb(window, step, first_end);
  std::vector<float> stream;
  std::vector<std::pair<int64_t, WindowSamples>> got;
  auto collect = [&](WindowJob&& w) {
    ASSERT_EQ(w.samples.size(), static_cast<size_t>(window));
    got.emplace_back(w.start, std::move(w.samples));
  };
  uint32_t seed = 12345;
  auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
  for (int push = 0; push < 200; ++push) {
    const size_t n = next() % 90;  // up to more than two windows
    const bool silence = next() % 7 == 0;
    std::vector<float> x(n);
    for (float& v : x) v = silence ? 0.f : static_cast<float>(stream.size() + (&v - x.data()) + 1);
    wb.push(silence ? nullptr : x.data(), n, collect);
    stream.insert(stream.end(), x.begin(), x.end());
  }
  ASSERT_EQ(wb.total(), static_cast<int64_t>(stream.size()));
  ASSERT_EQ(got.size(), (stream.size() - first_end) / step + 1);
  for (size_t w = 0; w < got.size(); ++w) {
    const int64_t end = first_end + static_cast<int64_t>(w) * step;
    ASSERT_EQ(got[w].first, end - window);
    for (int i = 0; i < window; ++i) {
      const int64_t pos = end - window + i;
      ASSERT_EQ(got[w].second[static_cast<size_t>(i)],
                pos < 0 ? 0.f : stream[static_cast<size_t>(pos)])
          << "window " << w << " sample " << i;
    }
  }
}

// Windows share the buffer's blocks: released in time, two blocks serve any length of stream
// (one filled, one taken back), and a sample is copied about three times, not once per window
// showing it. A window kept across reset() keeps its samples.
TEST(WindowBuffer, BlocksAreRecycledOnceTheirWindowsAreGone) {
  const int window = 100, step = 10;
  WindowBuffer wb(window, step);
  const uint64_t allocated = wb.blocks_allocated();  // by other buffers of the process
  std::vector<float> x(static_cast<size_t>(step));
  int windows = 0;
  for (int push = 0; push < 500; ++push) {
    std::iota(x.begin(), x.end(), static_cast<float>(push * step));
    wb.push(x.data(), x.size(), [&](WindowJob&& w) {
      ++windows;
      const int64_t first = std::max<int64_t>(w.start, 0);
      ASSERT_EQ(w.samples[static_cast<size_t>(first - w.start)], static_cast<float>(first));
      ASSERT_EQ(w.samples.back(), static_cast<float>(w.end - 1));
    });
  }
  EXPECT_EQ(windows, 500);
  EXPECT_LE(wb.blocks_allocated() - allocated, 2u);

  WindowSamples kept;
  wb.push(x.data(), x.size(), [&](WindowJob&& w) { kept = std::move(w.samples); });
  const std::vector<float> before(kept.begin(), kept.end());
  wb.reset();
  for (int push = 0; push < 50; ++push) wb.push(nullptr, x.size(), [](WindowJob&&) {});
  EXPECT_EQ(std::vector<float>(kept.begin(), kept.end()), before);
  EXPECT_EQ(before.back(), x.back());
}

TEST(WindowBuffer, FirstEndSetsThePhaseOfEveryWindow) {
  WindowBuffer wb(10, 4, 1);
  std::vector<int64_t> ends;
  auto collect = [&](WindowJob&& w) { ends.push_back(w.end); };
  EXPECT_FALSE(wb.has_tail());
  wb.push(nullptr, 10, collect);
  EXPECT_EQ(ends, (std::vector<int64_t>{1, 5, 9}));
  EXPECT_TRUE(wb.has_tail());
  wb.reset();  // keeps the phase
  ends.clear();
  wb.push(nullptr, 6, collect);
  EXPECT_EQ(ends, (std::vector<int64_t>{1, 5}));
  wb.reset(3);  // a new phase, as the element gives a live stream on its first buffer
  ends.clear();
  wb.push(nullptr, 8, collect);
  EXPECT_EQ(ends, (std::vector<int64_t>{3, 7}));
  EXPECT_THROW(wb.reset(5), std::invalid_argument);
  EXPECT_THROW(WindowBuffer(10, 4, 5), std::invalid_argument);
  EXPECT_THROW(WindowBuffer(10, 4, -1), std::invalid_argument);
}

TEST(WindowBuffer, StaggeredPhasesSpreadStreamsOverAStep) {
  const int step = 16000;
  EXPECT_EQ(staggered_first_end(step, 0), step);
  // Any number of streams started together: their windows come due spread over the step, never
  // more than about twice as many in one tenth of it as an even spread would put there.
  for (int n : {2, 10, 64, 1000}) {
    std::vector<int> per_tenth(10, 0);
    for (int i = 0; i < n; ++i) {
      const int e = staggered_first_end(step, static_cast<uint64_t>(i));
      ASSERT_GE(e, 1);
      ASSERT_LE(e, step);
      ++per_tenth[(e - 1) * 10 / step];
    }
    for (int c : per_tenth) EXPECT_LE(c, std::max(1, 2 * n / 10 + 1)) << n << " streams";
  }
}

TEST(Powerset, ActivitySumsTheClassesHoldingEachSpeaker) {
  float lp[7];
  const float p[7] = {0.1f, 0.2f, 0.05f, 0.05f, 0.3f, 0.2f, 0.1f};
  for (int k = 0; k < 7; ++k) lp[k] = std::log(p[k]);
  float a[3];
  powerset_to_activity(lp, 1, a);
  EXPECT_NEAR(a[0], 0.2 + 0.3 + 0.2, 1e-6);
  EXPECT_NEAR(a[1], 0.05 + 0.3 + 0.1, 1e-6);
  EXPECT_NEAR(a[2], 0.05 + 0.2 + 0.1, 1e-6);
}

// Activity [frames][3] of a window from per-stream-speaker activity, with the window's own label
// order: local speaker j shows stream speaker perm[j] (-1: silent).
std::vector<float> window_activity(const std::vector<std::vector<float>>& truth, int64_t k0,
                                   int frames, const int perm[3]) {
  std::vector<float> a(static_cast<size_t>(frames) * 3, 0.f);
  for (int i = 0; i < frames; ++i)
    for (int j = 0; j < 3; ++j) {
      const int64_t k = k0 + i;
      if (perm[j] >= 0 && k >= 0 && k < static_cast<int64_t>(truth[perm[j]].size()))
        a[static_cast<size_t>(i) * 3 + j] = truth[perm[j]][static_cast<size_t>(k)];
    }
  return a;
}

TEST(SpeakerStitcher, KeepsStreamLabelsWhenWindowLabelsPermute) {
  // Two speakers alternating every 3 s over 60 s; windows of 589 frames every 1 s whose local
  // labels are shuffled from window to window.
  const int total = 3600, frames = 589;
  std::vector<std::vector<float>> truth(2, std::vector<float>(total, 0.f));
  for (int k = 0; k < total; ++k) truth[(k / 178) % 2][k] = 1.f;
  const int perms[3][3] = {{0, 1, -1}, {1, -1, 0}, {-1, 0, 1}};
  SpeakerStitcher st(0.2, 0.5);
  std::vector<FrameActivity> out;
  for (int w = 0; w < 60; ++w) {
    const int64_t end = static_cast<int64_t>(w + 1) * 16000;
    const int64_t start = end - kWindowSamples;
    const int64_t k0 = SpeakerStitcher::frame_of_window_start(start);
    auto a = window_activity(truth, k0, frames, perms[w % 3]);
    st.add_window(start, a.data(), frames);
    st.finalize_before(k0 + 400, out);
  }
  EXPECT_EQ(st.labels(), (std::vector<std::string>{"speaker-0", "speaker-1"}));
  ASSERT_GT(out.size(), 2000u);
  int wrong = 0;
  for (const auto& f : out) {
    if (f.frame >= total) continue;
    const int want = (f.frame / 178) % 2;
    const float mine = f.of(want);
    if (mine < 0.5f) ++wrong;
  }
  EXPECT_EQ(wrong, 0);
}

TEST(SpeakerStitcher, HistoryStaysBoundedOnLongStreams) {
  SpeakerStitcher st(0.2, 0.5);
  std::vector<float> a(589 * 3, 0.f);
  for (int i = 0; i < 589; ++i) a[i * 3] = 1.f;
  std::vector<FrameActivity> out;
  for (int w = 0; w < 3600; ++w) {  // an hour at 1 s steps
    const int64_t start = static_cast<int64_t>(w + 1) * 16000 - kWindowSamples;
    st.add_window(start, a.data(), 589);
    st.finalize_before(SpeakerStitcher::frame_of_window_start(start) + 470, out);
    out.clear();
  }
  EXPECT_LE(st.held_frames(), 589u + 60u);
  EXPECT_EQ(st.labels().size(), 1u);
}

// Every window brings a new speaker (active only on frames no earlier window covered), so labels
// pile up; each frame must still carry only the few speakers that were active on it, which keeps
// the cost of a window independent of how long the stream has run.
TEST(SpeakerStitcher, FramesCarryOnlyTheirOwnSpeakersHoweverManyLabelsPileUp) {
  SpeakerStitcher st(0.2, 0.5);
  std::vector<FrameActivity> out;
  size_t widest = 0;
  for (int w = 0; w < 400; ++w) {
    std::vector<float> a(589 * 3, 0.f);
    for (int i = 589 - 40; i < 589; ++i) a[i * 3 + w % 3] = 1.f;
    const int64_t start = static_cast<int64_t>(w + 1) * 16000 - kWindowSamples;
    st.add_window(start, a.data(), 589);
    st.finalize_before(SpeakerStitcher::frame_of_window_start(start) + 470, out);
    for (const auto& f : out) widest = std::max(widest, f.activity.size());
    out.clear();
  }
  EXPECT_GT(st.labels().size(), 100u);
  EXPECT_LE(widest, 4u);
}

FrameActivity frame(int64_t k, const std::vector<float>& a) {
  FrameActivity f{k, {}};
  for (size_t g = 0; g < a.size(); ++g) f.activity.emplace_back(static_cast<int>(g), a[g]);
  return f;
}

// A TurnTracker fed runs of frames of one activity each, numbered from 0.
struct TrackerFeed {
  explicit TrackerFeed(const StreamSettings& s,
                       std::vector<std::string> names = {"speaker-0", "speaker-1"})
      : tracker(s), labels(std::move(names)) {}
  void run(int n, const std::vector<float>& a) {
    for (int i = 0; i < n; ++i, ++k) tracker.push(frame(k, a), labels, k * 270, out);
  }
  TurnTracker tracker;
  std::vector<std::string> labels;
  std::vector<SpeakerChange> out;
  int64_t k = 0;
};

TEST(TurnTracker, SmoothsShortPausesAndKeepsTheTurnThroughOverlap) {
  StreamSettings s;
  s.min_speech = 0.2;   // 12 frames
  s.min_silence = 0.5;  // 30 frames
  TrackerFeed f(s);
  f.run(50, {0.f, 0.f});  // silence: nobody -> nobody is no change
  f.run(5, {0.9f, 0.f});  // too short to count
  f.run(10, {0.f, 0.f});
  f.run(100, {0.9f, 0.f});  // speaker-0 takes the turn
  ASSERT_EQ(f.out.size(), 1u);
  EXPECT_EQ(f.out[0].speaker, "speaker-0");
  EXPECT_EQ(f.out[0].previous, "");
  EXPECT_EQ(f.out[0].sample, SpeakerStitcher::frame_centre_sample(65));
  f.run(20, {0.f, 0.f});    // a pause shorter than min-silence: no change
  f.run(50, {0.9f, 0.8f});  // overlap: speaker-0 keeps the turn
  EXPECT_EQ(f.out.size(), 1u);
  f.run(50, {0.1f, 0.9f});  // speaker-0 stops: speaker-1 takes over, dated where it began
  ASSERT_EQ(f.out.size(), 2u);
  EXPECT_EQ(f.out[1].speaker, "speaker-1");
  EXPECT_EQ(f.out[1].previous, "speaker-0");
  EXPECT_EQ(f.out[1].sample, SpeakerStitcher::frame_centre_sample(235));
  EXPECT_EQ(f.out[1].active, (std::vector<std::string>{"speaker-1"}));
  EXPECT_NEAR(f.out[1].confidence, 0.9, 1e-6);
  f.run(40, {0.f, 0.f});  // a long pause: change to nobody
  ASSERT_EQ(f.out.size(), 3u);
  EXPECT_EQ(f.out[2].speaker, "");
  EXPECT_EQ(f.out[2].sample, SpeakerStitcher::frame_centre_sample(285));
}

// Broadcast speech pauses for breath inside a turn (0.3-0.6 s) and leaves similar gaps between
// people: a silence shorter than min-silence stays inside the turn when the same speaker goes on,
// and is nobody's when somebody else speaks next.
TEST(TurnTracker, APauseIsPartOfTheTurnUnlessSomebodyElseSpeaksAfterIt) {
  StreamSettings s;
  s.min_speech = 0.2;   // 12 frames
  s.min_silence = 1.0;  // 59 frames
  s.min_gap = 0.3;      // 18 frames
  TrackerFeed f(s);
  f.run(100, {0.9f, 0.f});  // frames 0-99: speaker-0
  f.run(40, {0.f, 0.f});    // a 0.68 s pause ...
  f.run(100, {0.9f, 0.f});  // ... and speaker-0 goes on: no change
  ASSERT_EQ(f.out.size(), 1u);
  f.run(30, {0.f, 0.f});    // frames 240-269: a 0.5 s silence ...
  f.run(100, {0.f, 0.9f});  // ... and speaker-1 speaks: nobody from 240, speaker-1 from 270
  ASSERT_EQ(f.out.size(), 3u);
  EXPECT_EQ(f.out[1].speaker, "");
  EXPECT_EQ(f.out[1].previous, "speaker-0");
  EXPECT_EQ(f.out[1].sample, SpeakerStitcher::frame_centre_sample(240));
  EXPECT_EQ(f.out[1].speaker_id, -1);
  EXPECT_NEAR(f.out[1].confidence, 1.0, 1e-6);
  EXPECT_EQ(f.out[1].announced_sample, f.out[2].announced_sample);
  EXPECT_EQ(f.out[2].speaker, "speaker-1");
  EXPECT_EQ(f.out[2].previous, "");
  EXPECT_EQ(f.out[2].sample, SpeakerStitcher::frame_centre_sample(270));
  f.run(10, {0.f, 0.f});    // frames 370-379: shorter than min-gap ...
  f.run(100, {0.9f, 0.f});  // ... so speaker-0 follows speaker-1 directly
  ASSERT_EQ(f.out.size(), 4u);
  EXPECT_EQ(f.out[3].speaker, "speaker-0");
  EXPECT_EQ(f.out[3].previous, "speaker-1");
  EXPECT_EQ(f.out[3].sample, SpeakerStitcher::frame_centre_sample(380));
  f.run(60, {0.f, 0.f});  // a silence of min-silence: nobody, as always
  ASSERT_EQ(f.out.size(), 5u);
  EXPECT_EQ(f.out[4].speaker, "");
  EXPECT_EQ(f.out[4].sample, SpeakerStitcher::frame_centre_sample(480));
}

TEST(TurnTracker, StallEndsTheTurnWithNobodyMarkedStalled) {
  StreamSettings s;
  TurnTracker t(s);
  const std::vector<std::string> labels{"speaker-0", "speaker-1"};
  std::vector<SpeakerChange> out;
  for (int64_t k = 0; k < 100; ++k) t.push(frame(k, {0.9f, 0.f}), labels, k * 270, out);
  for (int64_t k = 100; k < 105; ++k) t.push(frame(k, {0.f, 0.9f}), labels, k * 270, out);
  ASSERT_EQ(out.size(), 1u);  // speaker-1 is still pending: too short to count
  t.stall(30000, labels, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[1].stalled);
  EXPECT_EQ(out[1].speaker, "");
  EXPECT_EQ(out[1].previous, "speaker-0");
  EXPECT_EQ(out[1].sample, 30000);
  EXPECT_EQ(out[1].announced_sample, 30000);
  EXPECT_EQ(out[1].confidence, 1.0);
  EXPECT_TRUE(out[1].active.empty());
  EXPECT_FALSE(out[0].stalled);
  // From nobody too: the stall is the only notice a host gets.
  t.stall(40000, labels, out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[2].previous, "");
  EXPECT_TRUE(out[2].stalled);
  // Afterwards the tracker starts from nobody, as after a reset.
  for (int64_t k = 200; k < 250; ++k) t.push(frame(k, {0.f, 0.9f}), labels, k * 270, out);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[3].previous, "");
  EXPECT_EQ(out[3].speaker, "speaker-1");
}

// Identity by voice found later that speaker-1 was speaker-2: the changes announced to speaker-1
// since then are revised (same times, new name), the current turn goes on under speaker-2 without
// a change, and apply_revisions() renames them in a timeline.
TEST(TurnTracker, RevisionsRenameAnnouncedChangesAndTheCurrentTurn) {
  StreamSettings s;
  TrackerFeed f(s, {"speaker-0", "speaker-1", "speaker-2"});
  f.run(100, {0.f, 0.9f, 0.f});  // speaker-1 (an earlier turn: not revised below)
  f.run(100, {0.9f, 0.f, 0.f});  // speaker-0
  f.run(100, {0.f, 0.9f, 0.f});  // speaker-1 again: the turn that was speaker-2's
  ASSERT_EQ(f.out.size(), 3u);
  const int64_t since = f.out[2].sample;
  f.tracker.revise(1, 2, since, f.labels, f.k * 270, f.out);
  ASSERT_EQ(f.out.size(), 4u);
  EXPECT_TRUE(f.out[3].revision);
  EXPECT_EQ(f.out[3].sample, since);
  EXPECT_EQ(f.out[3].speaker, "speaker-2");
  EXPECT_EQ(f.out[3].was, "speaker-1");
  EXPECT_EQ(f.out[3].speaker_id, 2);
  EXPECT_EQ(f.out[3].announced_sample, f.k * 270);
  // The frames go on as speaker-2's: no change.
  f.run(50, {0.f, 0.f, 0.9f});
  EXPECT_EQ(f.out.size(), 4u);
  const auto timeline = apply_revisions(f.out);
  ASSERT_EQ(timeline.size(), 3u);
  EXPECT_EQ(timeline[0].speaker, "speaker-1");
  EXPECT_EQ(timeline[1].speaker, "speaker-0");
  EXPECT_EQ(timeline[2].speaker, "speaker-2");
  EXPECT_EQ(timeline[2].sample, since);
}

// The stitcher carried speaker-0's label onto somebody else across a pause shorter than
// min-silence, so no change was announced there; when the voice shows it, the change is announced
// then, dated where the other voice began.
TEST(TurnTracker, ARevisionInsideOneTurnAnnouncesTheChangeThatWasMissed) {
  StreamSettings s;
  TurnTracker t(s);
  const std::vector<std::string> labels{"speaker-0", "speaker-1"};
  std::vector<SpeakerChange> out;
  int64_t k = 0;
  for (; k < 200; ++k) t.push(frame(k, {0.9f, 0.f}), labels, k * 270, out);
  ASSERT_EQ(out.size(), 1u);
  const int64_t since = SpeakerStitcher::frame_centre_sample(120);
  t.revise(0, 1, since, labels, k * 270, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_FALSE(out[1].revision);
  EXPECT_EQ(out[1].sample, since);
  EXPECT_EQ(out[1].speaker, "speaker-1");
  EXPECT_EQ(out[1].previous, "speaker-0");
  EXPECT_EQ(out[0].speaker, "speaker-0");  // the first turn stays speaker-0's
  for (; k < 250; ++k) t.push(frame(k, {0.f, 0.9f}), labels, k * 270, out);
  EXPECT_EQ(out.size(), 2u);
}

TEST(StallWatch, StallsOnceWaitPastTheNewestAudioAndResumesWithAudio) {
  const int64_t s = 1000000000;
  EXPECT_EQ(stall_wait(2.0, 1.0, s / 10), 3 * s + s / 10);
  EXPECT_EQ(stall_wait(2.0, 0.0, -1), 2 * s);  // no upstream latency known
  EXPECT_EQ(stall_wait(2.0, -1.0, s), -1);     // off
  EXPECT_NO_THROW(check_range(kStallMarginRange, kDefaultStallMargin));
  EXPECT_THROW(check_range(kStallMarginRange, -2), std::invalid_argument);

  StallWatch w(3 * s);
  EXPECT_EQ(w.deadline(), StallWatch::kNever);  // no audio yet: nothing to miss
  EXPECT_FALSE(w.stall(100 * s));
  // On time: each second arrives when it ends.
  EXPECT_FALSE(w.audio(1 * s, 1 * s));
  EXPECT_FALSE(w.audio(2 * s, 2 * s));
  EXPECT_EQ(w.deadline(), 5 * s);
  EXPECT_FALSE(w.stall(5 * s - 1));
  EXPECT_EQ(w.silent_for(5 * s - 1), 3 * s - 1);
  EXPECT_TRUE(w.stall(5 * s));
  EXPECT_TRUE(w.stalled());
  EXPECT_EQ(w.deadline(), StallWatch::kNever);
  EXPECT_FALSE(w.stall(9 * s));  // declared once
  EXPECT_EQ(w.silent_for(9 * s), 7 * s);
  EXPECT_TRUE(w.audio(10 * s, 10 * s));  // the feed is back
  EXPECT_FALSE(w.stalled());
  EXPECT_EQ(w.deadline(), 13 * s);
  // A burst ahead of its time: the end counts, not the arrival, and the newest end, not the
  // furthest (after a jump back in time the stream goes on from there).
  EXPECT_FALSE(w.audio(20 * s, 11 * s));
  EXPECT_EQ(w.deadline(), 23 * s);
  EXPECT_FALSE(w.audio(12 * s, 11 * s));
  EXPECT_EQ(w.deadline(), 15 * s);
  EXPECT_FALSE(w.audio(13 * s, StallWatch::kUnread));  // no clock reading: the last one stands
  EXPECT_EQ(w.deadline(), 16 * s);
  w.reset();  // EOS, flush: nothing is expected
  EXPECT_EQ(w.deadline(), StallWatch::kNever);
  EXPECT_FALSE(w.stall(100 * s));
  EXPECT_EQ(w.silent_for(100 * s), 0);
  EXPECT_FALSE(w.audio(1 * s, StallWatch::kUnread));  // the arrival before the reset is gone
  EXPECT_EQ(w.deadline(), 4 * s);

  StallWatch off;  // stall-margin -1
  off.audio(s, s);
  EXPECT_EQ(off.deadline(), StallWatch::kNever);
  EXPECT_FALSE(off.stall(std::numeric_limits<int64_t>::max()));
}

// Time stamps that lag the clock by minutes (an app stamping from 0 after the pipeline has played
// for five minutes): judged by them alone, every buffer would be overdue on arrival. The feed
// stalls only once nothing has arrived for the wait.
TEST(StallWatch, TimeStampsThatLagTheClockStallOnlyWhenNothingArrives) {
  const int64_t s = 1000000000, ms = s / 1000, lag = 300 * s;
  StallWatch w(3 * s);
  int64_t end = 0, arrived = 0;
  for (int k = 0; k < 500; ++k) {  // ten seconds in 20 ms buffers, each on time for the clock
    end = (k + 1) * 20 * ms;
    arrived = lag + end;
    EXPECT_FALSE(w.audio(end, arrived));
    EXPECT_EQ(w.deadline(), arrived + 3 * s);
    ASSERT_FALSE(w.stall(arrived)) << "buffer " << k;
  }
  EXPECT_FALSE(w.stall(arrived + 3 * s - 1));
  EXPECT_TRUE(w.stall(arrived + 3 * s));
  EXPECT_EQ(w.silent_for(arrived + 3 * s), lag + 3 * s);  // `delay`: the clock past the audio

  // Upstream's latency (200 ms of the wait) is how late audio arrives on time: the arrival is
  // given the rest, so that a feed as late as announced stalls when its end says, not later.
  StallWatch late(3 * s + 200 * ms, 200 * ms);
  EXPECT_FALSE(late.audio(10 * s, 10 * s + 200 * ms));
  EXPECT_EQ(late.deadline(), 13 * s + 200 * ms);
  EXPECT_FALSE(late.audio(11 * s, 11 * s + 500 * ms));  // later than announced
  EXPECT_EQ(late.deadline(), 14 * s + 500 * ms);
  EXPECT_FALSE(late.audio(12 * s, lag));  // minutes behind the clock
  EXPECT_EQ(late.deadline(), lag + 3 * s);
  StallWatch odd(s, 2 * s);  // more lateness than wait: the arrival is given nothing
  odd.audio(5 * s, 7 * s);
  EXPECT_EQ(odd.deadline(), 7 * s);
}

// Something that shows the feed alive without audio (a GAP event without a duration) holds the
// stall off like audio, but neither starts the watch nor ends a declared stall.
TEST(StallWatch, ArrivalsWithoutAudioKeepTheFeedAlive) {
  const int64_t s = 1000000000;
  StallWatch w(3 * s);
  w.alive(1 * s);
  EXPECT_EQ(w.deadline(), StallWatch::kNever);  // no audio yet: nothing to miss
  EXPECT_FALSE(w.audio(1 * s, 2 * s));
  EXPECT_EQ(w.deadline(), 5 * s);
  w.alive(7 * s);
  EXPECT_EQ(w.deadline(), 10 * s);
  w.alive(StallWatch::kUnread);
  EXPECT_EQ(w.deadline(), 10 * s);
  EXPECT_FALSE(w.stall(10 * s - 1));
  EXPECT_TRUE(w.stall(10 * s));
  EXPECT_EQ(w.silent_for(10 * s), 9 * s);
  w.alive(11 * s);
  EXPECT_TRUE(w.stalled());
  EXPECT_EQ(w.deadline(), StallWatch::kNever);
  EXPECT_TRUE(w.audio(12 * s, 12 * s));  // audio resumes it
  EXPECT_EQ(w.deadline(), 15 * s);
}

// The voice threshold left at 0 is the tuned one (docs/identity.md); a set one stands.
TEST(StreamSettings, VoiceThresholdTunedUnlessSet) {
  StreamSettings s;
  EXPECT_EQ(s.identity.match_threshold, 0.0);
  EXPECT_EQ(voice_threshold(s), kVoiceThreshold);  // the default latency, 2 s
  s.latency = 2.5;
  EXPECT_EQ(voice_threshold(s), kVoiceThreshold);
  s.latency = 1e9;  // offline
  EXPECT_EQ(voice_threshold(s), kVoiceThreshold);
  s.latency = 1;
  s.identity.match_threshold = 0.8;
  EXPECT_EQ(voice_threshold(s), 0.8);
  EXPECT_NO_THROW(validate_settings(s));
  s.identity.match_threshold = 1.5;
  EXPECT_THROW(validate_settings(s), std::invalid_argument);
}

// The same for enrolled voices, whose tuned threshold is lower (an enrolment is usually another
// recording, docs/identity.md).
TEST(StreamSettings, EnrolledThresholdTunedUnlessSet) {
  StreamSettings s;
  EXPECT_EQ(s.identity.enrolled_threshold, 0.0);
  EXPECT_EQ(enrolled_threshold(s), kEnrolledThreshold);
  EXPECT_LT(kEnrolledThreshold, kVoiceThreshold);
  s.identity.enrolled_threshold = 0.75;
  EXPECT_EQ(enrolled_threshold(s), 0.75);
  EXPECT_NO_THROW(validate_settings(s));
  s.identity.enrolled_threshold = -0.1;
  EXPECT_THROW(validate_settings(s), std::invalid_argument);
}

}  // namespace
}  // namespace speakerseg
