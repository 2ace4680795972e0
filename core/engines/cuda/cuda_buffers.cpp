#include "engines/cuda/cuda_buffers.h"

#include "engines/cuda/cuda_errors.h"
#include "engines/cuda/plan_policy.h"
#include "engines/segmentation_engine.h"

namespace speakerseg::cuda {

void PinnedBuffer::reserve(size_t bytes, const char* what) {
  if (bytes <= bytes_) return;
  release();
  const cudaError_t e = cudaMallocHost(&data_, bytes);
  if (e != cudaSuccess) {
    data_ = nullptr;
    cudaGetLastError();
    fail(std::string("cannot allocate ") + mib(bytes) + " of pinned host memory for " + what +
         ": " + cuda_text(e) + "; lower the batch size");
  }
  bytes_ = bytes;
}

void PinnedBuffer::release() noexcept {
  if (data_) cudaFreeHost(data_);
  data_ = nullptr;
  bytes_ = 0;
}

bool DeviceArena::reserve(size_t bytes, const std::string& what, bool fill_nan, cudaStream_t stream,
                          const std::function<void()>& on_growth) {
  if (data_ && bytes <= bytes_) return false;
  if (on_growth) on_growth();
  release();
  const cudaError_t e = cudaMalloc(&data_, bytes);
  if (e != cudaSuccess) {
    data_ = nullptr;
    if (e == cudaErrorMemoryAllocation) out_of_memory(what, bytes);
    check(e, ("the device arena for " + what).c_str());
  }
  bytes_ = bytes;
  if (fill_nan) {
    check(cudaMemsetAsync(data_, 0xff, bytes, stream), "filling the arena with NaN");
    check(cudaStreamSynchronize(stream), "filling the arena with NaN");
  }
  return true;
}

void DeviceArena::release() noexcept {
  if (data_) cudaFree(data_);
  data_ = nullptr;
  bytes_ = 0;
}

void guarded_call(int device, std::string* broken, const std::function<void()>& call) {
  if (!broken->empty()) fail("an earlier CUDA error left the device unusable: " + *broken);
  // The calling thread may not be the one that built the engine (the inference worker). The
  // device stays current there afterwards: giving a thread back "its" device would make one
  // that never chose any create a context on GPU 0.
  check(cudaSetDevice(device), "cudaSetDevice");
  try {
    call();
  } catch (const EngineError& e) {
    const cudaError_t sticky = cudaDeviceSynchronize();
    if (sticky != cudaSuccess && sticky != cudaErrorMemoryAllocation) *broken = e.what();
    cudaGetLastError();
    throw;
  }
}

}  // namespace speakerseg::cuda
