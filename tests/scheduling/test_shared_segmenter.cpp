// Several streams through one engine (SharedScheduler, SharedSegmenterChannel, EnginePool), on the
// real model and the reference recording: each channel must give exactly what its stream gives
// alone, whatever the other channels do, and nobody may hang.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "common/test_env.h"
#include "common/xorshift.h"
#include "engines/cpu/cpu_engine.h"
#include "engines/cpu/cpu_voice_encoder.h"
#include "io/audio_file.h"
#include "model/voice_model.h"
#include "scheduling/async_segmenter.h"
#include "scheduling/engine_pool.h"
#include "scheduling/shared_segmenter.h"
#include "streaming/speaker_change_detector.h"

namespace speakerseg {
namespace {

std::vector<float> reference_recording() {
  std::map<std::string, std::string> m;
  std::ifstream f(test::reference_dir() + "/manifest.txt");
  std::string key, value;
  while (f >> key && std::getline(f >> std::ws, value)) m[key] = value;
  return read_mono_16k(m["recording"]);
}

std::shared_ptr<const SegmentationModel> model() {
  static auto m = SegmentationModel::load_onnx(test::model_path());
  return m;
}

// One thread: meson runs test programs side by side on few cores.
std::unique_ptr<SegmentationEngine> cpu_engine() {
  return make_cpu_engine(model(), {1});
}

std::vector<SpeakerChange> alone(const std::vector<float>& audio, const StreamSettings& s) {
  auto engine = cpu_engine();
  SpeakerChangeDetector d(*engine, s, 1);
  d.push(audio.data(), audio.size());
  d.finish();
  return d.take_changes();
}

void append(std::vector<SpeakerChange>& to, std::vector<SpeakerChange> more) {
  for (auto& c : more) to.push_back(std::move(c));
}

// Streams `audio` through `channel` in 20 ms buffers, as an element would; `after_submit`, when
// given, runs after every window handed over.
std::vector<SpeakerChange> stream(SharedSegmenterChannel& channel, const std::vector<float>& audio,
                                  const StreamSettings& s,
                                  const std::function<void()>& after_submit = {}) {
  WindowBuffer wb(kWindowSamples, step_samples(s));
  auto submit = [&](WindowJob&& w) {
    channel.submit(std::move(w));
    if (after_submit) after_submit();
  };
  std::vector<SpeakerChange> got;
  for (size_t i = 0; i < audio.size(); i += 320) {
    wb.push(&audio[i], std::min<size_t>(320, audio.size() - i), submit);
    append(got, channel.take_changes());
  }
  wb.flush_tail(submit);
  channel.finish(wb.total());
  append(got, channel.take_changes());
  return got;
}

// Streams `audio` through `n` channels of `scheduler` at once, one thread each (started on
// `threads`, which the caller joins); channel i's changes go to (*got)[i].
void stream_side_by_side(const std::shared_ptr<SharedScheduler>& scheduler,
                         const std::vector<float>& audio, const StreamSettings& s, int n,
                         std::vector<std::thread>* threads,
                         std::vector<std::vector<SpeakerChange>>* got) {
  got->assign(n, {});
  for (int i = 0; i < n; ++i)
    threads->emplace_back([=, &audio, &s] {
      SharedSegmenterChannel c(scheduler, s, SharedChannelOptions{4, false, 0.01});
      (*got)[i] = stream(c, audio, s);
      EXPECT_TRUE(c.error().empty()) << c.error();
    });
}

void expect_same(const std::vector<SpeakerChange>& got, const std::vector<SpeakerChange>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].sample, want[i].sample) << what << ", change " << i;
    EXPECT_EQ(got[i].speaker, want[i].speaker) << what << ", change " << i;
    EXPECT_EQ(got[i].previous, want[i].previous) << what << ", change " << i;
    EXPECT_EQ(got[i].announced_sample, want[i].announced_sample) << what << ", change " << i;
    // Batched and single-window forward calls round differently.
    EXPECT_NEAR(got[i].confidence, want[i].confidence, 1e-3) << what << ", change " << i;
  }
}

// A max_batch_wait no test outlasts: batches form only when full or when a host waits.
constexpr double kForever = 3600;

