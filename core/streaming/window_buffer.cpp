#include "streaming/window_buffer.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <stdexcept>

namespace speakerseg {

WindowSamples::WindowSamples(std::vector<float> own) {
  auto kept = std::make_shared<const std::vector<float>>(std::move(own));
  data_ = kept->data();
  size_ = kept->size();
  owner_ = std::move(kept);
}

const std::shared_ptr<AudioBlockPool>& AudioBlockPool::of_size(size_t block_samples) {
  static std::mutex mutex;
  // Never destroyed: a window may outlive everything else, static objects included.
  static auto* pools = new std::map<size_t, std::shared_ptr<AudioBlockPool>>;
  std::lock_guard<std::mutex> lock(mutex);
  auto& pool = (*pools)[block_samples];
  if (!pool) pool = std::make_shared<AudioBlockPool>(block_samples);
  return pool;
}

std::shared_ptr<float> AudioBlockPool::take(const std::shared_ptr<AudioBlockPool>& pool,
                                            uint64_t* id) {
  static std::atomic<uint64_t> last_id{0};
  *id = last_id.fetch_add(1, std::memory_order_relaxed) + 1;
  std::unique_ptr<float[]> block;
  {
    std::lock_guard<std::mutex> lock(pool->mutex_);
    if (!pool->spares_.empty()) {
      block = std::move(pool->spares_.back());
      pool->spares_.pop_back();
    } else {
      ++pool->allocated_;
    }
  }
  if (!block) block = std::make_unique<float[]>(pool->block_samples_);
  // The deleter keeps the pool alive: a window may outlive its buffer.
  return std::shared_ptr<float>(block.release(), [pool](float* b) { pool->give_back(b); });
}

void AudioBlockPool::give_back(float* block) {
  std::unique_ptr<float[]> owned(block);
  std::lock_guard<std::mutex> lock(mutex_);
  if (spares_.size() < kSpares) spares_.push_back(std::move(owned));
}

uint64_t AudioBlockPool::allocated() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return allocated_;
}

WindowBuffer::WindowBuffer(int window_samples, int step_samples, int first_end)
    : window_(window_samples),
      step_(step_samples),
      first_end_(first_end == 0 ? step_samples : first_end),
      last_end_(first_end_ - step_) {
  if (window_samples <= 0 || step_samples <= 0 || step_samples > window_samples)
    throw std::invalid_argument("WindowBuffer: need 0 < step <= window");
  pool_ = AudioBlockPool::of_size(block_samples(window_samples, step_samples));
  reset(first_end_);
}

void WindowBuffer::start_block(int64_t base) {
  uint64_t id = 0;
  std::shared_ptr<float> next = AudioBlockPool::take(pool_, &id);
  const int64_t zeros = std::clamp<int64_t>(-base, 0, total_ - base);
  std::fill_n(next.get(), zeros, 0.f);
  if (block_ && total_ > base + zeros)
    std::copy(block_.get() + (base + zeros - base_), block_.get() + (total_ - base_),
              next.get() + zeros);
  // The new block's samples up to total_ are the old one's from `base` on (zeros included).
  block_origin_ = {id, 0, block_ ? block_origin_.block : 0,
                   block_ ? static_cast<size_t>(base - base_) : 0,
                   block_ ? static_cast<size_t>(total_ - base) : 0};
  block_ = std::move(next);
  base_ = base;
}

void WindowBuffer::push(const float* samples, size_t n, const WindowFn& on_window) {
  const int64_t capacity = static_cast<int64_t>(pool_->block_samples());
  size_t done = 0;
  while (done < n) {
    const int64_t boundary = last_end_ + step_;
    const size_t take = static_cast<size_t>(std::min<int64_t>(boundary - total_, n - done));
    // The block keeps the newest window's worth and the audio up to the next boundary (take <=
    // step <= window), so a full one makes room by starting the next from the newest window.
    if (total_ + static_cast<int64_t>(take) - base_ > capacity) start_block(total_ - window_);
    float* at = block_.get() + (total_ - base_);
    if (samples)
      std::copy_n(samples + done, take, at);
    else
      std::fill_n(at, take, 0.f);
    total_ += static_cast<int64_t>(take);
    done += take;
    if (total_ == boundary) emit(on_window);
  }
}

void WindowBuffer::flush_tail(const WindowFn& on_window) {
  if (has_tail()) emit(on_window);
}

void WindowBuffer::emit(const WindowFn& on_window) {
  WindowJob w;
  w.start = total_ - window_;
  w.end = total_;
  // The block holds every sample from base_ <= total_ - window_ on: the window is a view of it.
  WindowOrigin origin = block_origin_;
  origin.offset = static_cast<size_t>(w.start - base_);
  w.samples =
      WindowSamples(block_, origin, block_.get() + origin.offset, static_cast<size_t>(window_));
  last_end_ = total_;
  on_window(std::move(w));
}

void WindowBuffer::reset() {
  // A fresh block: windows still held keep showing the old one. It starts a window before
  // sample 0, zeros, so that the first windows are zero-padded on the left, and more zeros by the
  // buffer's phase: streams started together, given phases of their own, then fill their blocks
  // (and copy a window's worth into the next) at different times, not all in the same instant.
  const int64_t room = static_cast<int64_t>(pool_->block_samples()) - window_ - step_;
  const int64_t stagger = room * (step_ - first_end_) / step_;
  total_ = 0;
  block_.reset();
  start_block(-window_ - stagger);
  last_end_ = first_end_ - step_;
}

void WindowBuffer::reset(int first_end) {
  if (first_end < 1 || first_end > step_)
    throw std::invalid_argument("WindowBuffer: need 0 < first_end <= step");
  first_end_ = first_end;
  reset();
}

int staggered_first_end(int step_samples, uint64_t index) {
  const double golden = 0.6180339887498949;
  const double fraction = std::fmod(static_cast<double>(index % 1000003) * golden, 1.0);
  const int first_end = step_samples - static_cast<int>(fraction * step_samples);
  return std::clamp(first_end, 1, step_samples);
}

}  // namespace speakerseg
