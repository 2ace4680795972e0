// Speaker changes of a real two-speaker recording, end to end through the core: the recording and
// its annotation come from the reference manifest (sample.wav, or the espeak-ng conversation).
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "common/rttm.h"
#include "common/run_detector.h"
#include "common/test_env.h"
#include "engines/cpu/cpu_engine.h"
#include "io/audio_file.h"
#include "scheduling/async_segmenter.h"
#include "streaming/speaker_change_detector.h"

namespace speakerseg {
namespace {

std::map<std::string, std::string> manifest(const std::string& dir) {
  std::map<std::string, std::string> m;
  std::ifstream f(dir + "/manifest.txt");
  std::string key, value;
  while (f >> key && std::getline(f >> std::ws, value)) m[key] = value;
  return m;
}

// Every start and end of an annotated turn, in seconds.
std::vector<double> turn_boundaries(const std::string& rttm) {
  const std::vector<test::Turn> turns = test::read_rttm(rttm);
  EXPECT_FALSE(turns.empty()) << "no turns in " << rttm;
  return test::turn_boundaries(turns);
}

struct Fixture {
  std::string recording, rttm;
  std::vector<float> audio;
  std::unique_ptr<SegmentationEngine> engine;
  Fixture() {
    auto m = manifest(test::reference_dir());
    recording = m["recording"];
    rttm = m["rttm"];
    audio = read_mono_16k(recording);
    // One thread: meson runs test programs side by side on few cores.
    engine = make_cpu_engine(SegmentationModel::load_onnx(test::model_path()), {1});
  }
};

std::vector<SpeakerChange> detect(SegmentationEngine& engine, const std::vector<float>& audio,
                                  const StreamSettings& s, int batch) {
  SpeakerChangeDetector d(engine, s, batch);
  return test::run_detector(d, audio);
}

TEST(SpeakerChanges, FoundNearTheAnnotatedTurnChanges) {
  Fixture fx;
  const auto boundaries = turn_boundaries(fx.rttm);
  StreamSettings s;  // defaults: latency 2 s, step 1 s
  const auto changes = detect(*fx.engine, fx.audio, s, 1);
  int between_speakers = 0, to_a_speaker = 0;
  for (const auto& c : changes) {
    const double t = c.sample / double(kSampleRate);
    double nearest = 1e9;
    for (double b : boundaries) nearest = std::min(nearest, std::fabs(b - t));
    std::printf(
        "[ change   ] %7.3f s  %-10s -> %-10s  confidence %.2f  delay %.2f s  nearest turn %.2f "
        "s\n",
        t, c.previous.c_str(), c.speaker.c_str(), c.confidence,
        (c.announced_sample - c.sample) / double(kSampleRate), nearest);
    EXPECT_LE(nearest, 0.5) << "change at " << t << " s is not near an annotated turn boundary";
    if (!c.speaker.empty()) ++to_a_speaker;
    if (!c.speaker.empty() && !c.previous.empty()) ++between_speakers;
    // Announced once `latency` of right context has arrived, except at the end of the stream.
    if (c.announced_sample < static_cast<int64_t>(fx.audio.size())) {
      EXPECT_GE(c.announced_sample - c.sample, static_cast<int64_t>(s.latency * kSampleRate));
    }
    EXPECT_GE(c.confidence, 0.0);
    EXPECT_LE(c.confidence, 1.0);
  }
  EXPECT_GE(to_a_speaker, 5);
  std::printf("[ changes  ] %d changes to a speaker, %d of them straight from another speaker\n",
              to_a_speaker, between_speakers);
  ASSERT_FALSE(changes.empty());
  EXPECT_EQ(changes.front().previous, "");
  for (size_t i = 1; i < changes.size(); ++i) {
    EXPECT_GT(changes[i].sample, changes[i - 1].sample) << "changes out of order";
    EXPECT_EQ(changes[i].previous, changes[i - 1].speaker) << "chain broken at " << i;
  }
}

TEST(SpeakerChanges, WorkerThreadGivesTheSameChangesAsTheCallingThread) {
  Fixture fx;
  StreamSettings s;
  const auto want = detect(*fx.engine, fx.audio, s, 1);
  auto async = make_async_segmenter(
      make_cpu_engine(SegmentationModel::load_onnx(test::model_path()), {1}), s, {1, 8, false});
  WindowBuffer wb(kWindowSamples, step_samples(s));
  auto submit = [&](WindowJob&& w) { async->submit(std::move(w)); };
  std::vector<SpeakerChange> got;
  for (size_t i = 0; i < fx.audio.size(); i += 320) {
    wb.push(&fx.audio[i], std::min<size_t>(320, fx.audio.size() - i), submit);
    for (auto& c : async->take_changes()) got.push_back(c);
  }
  wb.flush_tail(submit);
  async->finish(wb.total());
  for (auto& c : async->take_changes()) got.push_back(c);
  EXPECT_TRUE(async->error().empty());
  // The statistics an element reports come from the worker here too.
  EXPECT_EQ(async->last_batch_size(), 1);
  EXPECT_EQ(async->last_shared_batch_size(), 1);
  EXPECT_GT(async->current_delay_seconds(), 0.0);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].sample, want[i].sample);
    EXPECT_EQ(got[i].speaker, want[i].speaker);
    EXPECT_EQ(got[i].previous, want[i].previous);
    EXPECT_EQ(got[i].announced_sample, want[i].announced_sample);
  }
  // After a reset the worker starts a new timeline: the same audio gives the same changes.
  async->reset();
  wb.reset();
  got.clear();
  for (size_t i = 0; i < fx.audio.size(); i += 16000)
    wb.push(&fx.audio[i], std::min<size_t>(16000, fx.audio.size() - i), submit);
  wb.flush_tail(submit);
  async->finish(wb.total());
  got = async->take_changes();
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(got.front().speaker, want.front().speaker);
}