std::unique_ptr<VoiceEncoder> cpu_voice() {
  return make_cpu_voice_encoder(VoiceModel::load_onnx(test::env_path("SPEAKERSEG_VOICE_MODEL")),
                                {1});
}

// Identity by voice on the first 20 s of the recording (two speakers and their decisions, at half
// the cost under the sanitizers), and the changes its stream gives alone.
struct VoiceCase {
  std::vector<float> audio = reference_recording();
  StreamSettings settings;
  std::vector<SpeakerChange> alone;
  VoiceCase() {
    audio.resize(std::min<size_t>(audio.size(), 20 * kSampleRate));
    settings.identity.enabled = true;
    auto engine = cpu_engine();
    auto voice = cpu_voice();
    SpeakerChangeDetector d(*engine, settings, 1, voice.get());
    d.push(audio.data(), audio.size());
    d.finish();
    alone = d.take_changes();
  }
};

// The 20 s case, run alone once for the suites that compare with it.
const VoiceCase& twenty_seconds() {
  static const VoiceCase v;
  return v;
}

TEST(SharedSegmenter, ThreeChannelsGiveWhatEachGivesAlone) {
  const auto audio = reference_recording();
  StreamSettings s;
  const auto want = alone(audio, s);
  ASSERT_FALSE(want.empty());
  auto scheduler = std::make_shared<SharedScheduler>(cpu_engine(), 4);
  std::vector<std::unique_ptr<SharedSegmenterChannel>> channels;
  for (int i = 0; i < 3; ++i)
    channels.push_back(std::make_unique<SharedSegmenterChannel>(
        scheduler, s, SharedChannelOptions{4, false, kForever}));
  EXPECT_EQ(scheduler->channels(), 3u);
  std::vector<std::vector<SpeakerChange>> got(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&, i] { got[i] = stream(*channels[i], audio, s); });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(channels[i]->error().empty()) << channels[i]->error();
    expect_same(got[i], want, "channel " + std::to_string(i));
    EXPECT_EQ(channels[i]->queue_depth(), 0u);
    EXPECT_EQ(channels[i]->dropped_windows(), 0u);
    EXPECT_GE(channels[i]->last_batch_size(), 1);
    EXPECT_GE(channels[i]->last_shared_batch_size(), channels[i]->last_batch_size());
    EXPECT_GT(channels[i]->current_delay_seconds(), 0.0);
  }
  const uint64_t windows = channels[0]->processed_windows();
  EXPECT_EQ(channels[1]->processed_windows(), windows);
  EXPECT_EQ(channels[2]->processed_windows(), windows);
  EXPECT_GT(scheduler->max_batch_size(), 1) << "the scheduler never batched";
  EXPECT_LE(scheduler->max_batch_size(), 4);
  EXPECT_LT(scheduler->batches_run(), 3 * windows);
  std::printf("[ shared   ] %llu windows per channel in %llu forward calls, largest batch %d\n",
              static_cast<unsigned long long>(windows),
              static_cast<unsigned long long>(scheduler->batches_run()),
              scheduler->max_batch_size());
}

// The recording, backwards, and started a third of the way in: three different streams.
std::vector<std::vector<float>> three_recordings() {
  const auto audio = reference_recording();
  auto reversed = audio;
  std::reverse(reversed.begin(), reversed.end());
  auto rotated = audio;
  std::rotate(rotated.begin(), rotated.begin() + rotated.size() / 3, rotated.end());
  return {audio, reversed, rotated};
}

TEST(SharedSegmenter, DifferentRecordingsDoNotCrossTalk) {
  const auto recordings = three_recordings();
  StreamSettings s;
  std::vector<std::vector<SpeakerChange>> want;
  for (const auto& r : recordings) want.push_back(alone(r, s));
  ASSERT_NE(want[0].size(), 0u);
  auto scheduler = std::make_shared<SharedScheduler>(cpu_engine(), 4);
  // A short deadline: batches form from whatever arrives within 50 ms, as on a live host.
  std::vector<std::unique_ptr<SharedSegmenterChannel>> channels;
  for (int i = 0; i < 3; ++i)
    channels.push_back(std::make_unique<SharedSegmenterChannel>(
        scheduler, s, SharedChannelOptions{4, false, 0.05}));
  std::vector<std::vector<SpeakerChange>> got(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&, i] { got[i] = stream(*channels[i], recordings[i], s); });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(channels[i]->error().empty()) << channels[i]->error();
    expect_same(got[i], want[i], "recording " + std::to_string(i));
  }
}

