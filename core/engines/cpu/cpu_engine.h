// The CPU engine (oneDNN): the one every machine has.
#pragma once

#include <memory>
#include <string>

#include "engines/segmentation_engine.h"

namespace speakerseg {

// kBf16: the LSTM products in bf16 (the recurrence and the input projections: weights and
// activations rounded, sums in fp32), on CPUs with AVX512_BF16 only; an exploration, off by
// default (docs/performance.md measures what it costs in accuracy).
// kFp16Emulated, kBf16Emulated, kTf32Emulated: an emulation of a GPU's tensor-core math in that
// format, for measuring its accuracy on any CPU, not a speed mode (slower than fp32): the
// operands of every matrix product (SincNet, convolutions, LSTM input and recurrent products,
// head) rounded to the format, sums, cell state, nonlinearities and norms in fp32
// (emulated_precision.h; docs/gpu.md "Reduced precision, emulated").
// kFp16EmulatedFp32Sinc, kBf16EmulatedFp32Sinc, kTf32EmulatedFp32Sinc: the same with SincNet's two
// products left in fp32 (the stage whose rounding costs most: a GPU path may keep it in fp32).
enum class CpuPrecision {
  kFp32,
  kBf16,
  kFp16Emulated,
  kBf16Emulated,
  kTf32Emulated,
  kFp16EmulatedFp32Sinc,
  kBf16EmulatedFp32Sinc,
  kTf32EmulatedFp32Sinc
};

struct CpuEngineOptions {
  int threads = 0;  // 0: every core OpenMP reports
  CpuPrecision precision = CpuPrecision::kFp32;
};

// "fp32" | "bf16" | "fp16-emulated" | "bf16-emulated" | "tf32-emulated" |
// "fp16-emulated-fp32-sinc" | "bf16-emulated-fp32-sinc" | "tf32-emulated-fp32-sinc" -> *out;
// false for anything else.
bool parse_cpu_precision(const std::string& name, CpuPrecision* out);
// The name parse_cpu_precision takes.
const char* cpu_precision_name(CpuPrecision precision);

std::unique_ptr<SegmentationEngine> make_cpu_engine(std::shared_ptr<const SegmentationModel> model,
                                                    const CpuEngineOptions& options = {});

}  // namespace speakerseg