// A live feed that stalls (core/streaming/stall_watch.h) ends like a stream: every frame the audio
// holds becomes final, so the last turn change, which waits for `latency` at the end, comes out;
// then the turn ends with the audio, announced as nobody and marked stalled.
TEST(SpeakerChanges, StalledStreamEndsWithItsLastChangesAndNobody) {
  Fixture fx;
  StreamSettings s;
  // The recordings end 0.3-0.8 s after their last speech: with this min-silence that last change
  // to nobody is one only the end of the audio makes final.
  s.min_silence = 0.3;
  const auto want = detect(*fx.engine, fx.audio, s, 1);
  ASSERT_GE(want.size(), 2u);
  auto async = make_async_segmenter(
      make_cpu_engine(SegmentationModel::load_onnx(test::model_path()), {1}), s, {1, 8, false});
  WindowBuffer wb(kWindowSamples, step_samples(s));
  auto submit = [&](WindowJob&& w) { async->submit(std::move(w)); };
  wb.push(fx.audio.data(), fx.audio.size(), submit);
  wb.flush_tail(submit);
  async->finish(wb.total(), StretchEnd::kStalled);
  const auto got = async->take_changes();
  EXPECT_TRUE(async->error().empty());
  ASSERT_EQ(got.size(), want.size() + 1);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].sample, want[i].sample) << i;
    EXPECT_EQ(got[i].speaker, want[i].speaker) << i;
    EXPECT_EQ(got[i].previous, want[i].previous) << i;
    EXPECT_FALSE(got[i].stalled) << i;
  }
  // At least the last change was too recent for `latency` when the audio stopped.
  EXPECT_LT(want.back().announced_sample - want.back().sample,
            static_cast<int64_t>(s.latency * kSampleRate));
  const SpeakerChange& stall = got.back();
  EXPECT_TRUE(stall.stalled);
  EXPECT_EQ(stall.sample, wb.total());
  EXPECT_EQ(stall.speaker, "");
  EXPECT_EQ(stall.previous, want.back().speaker);
}

TEST(SpeakerChanges, BatchedOfflineRunAgreesWithStreaming) {
  Fixture fx;
  StreamSettings s;
  const auto one = detect(*fx.engine, fx.audio, s, 1);
  const auto batched = detect(*fx.engine, fx.audio, s, 8);
  ASSERT_EQ(one.size(), batched.size());
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(one[i].sample, batched[i].sample);
    EXPECT_EQ(one[i].speaker, batched[i].speaker);
    EXPECT_NEAR(one[i].confidence, batched[i].confidence, 1e-3);
  }
}

long max_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

TEST(SpeakerChanges, TenMinuteStreamKeepsMemoryAndDelayFlat) {
  Fixture fx;
  StreamSettings s;
  SpeakerChangeDetector d(*fx.engine, s, 1);
  std::vector<double> delays_first, delays_last;
  size_t max_held = 0;
  long rss_after_two_minutes = 0;
  // Ten minutes; sanitizer builds, which look for memory errors rather than drift, set
  // SPEAKERSEG_SOAK_SECONDS shorter (tests/meson.build; at least 5 minutes, so that the memory
  // check still compares minute 2 with a later one).
  const char* soak = std::getenv("SPEAKERSEG_SOAK_SECONDS");
  const int64_t seconds = soak ? std::max(300L, std::atol(soak)) : 600;
  const int64_t total = seconds * kSampleRate;
  for (int64_t pos = 0; pos < total; pos += 320) {
    const size_t offset = static_cast<size_t>(pos % static_cast<int64_t>(fx.audio.size()));
    const size_t n = std::min<size_t>(320, fx.audio.size() - offset);
    d.push(&fx.audio[offset], n);
    for (const auto& c : d.take_changes()) {
      const double delay = (c.announced_sample - c.sample) / double(kSampleRate);
      (c.sample < total / 2 ? delays_first : delays_last).push_back(delay);
    }
    max_held = std::max(max_held, d.held_frames());
    if (pos == 120LL * kSampleRate) rss_after_two_minutes = max_rss_kib();
  }
  ASSERT_GT(delays_first.size(), 20u);
  ASSERT_GT(delays_last.size(), 20u);
  auto mean = [](const std::vector<double>& v) {
    double t = 0;
    for (double x : v) t += x;
    return t / v.size();
  };
  std::printf(
      "[ soak     ] %lld s: %zu + %zu changes, mean delay %.3f s then %.3f s, max delay %.3f s, "
      "history %zu frames, max RSS %ld KiB after 2 min, %ld KiB at the end, %zu labels\n",
      static_cast<long long>(seconds), delays_first.size(), delays_last.size(), mean(delays_first),
      mean(delays_last),
      std::max(*std::max_element(delays_first.begin(), delays_first.end()),
               *std::max_element(delays_last.begin(), delays_last.end())),
      max_held, rss_after_two_minutes, max_rss_kib(), d.speakers().size());
  EXPECT_LE(mean(delays_last), mean(delays_first) + 0.1);
  // A silence before somebody else is announced with them: up to min-silence plus min-speech.
  const double bound = s.latency + s.step + s.min_speech + s.min_silence + 0.1;
  for (double x : delays_last) EXPECT_LE(x, bound);
  EXPECT_LE(max_held, 589u + 2 * 60u + static_cast<size_t>(s.latency / kFrameStepSeconds));
  EXPECT_LE(max_rss_kib() - rss_after_two_minutes, 16 * 1024) << "memory grew by more than 16 MiB";
}

}  // namespace
}  // namespace speakerseg