TEST(SharedSegmenter, ResetOfOneChannelLeavesTheOthersAlone) {
  const auto audio = reference_recording();
  StreamSettings s;
  const auto want = alone(audio, s);
  auto scheduler = std::make_shared<SharedScheduler>(cpu_engine(), 4);
  std::vector<std::unique_ptr<SharedSegmenterChannel>> channels;
  for (int i = 0; i < 3; ++i)
    channels.push_back(std::make_unique<SharedSegmenterChannel>(
        scheduler, s, SharedChannelOptions{4, false, kForever}));
  std::vector<std::vector<SpeakerChange>> got(3);
  std::vector<std::thread> threads;
  for (int i : {0, 2}) threads.emplace_back([&, i] { got[i] = stream(*channels[i], audio, s); });
  threads.emplace_back([&] {
    // Half the recording, with windows still queued and in flight, then a flush and a new stream.
    auto& c = *channels[1];
    WindowBuffer wb(kWindowSamples, step_samples(s));
    const size_t half = audio.size() / 2;
    for (size_t i = 0; i < half; i += 320)
      wb.push(&audio[i], std::min<size_t>(320, half - i),
              [&](WindowJob&& w) { c.submit(std::move(w)); });
    c.reset();
    EXPECT_TRUE(c.take_changes().empty());
    got[1] = stream(c, audio, s);
  });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(channels[i]->error().empty()) << channels[i]->error();
    expect_same(got[i], want, "channel " + std::to_string(i));
  }
}

// The real engine, except that its Nth forward call fails: tests where errors go, not the maths.
class FailingEngine : public SegmentationEngine {
 public:
  FailingEngine(std::unique_ptr<SegmentationEngine> inner, int fail_on_call)
      : inner_(std::move(inner)), fail_on_call_(fail_on_call) {}
  std::string description() const override { return "failing " + inner_->description(); }
  void forward(const float* audio, int batch, int samples, float* logprobs) override {
    if (++calls_ == fail_on_call_) throw EngineError("injected failure");
    inner_->forward(audio, batch, samples, logprobs);
  }

 private:
  std::unique_ptr<SegmentationEngine> inner_;
  int fail_on_call_, calls_ = 0;
};

TEST(SharedSegmenter, EngineErrorReachesTheChannelsOfTheFailedBatchOnly) {
  const auto audio = reference_recording();
  StreamSettings s;
  const auto want = alone(audio, s);
  auto scheduler =
      std::make_shared<SharedScheduler>(std::make_unique<FailingEngine>(cpu_engine(), 1), 4);
  const SharedChannelOptions options{8, false, kForever};
  SharedSegmenterChannel a(scheduler, s, options), b(scheduler, s, options),
      c(scheduler, s, options);
  std::vector<WindowJob> windows;
  WindowBuffer wb(kWindowSamples, step_samples(s));
  wb.push(audio.data(), 3 * kSampleRate, [&](WindowJob&& w) { windows.push_back(std::move(w)); });
  ASSERT_GE(windows.size(), 2u);
  // Nothing hurries the worker and the deadline is far: the 4th window fills the first batch,
  // which fails, with exactly a's and b's windows in it.
  a.submit(windows[0]);
  b.submit(windows[0]);
  a.submit(windows[1]);
  b.submit(windows[1]);
  a.drain();
  b.drain();
  EXPECT_NE(a.error().find("injected failure"), std::string::npos) << a.error();
  EXPECT_NE(b.error().find("injected failure"), std::string::npos) << b.error();
  EXPECT_EQ(scheduler->batches_run(), 1u);
  EXPECT_EQ(scheduler->last_batch_size(), 4);
  // A failed channel neither takes windows nor blocks its host.
  a.submit(windows[0]);
  EXPECT_EQ(a.queue_depth(), 0u);
  a.finish(wb.total());
  b.reset();
  // A window too short for the engine fails its own channel only, before any batch holds it.
  SharedSegmenterChannel short_window(scheduler, s, options);
  short_window.submit({0, 100, std::vector<float>(100)});
  EXPECT_FALSE(short_window.error().empty());
  short_window.finish(100);
  // A channel that was not in the failed batch goes on as if nothing happened.
  EXPECT_TRUE(c.error().empty());
  expect_same(stream(c, audio, s), want, "the channel outside the failed batch");
  EXPECT_TRUE(c.error().empty()) << c.error();
}

