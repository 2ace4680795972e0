#include "scheduling/engine_pool.h"

#include <utility>

namespace speakerseg {

EnginePool& EnginePool::instance() {
  // Never destroyed: elements may drop their schedulers during static destruction.
  static EnginePool* pool = new EnginePool;
  return *pool;
}

std::shared_ptr<SharedScheduler> EnginePool::get(const EngineKey& key, int batch_size,
                                                 const Factory& make,
                                                 const VoiceFactory& make_voice,
                                                 double outage_wait) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Entries of released schedulers would otherwise pile up with every new key.
  for (auto it = schedulers_.begin(); it != schedulers_.end();)
    it = it->second.expired() ? schedulers_.erase(it) : std::next(it);
  auto found = schedulers_.find(key);
  if (found != schedulers_.end())
    if (auto alive = found->second.lock()) return alive;
  auto engine = make();
  if (!engine) throw EngineError("EnginePool: the engine factory gave no engine");
  auto scheduler = std::make_shared<SharedScheduler>(
      std::move(engine), batch_size, make_voice ? make_voice() : nullptr, outage_wait);
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
