// The CUDA engine's audio kept on the device (core/engines/cuda/device_audio_cache.h), on every
// machine: the device's memory is a host array here, the plan's uploads are applied to it as the
// engine applies them, and every window read back from it must be the window the stream cut.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "engines/cuda/device_audio_cache.h"
#include "streaming/window_buffer.h"

namespace speakerseg {
namespace {

using cuda::DeviceAudioCache;

// The device's slots, as the engine fills them from a plan, and the windows it then reads.
class DeviceSlots {
 public:
  explicit DeviceSlots(const DeviceAudioCache& cache) : cache_(cache) {}
  // Applies the plan's uploads, then returns each window as read from its slot.
  std::vector<std::vector<float>> run(const DeviceAudioCache::Plan& plan, size_t samples) {
    const size_t n = cache_.slot_samples();
    // NaN where nothing was uploaded: a window that reads such a sample fails the comparison.
    memory_.resize(cache_.slots_used() * n, std::numeric_limits<float>::quiet_NaN());
    // Packed as the engine packs them, then each from its place in the pack.
    std::vector<float> packed(plan.uploaded);
    DeviceAudioCache::pack(plan, packed.data());
    size_t from = 0;
    for (const auto& u : plan.uploads) {
      EXPECT_LE(u.at + u.count, n);
      std::copy_n(packed.begin() + static_cast<std::ptrdiff_t>(from), u.count,
                  memory_.begin() + static_cast<std::ptrdiff_t>(u.slot * n + u.at));
      from += u.count;
    }
    // After every upload, as the engine's second step; no carry reads what another writes.
    for (const auto& c : plan.carries) {
      EXPECT_LE(c.from_at + c.count, n);
      EXPECT_LE(c.at + c.count, n);
      for (const auto& d : plan.carries) EXPECT_NE(d.to, c.from);
      std::copy_n(memory_.begin() + static_cast<std::ptrdiff_t>(c.from * n + c.from_at), c.count,
                  memory_.begin() + static_cast<std::ptrdiff_t>(c.to * n + c.at));
    }
    std::vector<std::vector<float>> out;
    for (const auto& [slot, at] : plan.windows) {
      const auto first = memory_.begin() + static_cast<std::ptrdiff_t>(slot * n + at);
      out.emplace_back(first, first + static_cast<std::ptrdiff_t>(samples));
    }
    return out;
  }