class IdleEngine : public SegmentationEngine {
 public:
  std::string description() const override { return "idle"; }
  void forward(const float*, int, int, float*) override {
    throw EngineError("IdleEngine runs nothing");
  }
};

TEST(SharedSegmenter, EnginePoolSharesPerKeyAndFreesWithTheLastUser) {
  EnginePool pool;
  int made = 0;
  auto factory = [&] {
    ++made;
    return std::make_unique<IdleEngine>();
  };
  const EngineKey cpu{"model.onnx", "cpu", "", "threads=1"};
  const EngineKey cuda{"model.onnx", "cuda", "0", "fp16"};
  auto first = pool.get(cpu, 4, factory);
  auto second = pool.get(cpu, 8, factory);
  auto other = pool.get(cuda, 4, factory);
  EXPECT_EQ(first, second);
  EXPECT_NE(first, other);
  EXPECT_EQ(made, 2);
  EXPECT_EQ(first->batch_size(), 4) << "later users share the first one's batch size";
  EXPECT_EQ(pool.size(), 2u);

  std::weak_ptr<SharedScheduler> watch = first;
  // A channel keeps its scheduler alive after the element's own reference is gone.
  auto channel =
      std::make_unique<SharedSegmenterChannel>(first, StreamSettings{}, SharedChannelOptions{});
  first.reset();
  second.reset();
  EXPECT_FALSE(watch.expired());
  EXPECT_EQ(pool.get(cpu, 4, factory), channel->scheduler());
  EXPECT_EQ(made, 2);
  channel.reset();
  EXPECT_TRUE(watch.expired()) << "the last user gone, the engine must go";
  EXPECT_EQ(pool.size(), 1u);
  other.reset();
  EXPECT_EQ(pool.size(), 0u);

  // A new user after that loads the engine again; a failing factory leaves the pool as it was.
  auto again = pool.get(cpu, 4, factory);
  EXPECT_EQ(made, 3);
  EXPECT_THROW(
      pool.get(cuda, 4,
               []() -> std::unique_ptr<SegmentationEngine> { throw EngineError("no device"); }),
      EngineError);
  EXPECT_EQ(pool.size(), 1u);
  EXPECT_EQ(&EnginePool::instance(), &EnginePool::instance());

  // Batches in flight: one engine per lane, made by the factory, under a key of their own.
  const EngineKey two{"model.onnx", "cpu", "", "threads=1;batches-in-flight=2"};
  auto lanes = pool.get(two, 4, factory, nullptr, SharedScheduler::kDefaultOutageWait, 2);
  EXPECT_EQ(made, 5);
  EXPECT_EQ(lanes->lanes(), 2);
  EXPECT_EQ(again->lanes(), 1);
}

TEST(SharedSegmenter, LoneWindowRunsAtItsDeadlineWithoutAFullBatch) {
  const auto audio = reference_recording();
  StreamSettings s;
  const auto want = alone(audio, s);
  auto scheduler = std::make_shared<SharedScheduler>(cpu_engine(), 8);
  SharedSegmenterChannel channel(scheduler, s, SharedChannelOptions{8, false, 0.01});
  uint64_t submitted = 0;
  const auto got = stream(channel, audio, s, [&] {
    ++submitted;
    // No host waits and the batch of 8 never fills: only the deadline can run the window.
    while (channel.processed_windows() < submitted)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(channel.last_batch_size(), 1);
  });
  expect_same(got, want, "one channel, batch never full");
  EXPECT_EQ(scheduler->max_batch_size(), 1);
  EXPECT_EQ(scheduler->batches_run(), submitted);
}

