#include "scheduling/engine_pool.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace speakerseg {

EnginePool& EnginePool::instance() {
  // Never destroyed: elements may drop their schedulers during static destruction.
  static EnginePool* pool = new EnginePool;
  return *pool;
}

std::shared_ptr<SharedScheduler> EnginePool::get(const EngineKey& key, int batch_size,
                                                 const Factory& make,
                                                 const VoiceFactory& make_voice, double outage_wait,
                                                 int lanes, int stitch_threads) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Entries of released schedulers would otherwise pile up with every new key.
  for (auto it = schedulers_.begin(); it != schedulers_.end();)
    it = it->second.expired() ? schedulers_.erase(it) : std::next(it);
  auto found = schedulers_.find(key);
  if (found != schedulers_.end())
    if (auto alive = found->second.lock()) return alive;
  std::vector<std::unique_ptr<SegmentationEngine>> engines;
  for (int i = 0; i < std::max(1, lanes); ++i) {
    engines.push_back(make());
    if (!engines.back()) throw EngineError("EnginePool: the engine factory gave no engine");
  }
  auto scheduler = std::make_shared<SharedScheduler>(std::move(engines), batch_size,
                                                     make_voice ? make_voice() : nullptr,
                                                     outage_wait, stitch_threads);
  schedulers_[key] = scheduler;
  return scheduler;
}

size_t EnginePool::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (const auto& entry : schedulers_)
    if (!entry.second.expired()) ++n;
  return n;
}

}  // namespace speakerseg
