#include "async_segmenter.h"

#include <algorithm>

namespace speakerseg {
namespace {

SharedChannelOptions channel_options(const AsyncSegmenterOptions& o) {
  SharedChannelOptions c;
  c.max_queue = std::max(std::max(1, o.batch_size), o.max_queue);
  c.drop_when_late = o.drop_when_late;
  c.max_batch_wait = 0;  // one stream: nobody else's windows to wait for
  return c;
}

}  // namespace

AsyncSegmenter::AsyncSegmenter(std::unique_ptr<SegmentationEngine> engine,
                               const StreamSettings& settings, const AsyncSegmenterOptions& options)
    : scheduler_(std::make_shared<SharedScheduler>(std::move(engine), options.batch_size)),
      channel_(scheduler_, settings, channel_options(options)) {}

AsyncSegmenter::~AsyncSegmenter() = default;

void AsyncSegmenter::submit(WindowJob job) {
  channel_.submit(std::move(job));
}
std::vector<SpeakerChange> AsyncSegmenter::take_changes() {
  return channel_.take_changes();
}
void AsyncSegmenter::drain() {
  channel_.drain();
}
void AsyncSegmenter::finish(int64_t end) {
  channel_.finish(end);
}
void AsyncSegmenter::reset() {
  channel_.reset();
}
std::string AsyncSegmenter::error() const {
  return channel_.error();
}
uint64_t AsyncSegmenter::dropped_windows() const {
  return channel_.dropped_windows();
}
size_t AsyncSegmenter::queue_depth() const {
  return channel_.queue_depth();
}
int AsyncSegmenter::last_batch_size() const {
  return channel_.last_batch_size();
}
int AsyncSegmenter::last_shared_batch_size() const {
  return channel_.last_shared_batch_size();
}
double AsyncSegmenter::current_delay_seconds() const {
  return channel_.current_delay_seconds();
}

}  // namespace speakerseg
