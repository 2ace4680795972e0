#include "async_segmenter.h"

#include <algorithm>

namespace speakerseg {

AsyncSegmenter::AsyncSegmenter(std::unique_ptr<SegmentationEngine> engine,
                               const StreamSettings& settings, const AsyncSegmenterOptions& options)
    : engine_(std::move(engine)), runner_(*engine_, settings), options_(options) {
  options_.batch_size = std::max(1, options_.batch_size);
  options_.max_queue = std::max(options_.batch_size, options_.max_queue);
  worker_ = std::thread([this] { loop(); });
}

AsyncSegmenter::~AsyncSegmenter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_worker_.notify_all();
  worker_.join();
}

void AsyncSegmenter::submit(WindowJob job) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!error_.empty()) return;
  if (options_.drop_when_late) {
    while (static_cast<int>(queue_.size()) >= options_.max_queue) {
      queue_.pop_front();
      ++dropped_;
    }
  } else {
    wake_host_.wait(lock, [&] {
      return static_cast<int>(queue_.size()) < options_.max_queue || !error_.empty();
    });
  }
  queue_.push_back(std::move(job));
  wake_worker_.notify_one();
}

void AsyncSegmenter::loop() {
  std::vector<WindowJob> batch;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_worker_.wait(lock, [&] { return stop_ || (!queue_.empty() && error_.empty()); });
    if (stop_) return;
    batch.clear();
    while (!queue_.empty() && static_cast<int>(batch.size()) < options_.batch_size) {
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    busy_ = true;
    const uint64_t generation = generation_;
    wake_host_.notify_all();  // room in the queue
    lock.unlock();
    std::string failure;
    std::vector<SpeakerChange> changes;
    try {
      runner_.run(batch);
      changes = runner_.take_changes();
    } catch (const std::exception& e) {
      failure = e.what();
    }
    lock.lock();
    busy_ = false;
    last_batch_ = static_cast<int>(batch.size());
    if (!failure.empty() && error_.empty()) error_ = failure;
    if (generation == generation_)
      for (auto& c : changes) ready_.push_back(std::move(c));
    wake_host_.notify_all();
  }
}

std::vector<SpeakerChange> AsyncSegmenter::take_changes() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<SpeakerChange> out;
  out.swap(ready_);
  return out;
}

void AsyncSegmenter::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  wake_host_.wait(lock, [&] { return (queue_.empty() || !error_.empty()) && !busy_; });
}

void AsyncSegmenter::finish(int64_t end) {
  std::unique_lock<std::mutex> lock(mutex_);
  wake_host_.wait(lock, [&] { return (queue_.empty() || !error_.empty()) && !busy_; });
  // The worker is idle and holds no batch: the timeline is ours while we hold the lock.
  runner_.finish(end);
  for (auto& c : runner_.take_changes()) ready_.push_back(std::move(c));
}

void AsyncSegmenter::reset() {
  std::unique_lock<std::mutex> lock(mutex_);
  queue_.clear();
  ++generation_;
  wake_host_.wait(lock, [&] { return !busy_; });
  runner_.reset();
  ready_.clear();
  wake_host_.notify_all();
}

std::string AsyncSegmenter::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

uint64_t AsyncSegmenter::dropped_windows() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_;
}

size_t AsyncSegmenter::queue_depth() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

int AsyncSegmenter::last_batch_size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_batch_;
}

}  // namespace speakerseg
