// The most recent 10 s of a stream, cut into windows that end every `step` samples. Windows show
// the buffer's audio where it keeps it (WindowSamples), not copies; what a window shows never
// changes, however long it is kept. The first
// windows are zero-padded on the left, so that results start after `step` and not after 10 s.
// Sample positions count from the first sample pushed since the last reset.
//
// `first_end` (1..step, default step) places the first window's end, and so the phase of all of
// them: streams started together that are given different phases do not all need inference at
// the same instant.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "engines/window_origin.h"
#include "model/model_spec.h"

namespace speakerseg {

// A window's samples where its stream keeps them: a view into audio the stream shares between
// its overlapping windows (a 10 s window every second would otherwise copy each sample ten
// times), kept alive by `owner` for as long as the window is.
class WindowSamples {
 public:
  WindowSamples() = default;
  // A window of its own (a copy the caller made).
  WindowSamples(std::vector<float> own);  // NOLINT: implicit, as the vector it replaces
  // `size` samples at `data`, where `origin` says in a block that `owner` keeps alive.
  WindowSamples(std::shared_ptr<const void> owner, const WindowOrigin& origin, const float* data,
                size_t size)
      : owner_(std::move(owner)), origin_(origin), data_(data), size_(size) {}

  const float* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const float* begin() const { return data_; }
  const float* end() const { return data_ + size_; }
  float operator[](size_t i) const { return data_[i]; }
  float back() const { return data_[size_ - 1]; }
  // Where the window lies in audio its stream shares (block 0: a window of its own); the block
  // starts at data() - origin().offset.
  const WindowOrigin& origin() const { return origin_; }

 private:
  std::shared_ptr<const void> owner_;
  WindowOrigin origin_;
  const float* data_ = nullptr;
  size_t size_ = 0;
};

// One window of a stream, handed from WindowBuffer to whoever runs the network on it.
struct WindowJob {
  int64_t start = 0;  // stream position of the first sample (negative: left zero padding)
  int64_t end = 0;    // stream position just past the last sample
  WindowSamples samples;

  // A copy of a full window of the model (kWindowSamples) from stream position `start`.
  static WindowJob from_window(int64_t start, const float* samples) {
    return {start, start + kWindowSamples, std::vector<float>(samples, samples + kWindowSamples)};
  }
};

// Blocks of audio of one size for every WindowBuffer of the process, recycled: a block comes
// back when the last window that shows it is gone (on whichever thread that is), and the next
// buffer that fills one takes it instead of touching fresh memory (a page fault per 4 KB). One
// pool for all streams, so that a stream holds about one block, not one and a spare.
class AudioBlockPool {
 public:
  // The pool of blocks of `block_samples` floats (made on first use, kept for the process).
  static const std::shared_ptr<AudioBlockPool>& of_size(size_t block_samples);
  // A block (contents undefined), returned here when released, and its id: a new one each time
  // it is taken, never 0.
  static std::shared_ptr<float> take(const std::shared_ptr<AudioBlockPool>& pool, uint64_t* id);
  size_t block_samples() const { return block_samples_; }
  // Blocks allocated so far (not taken from the spares).
  uint64_t allocated() const;

  explicit AudioBlockPool(size_t block_samples) : block_samples_(block_samples) {}

 private:
  void give_back(float* block);
  // Enough for the streams whose blocks fill at about the same time; past that, memory goes back.
  static constexpr size_t kSpares = 64;
  const size_t block_samples_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<float[]>> spares_;
  uint64_t allocated_ = 0;
};

class WindowBuffer {
 public:
  // Called with each window: window_samples samples from position `start` (negative while the
  // stream is shorter than a window), the caller's to keep (a queue takes it without a copy).
  using WindowFn = std::function<void(WindowJob&& window)>;

  WindowBuffer(int window_samples, int step_samples, int first_end = 0);
  // One writer per block: a copy would write into the block its original's windows show.
  WindowBuffer(const WindowBuffer&) = delete;
  WindowBuffer& operator=(const WindowBuffer&) = delete;
  WindowBuffer(WindowBuffer&&) = default;
  WindowBuffer& operator=(WindowBuffer&&) = default;

  // Appends samples (null: silence) and calls `on_window` for every step boundary they cross, in
  // order, so a buffer longer than a step loses no window.
  void push(const float* samples, size_t n, const WindowFn& on_window);

  // Samples have arrived since the end of the last window (for the final window at EOS).
  bool has_tail() const { return total_ > std::max<int64_t>(last_end_, 0); }
  // Calls `on_window` once with the window ending at the newest sample.
  void flush_tail(const WindowFn& on_window);

  int64_t total() const { return total_; }
  int window_samples() const { return window_; }
  int step_samples() const { return step_; }
  // Forgets every sample: the next one is sample 0 again.
  void reset();
  // The same, and the first window now ends at sample `first_end` (0 < first_end <= step).
  void reset(int first_end);

  // Samples a block of a buffer holds: windows are cut from it until it is full, then the newest
  // window's worth is copied into the next one. With half a window (or a step) of room past a
  // window, a sample is copied about three times (in, and twice on), not once per window that
  // shows it (ten times at 10 s windows every second), and a stream holds 15 s, not 10 s plus a
  // copy per window waiting. At most two windows.
  static size_t block_samples(int window_samples, int step_samples) {
    return static_cast<size_t>(window_samples) +
           static_cast<size_t>(std::max(step_samples, window_samples / 2));
  }
  // The blocks of this buffer's size allocated in the process so far.
  uint64_t blocks_allocated() const { return pool_->allocated(); }

 private:
  void emit(const WindowFn& on_window);
  // A fresh block that starts at stream position `base`, holding what the current one has from
  // there on (zeros before sample 0).
  void start_block(int64_t base);

  int window_, step_, first_end_;
  std::shared_ptr<AudioBlockPool> pool_;
  std::shared_ptr<float> block_;  // samples base_ .. total_ - 1 at block_[0 .. total_ - base_)
  WindowOrigin block_origin_;     // the block's id, and what it carries of the one before
  int64_t base_ = 0;
  int64_t total_ = 0, last_end_;  // last_end_ < 0 before the first window: first_end - step
};

// A first_end for the index-th of several streams: the golden-ratio sequence spreads any number of
// streams, added one by one, near evenly over a step. Index 0 gets `step` (the unstaggered phase).
int staggered_first_end(int step_samples, uint64_t index);

}  // namespace speakerseg