 private:
  const DeviceAudioCache& cache_;
  std::vector<float> memory_;
};

constexpr int kWindow = 400, kStep = 40;  // a window of ten steps, as 10 s every 1 s

// A stream of distinct samples, cut as the element cuts it.
struct Stream {
  explicit Stream(uint32_t seed, int first_end = kStep) : windows(kWindow, kStep, first_end) {
    next = static_cast<float>(seed) * 1e5f;
  }
  // The windows that `samples` more of the stream give.
  std::vector<WindowJob> push(int samples) {
    std::vector<float> x(static_cast<size_t>(samples));
    for (float& v : x) v = next++;
    std::vector<WindowJob> out;
    windows.push(x.data(), x.size(), [&](WindowJob&& w) { out.push_back(std::move(w)); });
    return out;
  }
  WindowBuffer windows;
  float next;
};

void expect_windows(const std::vector<WindowJob>& batch,
                    const std::vector<std::vector<float>>& read) {
  ASSERT_EQ(read.size(), batch.size());
  for (size_t i = 0; i < batch.size(); ++i)
    ASSERT_TRUE(std::equal(read[i].begin(), read[i].end(), batch[i].samples.begin()))
        << "window " << i << " read back from the device is not the window the stream cut";
}

const DeviceAudioCache::Plan& plan_of(DeviceAudioCache& cache, const std::vector<WindowJob>& b) {
  std::vector<const float*> windows;
  std::vector<WindowOrigin> origins;
  for (const auto& w : b) {
    windows.push_back(w.samples.data());
    origins.push_back(w.samples.origin());
  }
  return cache.plan(windows.data(), origins.data(), static_cast<int>(b.size()), kWindow);
}

// One stream, a window at a time: the first window is uploaded whole, every later one costs its
// step, and where the stream's block fills, the next block's first window is copied on the
// device from the previous one.
TEST(DeviceAudioCache, AStreamUploadsEachStepOnce) {
  DeviceAudioCache cache(2 * kWindow, 4);
  DeviceSlots device(cache);
  Stream s(1);
  for (int i = 0; i < 100; ++i) {
    const auto batch = s.push(kStep);
    ASSERT_EQ(batch.size(), 1u);
    const auto& plan = plan_of(cache, batch);
    EXPECT_EQ(plan.uploaded, static_cast<size_t>(i == 0 ? kWindow : kStep)) << "window " << i;
    expect_windows(batch, device.run(plan, kWindow));
  }
  EXPECT_EQ(cache.samples_uploaded(), static_cast<uint64_t>(kWindow + 99 * kStep));
  EXPECT_GT(cache.samples_carried(), 0u);  // blocks did fill
  EXPECT_EQ(cache.windows_planned(), 100u);
}

// Many streams in batches of whatever is waiting, windows dropped now and then, fewer slots than
// streams (so blocks are evicted and come back), windows of their own mixed in: every window
// read back is the one cut.
TEST(DeviceAudioCache, AnyBatchesReadBackTheirWindows) {
  for (size_t slots : {size_t{6}, size_t{40}}) {
    SCOPED_TRACE("slots " + std::to_string(slots));
    DeviceAudioCache cache(2 * kWindow, slots);
    DeviceSlots device(cache);
    std::mt19937 rng(7);
    std::vector<Stream> streams;
    for (uint32_t i = 0; i < 12; ++i) streams.emplace_back(i + 1, 1 + static_cast<int>(i) * 3);
    std::vector<WindowJob> waiting;
    for (int round = 0; round < 300; ++round) {
      auto& s = streams[rng() % streams.size()];
      for (auto& w : s.push(static_cast<int>(rng() % (2 * kStep))))
        if (rng() % 9 != 0) waiting.push_back(std::move(w));  // some are dropped
      if (rng() % 11 == 0) {
        std::vector<float> own(kWindow);
        for (float& v : own) v = static_cast<float>(rng() % 1000);
        waiting.push_back(WindowJob{0, kWindow, std::move(own)});
      }
      if (waiting.size() >= 5 || (rng() % 3 == 0 && !waiting.empty())) {
        const size_t n = std::min<size_t>(waiting.size(), std::min<size_t>(slots / 2, 5));
        std::vector<WindowJob> batch(std::make_move_iterator(waiting.begin()),
                                     std::make_move_iterator(waiting.begin() + n));
        waiting.erase(waiting.begin(), waiting.begin() + static_cast<std::ptrdiff_t>(n));
        expect_windows(batch, device.run(plan_of(cache, batch), kWindow));
      }
    }
    EXPECT_LE(cache.slots_used(), slots);
    EXPECT_GT(cache.samples_carried(), 0u);  // blocks filled, and carried on the device
  }
}

// With a slot for every stream, a batch of every stream's next window costs a step per window.
TEST(DeviceAudioCache, ABatchOfEveryStreamCostsAStepAWindow) {
  DeviceAudioCache cache(2 * kWindow, 64);
  DeviceSlots device(cache);
  std::vector<Stream> streams;
  for (uint32_t i = 0; i < 16; ++i) streams.emplace_back(i + 1);
  for (int round = 0; round < 5; ++round) {
    std::vector<WindowJob> batch;
    for (auto& s : streams)
      for (auto& w : s.push(kStep)) batch.push_back(std::move(w));
    ASSERT_EQ(batch.size(), streams.size());
    const auto& plan = plan_of(cache, batch);
    EXPECT_EQ(plan.uploaded, streams.size() * (round == 0 ? kWindow : kStep));
    expect_windows(batch, device.run(plan, kWindow));
  }
}

// Slots follow the streams, not the running time: a block's slot is free again once its stream has
// moved on to the next block, and a window of its own frees its slot after its batch. Three
// streams over 300 s (20 blocks each) with windows of their own among them hold a few slots, not
// one per block ever seen.
TEST(DeviceAudioCache, SlotsFollowTheStreamsNotTheTime) {
  DeviceAudioCache cache(2 * kWindow, 64);
  DeviceSlots device(cache);
  std::vector<Stream> streams;
  for (uint32_t i = 0; i < 3; ++i) streams.emplace_back(i + 1, 1 + static_cast<int>(i) * 7);
  for (int round = 0; round < 300; ++round) {
    std::vector<WindowJob> batch;
    for (auto& s : streams)
      for (auto& w : s.push(kStep)) batch.push_back(std::move(w));
    if (round % 5 == 0) batch.push_back(WindowJob{0, kWindow, std::vector<float>(kWindow, 1.f)});
    expect_windows(batch, device.run(plan_of(cache, batch), kWindow));
  }
  EXPECT_GT(cache.samples_carried(), 0u);
  EXPECT_LE(cache.slots_holding(), 2 * streams.size());
  EXPECT_LE(cache.slots_used(), 3 * streams.size() + 1);
}

TEST(DeviceAudioCache, RefusesWhatItCannotHold) {
  DeviceAudioCache cache(2 * kWindow, 4);
  std::vector<float> audio(3 * kWindow, 1.f);
  const float* windows[3] = {audio.data(), audio.data() + kWindow, audio.data() + 2 * kWindow};
  EXPECT_THROW(cache.plan(windows, nullptr, 3, kWindow), EngineError);      // needs 6 slots
  EXPECT_THROW(cache.plan(windows, nullptr, 1, 3 * kWindow), EngineError);  // longer than a slot
  EXPECT_EQ(cache.plan(windows, nullptr, 2, kWindow).uploaded, 2u * kWindow);
  EXPECT_THROW(DeviceAudioCache(0, 1), std::invalid_argument);
}

}  // namespace
}  // namespace speakerseg
