// The one place where settings become engines: which device runs the segmentation network and
// the voice encoder (auto: CUDA where this build has it and a GPU is found, else the CPU; or
// remote), each engine's options, the checks of those settings against this build, and the
// fallbacks with their reasons. The element (gst/speakerchange) and speakerseg (tools/) both go
// through it, so a new engine or option is added here once.
//
// Settings are named as the element's properties and speakerseg's options name them (engine,
// server, device, lstm-algorithm, precision, ...), so that its messages read right in both.
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engines/cpu/cpu_engine.h"        // CpuPrecision
#include "engines/cuda/cuda_engine.h"      // LstmAlgorithm; no CUDA header
#include "engines/remote/remote_engine.h"  // RemoteEngineOptions; no gRPC header
#include "engines/segmentation_engine.h"
#include "engines/voice_encoder.h"
#include "model/segmentation_model.h"
#include "model/voice_model.h"

namespace speakerseg {

enum class EngineKind { kAuto, kCpu, kCuda, kRemote };

// "auto", "cpu", "cuda", "remote": the element's engine nicks and speakerseg's --engine values.
const char* engine_kind_name(EngineKind kind);
// False (and *out untouched) for any other name.
bool parse_engine_kind(const std::string& name, EngineKind* out);

// Whether this build has the CUDA engine (-Dcuda) and the remote engine (-Dremote).
bool build_has_cuda_engine();
bool build_has_remote_engine();

struct EngineSettings {
  EngineKind kind = EngineKind::kAuto;
  // The CPU engines (segmentation and voice).
  int threads = 0;  // 0: every core
  CpuPrecision precision = CpuPrecision::kFp32;
  // The CUDA engines.
  int device = 0;
  LstmAlgorithm lstm_algorithm = LstmAlgorithm::kAuto;
  bool cuda_graphs = true;
  bool tf32 = false;
  bool fp16 = false;            // CudaEngineOptions::fp16 (the segmentation engine)
  bool lstm_seq_major = false;  // CudaEngineOptions::lstm_seq_major (the segmentation engine)
  bool device_audio = false;    // CudaEngineOptions::device_audio (the segmentation engine)
  // The remote engines: server, model names, deadline.
  RemoteEngineOptions remote;
};

// Settings that contradict each other or this build: what is wrong (what()) and what to change
// (hint()), for the element's error and speakerseg's message alike.
class EngineSettingsError : public std::invalid_argument {
 public:
  EngineSettingsError(const std::string& what, std::string hint)
      : std::invalid_argument(what), hint_(std::move(hint)) {}
  const std::string& hint() const { return hint_; }

 private:
  std::string hint_;
};

// Something a user may want to know about the choice: kInfo is routine (auto found no GPU),
// kIgnored a setting that has no effect on the engine chosen, kFallback an engine that could not
// be made on the device chosen and runs on the CPU instead.
struct EngineNotice {
  enum Level { kInfo, kIgnored, kFallback } level;
  std::string text;
};

class EngineFactory {
 public:
  // Where notices go as they arise (the choice at construction, fallbacks when engines are made);
  // null: dropped. Engines' own run-time warnings (an algorithm or CUDA graph falling back) go to
  // `engine_warnings` (null: stderr), prefixed "voice encoder: " for the voice encoder's.
  struct Reporters {
    std::function<void(const EngineNotice&)> notice;
    std::function<void(const std::string&)> engine_warnings;
  };

  // Checks `settings` against this build and, for engine=auto, looks for a GPU. Throws
  // EngineSettingsError when they cannot work (engine=cuda or remote in a build without it,
  // engine=remote without a server, CUDA settings in a build without CUDA).
  explicit EngineFactory(EngineSettings settings, Reporters reporters = {});

  // The device that runs now: kCpu, kCuda or kRemote, never kAuto. An engine=auto CUDA engine
  // that could not be made moves it to kCpu.
  EngineKind kind() const { return kind_; }
  const EngineSettings& settings() const { return settings_; }

  // Whether the engines need the model files here (the remote ones run the server's copies).
  bool needs_local_models() const { return kind_ != EngineKind::kRemote; }

  // Everything that makes two engines differ, beyond the model: "cpu;threads=2;precision=fp32",
  // "cuda;device=0;lstm-algorithm=auto;cuda-graphs=1;tf32=0", "remote;server=...;...". Equal for
  // settings that give the same engines (the shared engine pool's key).
  std::string identity() const;

  // The segmentation engine, for batches up to `max_batch` (the CUDA engine plans each batch
  // class now). `model` may be null for the remote engine. With engine=auto, a CUDA engine that
  // cannot be made gives the CPU engine and a kFallback notice (and the voice encoder follows);
  // otherwise an engine that cannot be made throws (EngineError, say which kind() failed).
  std::unique_ptr<SegmentationEngine> segmentation(std::shared_ptr<const SegmentationModel> model,
                                                   int max_batch);

  // The voice encoder on the same device as the segmentation engine, with the same fallback.
  std::unique_ptr<VoiceEncoder> voice(std::shared_ptr<const VoiceModel> model);

 private:
  void tell(EngineNotice::Level level, const std::string& text) const;

  EngineSettings settings_;
  Reporters reporters_;
  EngineKind kind_ = EngineKind::kCpu;
};

}  // namespace speakerseg
