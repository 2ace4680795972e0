// The CPU engine (oneDNN): the one every machine has.
#pragma once

#include <memory>
#include <string>

#include "engines/segmentation_engine.h"

namespace speakerseg {

// kBf16: the LSTM products in bf16 (the recurrence and the input projections: weights and
// activations rounded, sums in fp32), on CPUs with AVX512_BF16 only; an exploration, off by
// default (docs/performance.md measures what it costs in accuracy).
enum class CpuPrecision { kFp32, kBf16 };

struct CpuEngineOptions {
  int threads = 0;  // 0: every core OpenMP reports
  CpuPrecision precision = CpuPrecision::kFp32;
};

// "fp32" | "bf16" -> *out; false for anything else.
bool parse_cpu_precision(const std::string& name, CpuPrecision* out);

std::unique_ptr<SegmentationEngine> make_cpu_engine(std::shared_ptr<const SegmentationModel> model,
                                                    const CpuEngineOptions& options = {});

}  // namespace speakerseg