TEST(SharedSegmenter, LateChannelDropsItsOwnOldestWindows) {
  const auto audio = reference_recording();
  StreamSettings s;
  auto scheduler = std::make_shared<SharedScheduler>(cpu_engine(), 8);
  SharedSegmenterChannel late(scheduler, s, SharedChannelOptions{1, true, kForever});
  SharedSegmenterChannel other(scheduler, s, SharedChannelOptions{8, false, kForever});
  std::vector<WindowJob> windows;
  WindowBuffer wb(kWindowSamples, step_samples(s));
  wb.push(audio.data(), 3 * kSampleRate, [&](WindowJob&& w) { windows.push_back(std::move(w)); });
  ASSERT_EQ(windows.size(), 3u);
  // The deadline is far and the batch not full, so the worker holds the windows: `late` keeps
  // only its newest, `other` keeps all of its own.
  for (const auto& w : windows) {
    late.submit(w);
    other.submit(w);
  }
  EXPECT_EQ(late.dropped_windows(), 2u);
  EXPECT_EQ(late.queue_depth(), 1u);
  EXPECT_EQ(other.queue_depth(), 3u);
  EXPECT_EQ(scheduler->queue_depth(), 4u);
  late.drain();
  other.drain();
  EXPECT_EQ(late.processed_windows(), 1u);
  EXPECT_EQ(other.processed_windows(), 3u);
  EXPECT_EQ(other.dropped_windows(), 0u);
  EXPECT_EQ(late.last_shared_batch_size(), 4);
}

// Channels that come and go at random (started, fed a few windows, flushed, failed by a window
// the engine cannot take, finished or destroyed with windows still queued) while two others
// stream the whole recording through the same engine: the two must give exactly what they give
// alone. Meant to run under ThreadSanitizer too (scripts/test.sh), where a race shows as a report.
TEST(SharedSegmenter, ChannelsComingAndGoingAtRandomDisturbNobody) {
  const auto audio = reference_recording();
  StreamSettings s;
  const auto want = alone(audio, s);
  auto scheduler = std::make_shared<SharedScheduler>(cpu_engine(), 4);
  std::vector<WindowJob> windows;
  WindowBuffer wb(kWindowSamples, step_samples(s));
  wb.push(audio.data(), audio.size(), [&](WindowJob&& w) { windows.push_back(std::move(w)); });
  ASSERT_GE(windows.size(), 4u);

  std::atomic<bool> steady_done{false};
  std::atomic<int> chaos_rounds{0}, chaos_errors{0};
  std::vector<std::vector<SpeakerChange>> got;
  std::vector<std::thread> threads;
  stream_side_by_side(scheduler, audio, s, 2, &threads, &got);
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      test::Xorshift rng(12345u + 977u * t);
      auto next = [&](uint32_t n) { return rng.below(n); };
      // At least a few rounds each, then for as long as the steady channels stream.
      for (int round = 0; round < 4 || !steady_done; ++round) {
        auto c = std::make_unique<SharedSegmenterChannel>(
            scheduler, s,
            SharedChannelOptions{static_cast<int>(1 + next(8)), next(2) == 0, 0.001 * next(20)});
        const uint32_t n = 1 + next(static_cast<uint32_t>(windows.size()));
        for (uint32_t k = 0; k < n; ++k) {
          c->submit(windows[next(static_cast<uint32_t>(windows.size()))]);
          switch (next(12)) {
            case 0:
              c->reset();
              break;
            case 1:
              c->submit({0, 100, std::vector<float>(100)});
              break;  // fails this channel
            case 2:
              c->take_changes();
              break;
            case 3:
              std::this_thread::yield();
              break;
            default:
              break;
          }
        }
        if (!c->error().empty()) ++chaos_errors;
        switch (next(3)) {
          case 0:
            c->finish(wb.total());
            break;
          case 1:
            c->drain();
            break;
          default:
            break;  // destroyed with windows still queued or in flight
        }
        c.reset();
        ++chaos_rounds;
      }
    });
  threads[0].join();
  threads[1].join();
  steady_done = true;
  for (size_t i = 2; i < threads.size(); ++i) threads[i].join();
  for (int i = 0; i < 2; ++i) expect_same(got[i], want, "steady channel " + std::to_string(i));
  EXPECT_GE(chaos_rounds.load(), 12);
  EXPECT_EQ(scheduler->channels(), 0u);
  std::printf("[ chaos    ] %d channels came and went (%d failed) beside 2 steady ones\n",
              chaos_rounds.load(), chaos_errors.load());
}

