// The segmentation network and the voice encoder on a shared inference server that speaks the
// Open Inference Protocol (NVIDIA Triton, KServe, Seldon MLServer; docs/scale-out.md), behind the
// same interfaces as the local engines: the scheduler, stitching, identity and events do not
// know where a window ran. Each forward() or embed() is one request, batch and all; a caller
// that wants several requests in flight makes several engines (the shared scheduler's pool).
#pragma once

#include <memory>
#include <string>

#include "engines/segmentation_engine.h"
#include "engines/voice_encoder.h"

namespace speakerseg {

struct RemoteEngineOptions {
  std::string server;                      // HOST:PORT of the server's gRPC endpoint
  std::string model = "segmentation-3.0";  // [B, 1, samples] "input" -> [B, frames, 7] "output"
  std::string voice_model = "voice-encoder-ge2e";  // [B, frames, 40] "mel" -> [B, 256] "embedding"
  int deadline_ms = 10000;                         // per request
};

// Check the server and the model now, once (EngineError naming the server and model, and what to
// do, when one is unreachable, missing, not ready or of the wrong shape).
std::unique_ptr<SegmentationEngine> make_remote_engine(const RemoteEngineOptions& options);
std::unique_ptr<VoiceEncoder> make_remote_voice_encoder(const RemoteEngineOptions& options);

}  // namespace speakerseg
