// The GE2E voice encoder on the CPU (oneDNN sgemm and the shared LSTM recurrence kernel).
#pragma once

#include <memory>

#include "engines/cpu/cpu_engine.h"  // CpuEngineOptions
#include "engines/voice_encoder.h"

namespace speakerseg {

std::unique_ptr<VoiceEncoder> make_cpu_voice_encoder(std::shared_ptr<const VoiceModel> model,
                                                     const CpuEngineOptions& options = {});

}  // namespace speakerseg