// The per-stream worker (make_async_segmenter: a private scheduler and one channel) gives what the
// stream gives alone; one that drops late windows, is reset with windows queued and is destroyed
// with windows in flight stops cleanly.
TEST(SharedSegmenter, PerStreamWorkerGivesWhatTheStreamGivesAlone) {
  const auto audio = reference_recording();
  StreamSettings s;
  const auto want = alone(audio, s);
  auto worker = make_async_segmenter(cpu_engine(), s, AsyncSegmenterOptions{1, 4, false});
  expect_same(stream(*worker, audio, s), want, "per-stream worker");
  EXPECT_TRUE(worker->error().empty()) << worker->error();

  auto late = make_async_segmenter(cpu_engine(), s, AsyncSegmenterOptions{2, 2, true});
  WindowBuffer wb(kWindowSamples, step_samples(s));
  size_t submitted = 0;
  wb.push(audio.data(), audio.size(), [&](WindowJob&& w) {
    late->submit(std::move(w));
    if (++submitted == 5) late->reset();
  });
  EXPECT_LE(late->queue_depth(), 2u);
  late.reset();  // with windows queued and in flight: joins its worker
}

// `channels` channels with identity by voice streaming twenty_seconds() side by side on
// `scheduler`: each gives what the stream gives alone (its changes' samples and speakers).
void expect_voice_channels_as_alone(const std::shared_ptr<SharedScheduler>& scheduler,
                                    int channels) {
  const VoiceCase& v = twenty_seconds();
  std::vector<std::vector<SpeakerChange>> got;
  std::vector<std::thread> threads;
  stream_side_by_side(scheduler, v.audio, v.settings, channels, &threads, &got);
  for (auto& t : threads) t.join();
  for (int i = 0; i < channels; ++i) {
    ASSERT_EQ(got[i].size(), v.alone.size()) << "channel " << i;
    for (size_t k = 0; k < v.alone.size(); ++k) {
      EXPECT_EQ(got[i][k].sample, v.alone[k].sample) << "channel " << i << ", change " << k;
      EXPECT_EQ(got[i][k].speaker, v.alone[k].speaker) << "channel " << i << ", change " << k;
    }
  }
}

// Identity by voice on the shared engine: the voice encoder runs on the worker for every channel
// and on hosts finishing theirs (never both at once). Two channels with it, side by side, give
// what one gives alone.
TEST(SharedSegmenter, ChannelsWithIdentityByVoiceShareTheEncoder) {
  ASSERT_FALSE(twenty_seconds().alone.empty());
  auto scheduler = std::make_shared<SharedScheduler>(cpu_engine(), 4, cpu_voice());
  expect_voice_channels_as_alone(scheduler, 2);
}

// The voices of a batch's channels go through the encoder together: two channels fed window by
// window in lockstep (one thread, batches of 2 that fill only with one window of each) ask for
// the same embeddings at the same frames, so every encoder call on the worker serves both, and
// each channel still gives what its stream gives alone.
TEST(SharedSegmenter, VoicesOfOneBatchAreEmbeddedInOneCall) {
  const VoiceCase& v = twenty_seconds();
  const auto& audio = v.audio;
  const auto& s = v.settings;
  const auto& want = v.alone;
  ASSERT_FALSE(want.empty());
  auto scheduler = std::make_shared<SharedScheduler>(cpu_engine(), 2, cpu_voice());
  std::vector<std::unique_ptr<SharedSegmenterChannel>> channels;
  std::vector<WindowBuffer> buffers;
  for (int i = 0; i < 2; ++i) {
    channels.push_back(std::make_unique<SharedSegmenterChannel>(
        scheduler, s, SharedChannelOptions{4, false, kForever}));
    buffers.emplace_back(kWindowSamples, step_samples(s));
  }
  std::vector<std::vector<SpeakerChange>> got(2);
  auto feed = [&](int i, const float* samples, size_t n) {
    buffers[i].push(samples, n, [&](WindowJob&& w) { channels[i]->submit(std::move(w)); });
  };
  for (size_t at = 0; at < audio.size(); at += 320)
    for (int i = 0; i < 2; ++i) feed(i, &audio[at], std::min<size_t>(320, audio.size() - at));
  for (int i = 0; i < 2; ++i)
    buffers[i].flush_tail([&](WindowJob&& w) { channels[i]->submit(std::move(w)); });
  for (int i = 0; i < 2; ++i) channels[i]->drain();
  // Counted before finish(), which embeds on this thread, one channel at a time.
  const uint64_t calls = scheduler->voice_calls(), utterances = scheduler->voice_utterances();
  std::printf("[ voice    ] worker: %llu utterances in %llu encoder calls, at most %d partials\n",
              static_cast<unsigned long long>(utterances), static_cast<unsigned long long>(calls),
              scheduler->max_voice_batch());
  EXPECT_GT(utterances, 0u);
  EXPECT_EQ(2 * calls, utterances);
  // What each channel reports of it (the element's speaker-change-stats): its own half of the
  // utterances, and a last batch holding both channels' partials.
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(2 * channels[i]->voice_embeddings(), utterances) << "channel " << i;
    EXPECT_GE(channels[i]->last_voice_batch_size(), 2) << "channel " << i;
    EXPECT_LE(channels[i]->last_voice_batch_size(), scheduler->max_voice_batch());
  }
  for (int i = 0; i < 2; ++i) {
    channels[i]->finish(buffers[i].total());
    append(got[i], channels[i]->take_changes());
    EXPECT_TRUE(channels[i]->error().empty()) << channels[i]->error();
    expect_same(got[i], want, "channel " + std::to_string(i));
  }
}

