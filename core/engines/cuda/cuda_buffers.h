// Inside the CUDA module only: the memory both engines manage the same way, and the guard both put
// around every call.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <string>

namespace speakerseg::cuda {

// A pinned host buffer for uploads and downloads (a pageable copy goes through the driver's own
// small staging buffer in pieces, and cannot overlap anything). Grown, never shrunk.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { release(); }
  // At least `bytes`; EngineError naming `what` where pinned memory runs out.
  void reserve(size_t bytes, const char* what);
  void release() noexcept;
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// One device allocation that every plan's buffers live in, at offsets of their own: scratch that
// belongs to whichever shape ran last. Grown (freed and allocated again) only when a shape needs
// more than any before.
class DeviceArena {
 public:
  DeviceArena() = default;
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  ~DeviceArena() { release(); }
  // Makes it at least `bytes`: false where it already was; true where it was taken anew (so that
  // graphs captured on the old addresses must go), `on_growth` having run before the old one was
  // freed. Out of memory names `what`. With `fill_nan`, a new arena is filled with NaN (on
  // `stream`), so that a stage reading what none wrote gives NaN, not yesterday's numbers.
  bool reserve(size_t bytes, const std::string& what, bool fill_nan, cudaStream_t stream,
               const std::function<void()>& on_growth);
  void release() noexcept;
  char* data() const { return static_cast<char*>(data_); }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Runs one call of an engine on `device`. A failed launch or a fault poisons the CUDA context:
// after one, *broken holds the reason and every later call fails with it instead of guessing.
void guarded_call(int device, std::string* broken, const std::function<void()>& call);

}  // namespace speakerseg::cuda
