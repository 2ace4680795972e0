// The CUDA engine's decisions that need no GPU to make, apart from the calls that carry them out,
// so that tests/engines/cuda/test_cuda_plan_policy.cpp checks them on every machine: which failures
// are "out of memory" and which are "this RNN algorithm cannot run here" (only the second may fall
// back to another algorithm), what a graph that fails to launch becomes, which batch sizes get a
// plan, and which windows cuDNN cannot take. No CUDA header: compiled into core.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "engines/cuda/cuda_engine.h"
#include "engines/segmentation_engine.h"

namespace speakerseg::cuda {

// Status values as plain numbers, so that this file and its test need no CUDA header;
// cuda_engine.cpp static_asserts each against the headers it is built with.
constexpr int kCudaErrorMemoryAllocation = 2;  // cudaErrorMemoryAllocation
constexpr int kCublasStatusAllocFailed = 3;    // CUBLAS_STATUS_ALLOC_FAILED
// cuDNN 9 made CUDNN_STATUS_ALLOC_FAILED an alias of the host one: a device allocation that fails
// inside cuDNN (a workspace, a persist-dynamic build) reports the other.
constexpr int kCudnnStatusHostAllocationFailed = 4003;  // ..._INTERNAL_ERROR_HOST_ALLOCATION_FAILED
constexpr int kCudnnStatusDeviceAllocationFailed =
    4004;  // ..._INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED

bool cudnn_status_is_out_of_memory(int status);

std::string mib(size_t bytes);  // "1.2 MiB"

// An allocation that failed: never a reason to try another RNN algorithm, since every one of them
// needs the same buffers but the RNN workspace.
class OutOfDeviceMemory : public EngineError {
 public:
  using EngineError::EngineError;
};

// An RNN algorithm that cuDNN cannot set up or run in this configuration (a persist-dynamic build
// without NVRTC, a persistent kernel this GPU refuses): under `auto`, a reason to fall back.
class RnnUnavailable : public EngineError {
 public:
  using EngineError::EngineError;
};

// "out of device memory: <what> needs X MiB on <device> (Y MiB free of Z MiB): lower ..." with
// what to lower; `asked` 0 when the library did not say how much it wanted.
std::string out_of_memory_message(const std::string& what, size_t asked, size_t free_bytes,
                                  size_t total_bytes, const std::string& device);

// The algorithm a segmentation plan of `batch` windows is given: the requested one, or under
// `auto` the fastest in the GPU check's "fastest LSTM algorithm per batch" table (an H200, graphs
// on): persist-dynamic up to 2, persist-static-small-h up to 128, standard above (256 unmeasured:
// plan_policy.cpp says why standard).
LstmAlgorithm wanted_lstm_algorithm(LstmAlgorithm requested, int batch);

// The voice encoder's LSTM is 256 wide, and cuDNN refused persist-static-small-h for it on the
// first GPU run (an H200: cudnnGetRNNTempSpaceSizes: CUDNN_STATUS_NOT_SUPPORTED) while it ran the
// segmentation LSTM's 128. Decided here, before any CUDA call, so that it is tested on every
// machine: an explicit request is refused, and `auto` never picks it.
// Throws EngineError, saying what to use instead, for an algorithm the voice encoder cannot run.
void check_voice_lstm_algorithm(LstmAlgorithm requested);
// The algorithm a voice encoder plan of `batch` partials is given: the requested one, or under
// `auto` the segmentation engine's choice with persist-static-small-h replaced by standard.
LstmAlgorithm wanted_voice_lstm_algorithm(LstmAlgorithm requested, int batch);

// The steps of giving a plan its RNN, as the engine carries them out.
class RnnSetupSteps {
 public:
  virtual ~RnnSetupSteps() = default;
  // Descriptor, persist-dynamic build, workspace size: RnnUnavailable where the algorithm cannot
  // be set up, OutOfDeviceMemory where memory ran out.
  virtual void setup(LstmAlgorithm algorithm) = 0;
  // The plan's buffers in the arena: OutOfDeviceMemory where it cannot grow.
  virtual void place() = 0;
  // One RNN run on zeros: RnnUnavailable where cuDNN refuses the algorithm at run time.
  virtual void probe() = 0;
};

// Sets up `wanted` (the requested algorithm, or auto's choice for the batch). Under `auto`, a
// non-standard choice is also probed, and where it is unavailable the warning names it and the
// batch, and standard is set up instead; an explicit request fails with its error. Memory
// failures always propagate, unwarned. Returns the algorithm the plan ended with.
LstmAlgorithm set_up_rnn(LstmAlgorithm requested, LstmAlgorithm wanted, int batch,
                         RnnSetupSteps& steps, const std::function<void(const std::string&)>& warn);

// A plan's CUDA graph over its life.
struct GraphSlot {
  bool captured = false;
  bool failed = false;  // capture or launch failed once: the plan stays eager
};

enum class PassMode { kEager, kReplay };

// One forward pass of a plan: replays its graph where it has one. A graph whose launch fails is
// retired for good (the same nodes on the same addresses fail the same way every time): `retire`
// destroys it, the pass runs eagerly instead, and `warn` says so, once per plan. `launch` returns
// false, with *why, where the launch failed.
PassMode run_pass(GraphSlot& slot, int batch, const std::function<bool(std::string* why)>& launch,
                  const std::function<void()>& eager, const std::function<void()>& retire,
                  const std::function<void(const std::string&)>& warn);

// The batch sizes that get a plan (and a graph) when the engine is made: 1, 2, 4, ... below
// max_batch, and max_batch itself. Every batch runs padded up to the smallest class that holds it,
// so the streaming path never plans.
std::vector<int> batch_classes(int max_batch);
// The smallest class >= batch; `classes` ascending, batch <= classes.back().
int batch_class_for(const std::vector<int>& classes, int batch);

// cuDNN's RNN takes at most this many time steps (its sequence lengths are checked against it).
constexpr int kCudnnMaxSteps = 65535;
// The longest window, in samples, whose frame count cuDNN takes.
int max_cudnn_window_samples();
// Throws EngineError, saying the longest window it takes, for a window with more frames than
// cuDNN's RNN can run.
void check_cudnn_window(int samples);

}  // namespace speakerseg::cuda
