// The module's one exported symbol: the table cuda_loader.cpp looks up (cuda_module.h).
#include "engines/cuda/cuda_module.h"

#include "engines/cuda/cuda_errors.h"

extern "C" __attribute__((visibility("default"))) const speakerseg::cuda_module::Api*
speakerseg_cuda_module() {
  using namespace speakerseg;
  static const cuda_module::Api api{cuda_module::kAbi,
                                    sizeof(cuda_module::Api),
                                    cuda::device_count,
                                    cuda::environment,
                                    cuda_module::new_segmentation_engine,
                                    cuda_module::new_voice_encoder};
  return &api;
}
