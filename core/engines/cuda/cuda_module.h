// The one entry point of the CUDA engine module (libspeakerseg-cuda.so). The module, not the
// programs and the GStreamer plugin, links the CUDA runtime, cuBLAS and cuDNN, so that a CUDA build
// still loads and runs on the CPU where those libraries or the driver are missing; cuda_loader.cpp
// opens it on first use. Host and module come from one build, so the table may carry C++ types;
// `abi` and `size` catch a module from another build.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "engines/cuda/cuda_engine.h"
#include "engines/cuda/cuda_voice_encoder.h"

namespace speakerseg::cuda_module {

constexpr int kAbi = 2;
constexpr const char* kEntryPoint = "speakerseg_cuda_module";

struct Api {
  int abi;
  size_t size;
  int (*device_count)(std::string* why);
  std::string (*environment)();
  std::unique_ptr<SegmentationEngine> (*make_engine)(std::shared_ptr<const SegmentationModel> model,
                                                     const CudaEngineOptions& options);
  std::unique_ptr<VoiceEncoder> (*make_voice_encoder)(std::shared_ptr<const VoiceModel> model,
                                                      const CudaVoiceEncoderOptions& options);
};

// Inside the module: the two engines' constructors, which the entry point hands out.
std::unique_ptr<SegmentationEngine> new_segmentation_engine(
    std::shared_ptr<const SegmentationModel> model, const CudaEngineOptions& options);
std::unique_ptr<VoiceEncoder> new_voice_encoder(std::shared_ptr<const VoiceModel> model,
                                                const CudaVoiceEncoderOptions& options);

using EntryPoint = const Api* (*)();

}  // namespace speakerseg::cuda_module
