#include "scheduling/async_segmenter.h"

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

std::unique_ptr<SharedSegmenterChannel> make_async_segmenter(
    std::unique_ptr<SegmentationEngine> engine, const StreamSettings& settings,
    const AsyncSegmenterOptions& options, std::unique_ptr<VoiceEncoder> voice,
    std::shared_ptr<const Voiceprints> enrolled) {
  return std::make_unique<SharedSegmenterChannel>(
      std::make_shared<SharedScheduler>(std::move(engine), options.batch_size, std::move(voice),
                                        options.outage_wait),
      settings, channel_options(options), std::move(enrolled));
}

}  // namespace speakerseg
