// The CUDA engine: the whole segmentation-3.0 forward pass of a batch of windows on one GPU, behind
// the same SegmentationEngine interface as the CPU engine. Built only with -Dcuda=enabled (or auto
// with the toolkit and cuDNN found), where core_dep defines SPEAKERSEG_HAVE_CUDA=1. This header
// pulls in no CUDA header, so any translation unit of the project can include it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engines/segmentation_engine.h"

namespace speakerseg {

// cuDNN RNN algorithm for the four bidirectional LSTM layers (docs/gpu.md says when each wins).
enum class LstmAlgorithm {
  kStandard,             // CUDNN_RNN_ALGO_STANDARD
  kPersistStaticSmallH,  // CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H
  kPersistDynamic,       // CUDNN_RNN_ALGO_PERSIST_DYNAMIC: compiled with NVRTC per batch size
  kAuto,  // per batch class, from the measured table: dynamic up to 2, static-small-h up to 128,
          // standard above; falls back to standard, with a warning, where the chosen one cannot be
          // set up or run (never for lack of memory, which is an error)
};

// "standard", "persist-static-small-h", "persist-dynamic", "auto": the names the tools and the
// element's lstm-algorithm property use.
const char* lstm_algorithm_name(LstmAlgorithm algorithm);
// False (and *out untouched) for any other name.
bool parse_lstm_algorithm(const std::string& name, LstmAlgorithm* out);

struct CudaEngineOptions {
  int device = 0;
  LstmAlgorithm lstm_algorithm = LstmAlgorithm::kAuto;
  // Capture each (batch class, samples) shape's forward pass once into a CUDA graph and replay
  // it. A graph that fails to launch is retired and its shape runs eagerly, with a warning.
  bool cuda_graphs = true;
  // TF32 tensor-core math in cuBLAS and cuDNN. Off: plain FP32 (FMA), as the parity tests need.
  bool tf32 = false;
  // FP16 tensor-core math past SincNet: the convolutions' and the head's products (cuBLAS, FP32
  // data rounded to FP16 on the way in, FP32 sums: CUBLAS_COMPUTE_32F_FAST_16F) and the LSTM's
  // (cuDNN, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION on FP32 data); SincNet's products, norms,
  // gates and cell state stay FP32. The CPU engine's fp16-emulated-fp32-sinc is its accuracy
  // model (docs/gpu.md: harmless on every evaluation set). Excludes tf32. Off by default: never
  // run on a GPU yet, and what cuDNN keeps in FP16 between steps is not known until it is.
  bool fp16 = false;
  // The LSTM's sequences handed to cuDNN sequence-major and packed, as PyTorch hands them (its
  // standard LSTM ran a whole pass at batch 32 in half our LSTM's time on the first H200 run):
  // the features are transposed in and the output back, around the RNN. Off (the default, the
  // layout every GPU figure so far was measured with): batch-major, unpacked.
  bool lstm_seq_major = false;
  // Streams' audio kept on the device (device_audio_cache.h): a window shared with its stream's
  // earlier ones (SegmentationEngine::forward_shared) uploads the samples the device does not
  // hold yet, about a step, instead of the whole window; the windows are then copied out of
  // device memory. At most `device_audio_slots` blocks (1.28 MB each, about one a stream, taken in
  // chunks as streams come; at least two per window of the largest batch). Off (the default):
  // every window is uploaded whole, the path every GPU figure so far was measured with.
  bool device_audio = false;
  size_t device_audio_slots = 8192;
  // Largest batch forward() accepts. Batches run padded up to a class: 1, 2, 4, ... below
  // max_batch, and max_batch. Every class of 10 s windows is planned, run and captured at
  // construction (description() says how long that took), so that a GPU too small fails there
  // and a stream never waits for a plan.
  int max_batch = 32;
  // Fill the device arena with NaN whenever it is taken or grown, so that a stage reading memory
  // that no stage wrote shows in the results (the tests set it; it costs one memset a growth).
  bool fill_arena_nan = false;
  // Tests: with it set, every pass runs eagerly (no graphs), and after each of its nine stages
  // the engine waits, downloads the stage's output for the caller's windows (forward_pass.h's
  // stage_output) and hands it over, so that a wrong result names the stage that made it.
  std::function<void(int stage, const std::string& name, const std::vector<float>& output)>
      stage_check;
  // Where warnings go (an algorithm or CUDA graph falling back); null: stderr.
  std::function<void(const std::string&)> warn;
};

// The engine itself lives in a module, libspeakerseg-cuda.so, that the functions below open on
// first use (cuda_loader.cpp): only the module links the CUDA runtime, cuBLAS and cuDNN, so a CUDA
// build runs on the CPU where they are missing. Where it is looked for, in this order:
// $SPEAKERSEG_CUDA_MODULE, the build tree it was built in, the install location
// (<libdir>/speakerchange). Returns the path that was (or would be) loaded.
std::string cuda_module_path();

// Number of CUDA devices this process can use; 0 when there is none, no usable driver, or the
// module or its libraries cannot be loaded, and then *why (when given) says what went wrong.
// Never throws.
int cuda_device_count(std::string* why = nullptr);

// One line per fact: the module, each GPU's name and compute capability, driver, CUDA runtime,
// cuBLAS, cuDNN and NVRTC versions (NVRTC as the dynamic loader finds it, since cuDNN loads it the
// same way). Never throws; says what it could not find.
std::string cuda_environment();

// Throws EngineError with a clear message when the module or its libraries cannot be loaded,
// there is no device, the device index does not exist, the GPU is older than the build supports,
// or cuDNN/cuBLAS cannot be set up.
std::unique_ptr<SegmentationEngine> make_cuda_engine(std::shared_ptr<const SegmentationModel> model,
                                                     const CudaEngineOptions& options = {});

}  // namespace speakerseg