// A voice encoder that fails from its `fail_from`-th call on.
class FailingVoice : public VoiceEncoder {
 public:
  FailingVoice(std::unique_ptr<VoiceEncoder> inner, int fail_from)
      : inner_(std::move(inner)), fail_from_(fail_from) {}
  std::string description() const override { return "failing " + inner_->description(); }
  void embed(const float* mel, int batch, int frames, float* embeddings) override {
    if (++calls_ >= fail_from_) throw EngineError("injected voice failure");
    inner_->embed(mel, batch, frames, embeddings);
  }

 private:
  std::unique_ptr<VoiceEncoder> inner_;
  int fail_from_, calls_ = 0;
};

// A voice encoder failure on the worker fails the channel that waited for it, whose host then
// finishes without an exception (it may be GStreamer's streaming thread); a channel of the same
// scheduler without identity goes on as if nothing happened.
TEST(SharedSegmenter, VoiceErrorFailsTheWaitingChannelAndFinishDoesNotThrow) {
  // 14 s: the first voice decisions (speech begins at 6.7 s in sample.wav).
  auto audio = reference_recording();
  audio.resize(std::min<size_t>(audio.size(), 14 * kSampleRate));
  StreamSettings s;
  s.identity.enabled = true;
  auto scheduler = std::make_shared<SharedScheduler>(
      cpu_engine(), 2, std::make_unique<FailingVoice>(cpu_voice(), 1));
  SharedSegmenterChannel with_voice(scheduler, s, SharedChannelOptions{4, false, 0});
  std::vector<SpeakerChange> got;
  EXPECT_NO_THROW(got = stream(with_voice, audio, s));
  EXPECT_NE(with_voice.error().find("injected voice failure"), std::string::npos)
      << with_voice.error();
  StreamSettings plain;
  SharedSegmenterChannel without(scheduler, plain, SharedChannelOptions{4, false, 0});
  expect_same(stream(without, audio, plain), alone(audio, plain), "the channel without voice");
  EXPECT_TRUE(without.error().empty()) << without.error();
}

}  // namespace
}  // namespace speakerseg

namespace speakerseg {
namespace {

// Holds the first forward call of any of its engines until a second one has begun too (or 60 s
// have passed): two batches are then in flight at once, or the test sees that they never were.
struct Rendezvous {
  std::mutex mutex;
  std::condition_variable met_cv;
  int entered = 0;
  bool met = false;
};

class RendezvousEngine : public SegmentationEngine {
 public:
  RendezvousEngine(std::unique_ptr<SegmentationEngine> inner, std::shared_ptr<Rendezvous> r)
      : inner_(std::move(inner)), r_(std::move(r)) {}
  std::string description() const override { return inner_->description(); }
  void forward(const float* audio, int batch, int samples, float* logprobs) override {
    {
      std::unique_lock<std::mutex> lock(r_->mutex);
      if (++r_->entered >= 2) r_->met = true;
      r_->met_cv.notify_all();
      r_->met_cv.wait_for(lock, std::chrono::seconds(60), [&] { return r_->met; });
    }
    inner_->forward(audio, batch, samples, logprobs);
  }

