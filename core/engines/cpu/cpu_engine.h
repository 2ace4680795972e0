// The CPU engine (oneDNN): the one every machine has.
#pragma once

#include <memory>

#include "engines/segmentation_engine.h"

namespace speakerseg {

struct CpuEngineOptions {
  int threads = 0;  // 0: every core OpenMP reports
};

std::unique_ptr<SegmentationEngine> make_cpu_engine(std::shared_ptr<const SegmentationModel> model,
                                                    const CpuEngineOptions& options = {});

}  // namespace speakerseg
