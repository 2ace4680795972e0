// One loaded model and one scheduler per (model, engine kind, device, options) in the process:
// every element that asks for the same key shares them. The pool holds weak references only, so
// the engine and its worker thread go when the last user drops its shared_ptr.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "scheduling/shared_segmenter.h"

namespace speakerseg {

struct EngineKey {
  std::string model_path;
  std::string kind;     // "cpu", "cuda"
  std::string device;   // "" for the CPU, the GPU index for CUDA
  std::string options;  // everything else that changes the engine: precision, threads, ...

  bool operator<(const EngineKey& o) const {
    return std::tie(model_path, kind, device, options) <
           std::tie(o.model_path, o.kind, o.device, o.options);
  }
};

class EnginePool {
 public:
  using Factory = std::function<std::unique_ptr<SegmentationEngine>()>;
  using VoiceFactory = std::function<std::unique_ptr<VoiceEncoder>()>;

  // The pool every element of the process uses; tests may make their own.
  static EnginePool& instance();

  // The scheduler for `key`, made with `make()` and `batch_size` if nobody holds one: later
  // callers share the first caller's engine and batch size. `make` runs under the pool's lock, so
  // two elements starting together load the model once; an exception from it leaves the pool as
  // it was. `make_voice`, when given, makes the scheduler's voice encoder the same way (the key
  // must then say which voice model).
  // `outage_wait`: the scheduler's (SharedScheduler), for the first caller too. `lanes`: batches
  // in flight at once, each on an engine `make` makes (the key must then say how many);
  // `stitch_threads`: the scheduler's (the key must say that too).
  std::shared_ptr<SharedScheduler> get(const EngineKey& key, int batch_size, const Factory& make,
                                       const VoiceFactory& make_voice = nullptr,
                                       double outage_wait = SharedScheduler::kDefaultOutageWait,
                                       int lanes = 1, int stitch_threads = 1);

  // Schedulers alive now.
  size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::map<EngineKey, std::weak_ptr<SharedScheduler>> schedulers_;
};

}  // namespace speakerseg