 private:
  std::unique_ptr<SegmentationEngine> inner_;
  std::shared_ptr<Rendezvous> r_;
};

std::vector<std::unique_ptr<SegmentationEngine>> two_lanes(std::shared_ptr<Rendezvous> r = {}) {
  std::vector<std::unique_ptr<SegmentationEngine>> engines;
  for (int i = 0; i < 2; ++i)
    engines.push_back(r ? std::make_unique<RendezvousEngine>(cpu_engine(), r) : cpu_engine());
  return engines;
}

// One channel's batch runs in one lane while another channel's batch runs in the other: the first
// window's forward call can only return once the second one's has begun.
TEST(SharedSegmenter, TwoBatchesAreInFlightAtOnce) {
  const auto audio = reference_recording();
  StreamSettings s;
  auto rendezvous = std::make_shared<Rendezvous>();
  auto scheduler = std::make_shared<SharedScheduler>(two_lanes(rendezvous), 1);
  EXPECT_EQ(scheduler->lanes(), 2);
  EXPECT_NE(scheduler->description().find("2 batches in flight"), std::string::npos)
      << scheduler->description();
  SharedSegmenterChannel a(scheduler, s, SharedChannelOptions{4, false, 0}),
      b(scheduler, s, SharedChannelOptions{4, false, 0});
  WindowBuffer wb(kWindowSamples, step_samples(s));
  std::vector<WindowJob> windows;
  wb.push(audio.data(), 11 * kSampleRate, [&](WindowJob&& w) { windows.push_back(std::move(w)); });
  ASSERT_GE(windows.size(), 1u);
  a.submit(windows[0]);
  b.submit(windows[0]);
  a.drain();
  b.drain();
  EXPECT_TRUE(rendezvous->met) << "the second batch never began while the first one ran";
  EXPECT_EQ(scheduler->max_in_flight(), 2);
  EXPECT_EQ(scheduler->batches_run(), 2u);
  EXPECT_EQ(a.processed_windows(), 1u);
  EXPECT_EQ(b.processed_windows(), 1u);
}

// With two lanes each channel's windows still reach its timeline in order and from one thread at
// a time: three different streams, side by side, give what each gives alone.
TEST(SharedSegmenter, BatchesInFlightGiveWhatEachStreamGivesAlone) {
  const auto recordings = three_recordings();
  StreamSettings s;
  auto scheduler = std::make_shared<SharedScheduler>(two_lanes(), 2);
  std::vector<std::vector<SpeakerChange>> got(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&, i] {
      SharedSegmenterChannel c(scheduler, s, SharedChannelOptions{4, false, 0});
      got[i] = stream(c, recordings[i], s);
      EXPECT_TRUE(c.error().empty()) << c.error();
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 3; ++i)
    expect_same(got[i], alone(recordings[i], s), "recording " + std::to_string(i));
  std::printf("[ lanes    ] %llu forward calls, at most %d in flight at once\n",
              static_cast<unsigned long long>(scheduler->batches_run()),
              scheduler->max_in_flight());
}

// Identity by voice with two lanes: the one voice encoder serves both, one call at a time, and
// three channels side by side give what one gives alone.
TEST(SharedSegmenter, BatchesInFlightShareTheVoiceEncoder) {
  const VoiceCase& v = twenty_seconds();
  ASSERT_FALSE(v.alone.empty());
  auto scheduler = std::make_shared<SharedScheduler>(two_lanes(), 2, cpu_voice());
  expect_voice_channels_as_alone(scheduler, 3);
}

// Helpers stitch a batch's channels beside the worker, identity by voice included: their voice
// rounds still wait for each other and share the encoder's calls, and three channels side by
// side give what one gives alone.
TEST(SharedSegmenter, HelpersStitchChannelsWithIdentityByVoice) {
  const VoiceCase& v = twenty_seconds();
  ASSERT_FALSE(v.alone.empty());
  auto scheduler = std::make_shared<SharedScheduler>(cpu_engine(), 4, cpu_voice(),
                                                     SharedScheduler::kDefaultOutageWait, 3);
  EXPECT_EQ(scheduler->stitch_threads(), 3);
  expect_voice_channels_as_alone(scheduler, 3);
}

}  // namespace
}  // namespace speakerseg
