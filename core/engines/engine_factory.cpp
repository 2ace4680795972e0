#include "engines/engine_factory.h"

#include <exception>
#include <utility>

#include "engines/cpu/cpu_voice_encoder.h"
#include "engines/setting_names.h"
#ifdef SPEAKERSEG_HAVE_CUDA
#include "engines/cuda/cuda_voice_encoder.h"
#endif

namespace speakerseg {

namespace {

constexpr const char* kNoCuda =
    "this build has no CUDA engine: rebuild with -Dcuda=enabled on a machine with the CUDA "
    "toolkit and cuDNN 9";
constexpr const char* kNoRemote =
    "this build has no remote engine: install libgrpc++-dev and protobuf-compiler-grpc and "
    "rebuild (meson option remote)";

constexpr EngineKind kKinds[] = {EngineKind::kAuto, EngineKind::kCpu, EngineKind::kCuda,
                                 EngineKind::kRemote};

CpuEngineOptions cpu_options(const EngineSettings& s) {
  return {s.threads, s.precision};
}

#ifdef SPEAKERSEG_HAVE_CUDA
// What the CUDA segmentation engine and voice encoder share of their options.
template <class Options>
Options cuda_options(const EngineSettings& s) {
  Options o;
  o.device = s.device;
  o.lstm_algorithm = s.lstm_algorithm;
  o.cuda_graphs = s.cuda_graphs;
  o.tf32 = s.tf32;
  return o;
}
#endif

}  // namespace

const char* engine_kind_name(EngineKind kind) {
  switch (kind) {
    case EngineKind::kCpu:
      return "cpu";
    case EngineKind::kCuda:
      return "cuda";
    case EngineKind::kRemote:
      return "remote";
    case EngineKind::kAuto:
      break;
  }
  return "auto";
}

bool parse_engine_kind(const std::string& name, EngineKind* out) {
  return parse_setting_name(name, kKinds, engine_kind_name, out);
}

bool build_has_cuda_engine() {
#ifdef SPEAKERSEG_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

bool build_has_remote_engine() {
#ifdef SPEAKERSEG_HAVE_REMOTE
  return true;
#else
  return false;
#endif
}

EngineFactory::EngineFactory(EngineSettings settings, Reporters reporters)
    : settings_(std::move(settings)), reporters_(std::move(reporters)) {
  const EngineSettings& s = settings_;
  if (s.kind == EngineKind::kRemote) {
    if (!build_has_remote_engine())
      throw EngineSettingsError(std::string("engine=remote: ") + kNoRemote,
                                "choose engine=cpu, cuda or auto");
    if (s.remote.server.empty())
      throw EngineSettingsError(
          "engine=remote needs server=HOST:PORT, the gRPC endpoint of an Open Inference "
          "Protocol server",
          "e.g. server=localhost:8001 for NVIDIA Triton, localhost:8081 for KServe");
    kind_ = EngineKind::kRemote;
    return;
  }
  const RemoteEngineOptions remote_defaults;
  std::string unused_remote;
  if (!s.remote.server.empty()) unused_remote += " server=" + s.remote.server;
  if (s.remote.model != remote_defaults.model) unused_remote += " remote-model=" + s.remote.model;
  if (s.remote.voice_model != remote_defaults.voice_model)
    unused_remote += " remote-voice-model=" + s.remote.voice_model;
  if (s.remote.deadline_ms != remote_defaults.deadline_ms)
    unused_remote += " deadline=" + std::to_string(s.remote.deadline_ms) + " ms";
  if (!unused_remote.empty())
    tell(EngineNotice::kIgnored, std::string("engine is ") + engine_kind_name(s.kind) +
                                     ", not remote: these settings of the remote engine are not "
                                     "used:" +
                                     unused_remote);

  if (s.device < 0)
    throw EngineSettingsError("device=" + std::to_string(s.device) + " is not a GPU index",
                              "give 0, 1, ... (0: the first GPU)");
  // Settings that select a GPU cannot be met by a build without one; those that only tune the
  // CUDA engine are left unused where the CPU runs.
  if (!build_has_cuda_engine()) {
    if (s.kind == EngineKind::kCuda)
      throw EngineSettingsError(std::string("engine=cuda: ") + kNoCuda,
                                "choose engine=cpu or engine=auto");
    if (s.device != 0)
      throw EngineSettingsError(
          "device=" + std::to_string(s.device) + " selects a GPU, but " + kNoCuda,
          "leave device at 0 for the CPU engine");
    if (s.lstm_algorithm != LstmAlgorithm::kAuto)
      throw EngineSettingsError(std::string("lstm-algorithm=") +
                                    lstm_algorithm_name(s.lstm_algorithm) +
                                    " selects a cuDNN RNN algorithm, but " + kNoCuda,
                                "leave lstm-algorithm at auto for the CPU engine");
  }

  kind_ = EngineKind::kCpu;
  if (s.kind == EngineKind::kCuda) {
    kind_ = EngineKind::kCuda;
  } else if (s.kind == EngineKind::kAuto) {
    if (!build_has_cuda_engine()) {
      tell(EngineNotice::kInfo, "this build has no CUDA engine: using the CPU engine");
    } else {
      std::string why;
#ifdef SPEAKERSEG_HAVE_CUDA
      if (cuda_device_count(&why) > 0) kind_ = EngineKind::kCuda;
#endif
      if (kind_ != EngineKind::kCuda)
        tell(EngineNotice::kInfo, "no CUDA device found (" + why + "): using the CPU engine");
    }
  }

  if (kind_ == EngineKind::kCpu) {
    std::string unused;
    if (s.device != 0) unused += " device=" + std::to_string(s.device);
    if (s.lstm_algorithm != LstmAlgorithm::kAuto)
      unused += std::string(" lstm-algorithm=") + lstm_algorithm_name(s.lstm_algorithm);
    if (!s.cuda_graphs) unused += " cuda-graphs=false";
    if (s.tf32) unused += " tf32";
    if (s.fp16) unused += " fp16";
    if (s.lstm_seq_major) unused += " lstm-seq-major";
    if (s.device_audio) unused += " device-audio";
    if (!unused.empty())
      tell(EngineNotice::kIgnored,
           "the CPU engine runs: these settings apply to the CUDA engine only and are not used:" +
               unused);
  } else if (s.precision != CpuPrecision::kFp32) {
    tell(EngineNotice::kIgnored, std::string("precision=") + cpu_precision_name(s.precision) +
                                     " applies to the CPU engine only: the CUDA engine runs FP32");
  }
}

void EngineFactory::tell(EngineNotice::Level level, const std::string& text) const {
  if (reporters_.notice) reporters_.notice({level, text});
}

std::string EngineFactory::identity() const {
  const EngineSettings& s = settings_;
  switch (kind_) {
    case EngineKind::kRemote:
      return "remote;server=" + s.remote.server + ";model=" + s.remote.model +
             ";voice-model=" + s.remote.voice_model +
             ";deadline-ms=" + std::to_string(s.remote.deadline_ms);
    case EngineKind::kCuda:
      return "cuda;device=" + std::to_string(s.device) +
             ";lstm-algorithm=" + lstm_algorithm_name(s.lstm_algorithm) +
             ";cuda-graphs=" + (s.cuda_graphs ? "1" : "0") + ";tf32=" + (s.tf32 ? "1" : "0") +
             ";fp16=" + (s.fp16 ? "1" : "0") + ";lstm-seq-major=" + (s.lstm_seq_major ? "1" : "0") +
             ";device-audio=" + (s.device_audio ? "1" : "0");
    default:
      return "cpu;threads=" + std::to_string(s.threads) +
             ";precision=" + cpu_precision_name(s.precision);
  }
}

std::unique_ptr<SegmentationEngine> EngineFactory::segmentation(
    std::shared_ptr<const SegmentationModel> model, [[maybe_unused]] int max_batch) {
#ifdef SPEAKERSEG_HAVE_REMOTE
  if (kind_ == EngineKind::kRemote) return make_remote_engine(settings_.remote);
#endif
  if (!model) throw EngineError("the segmentation engine needs the model: none was loaded");
#ifdef SPEAKERSEG_HAVE_CUDA
  if (kind_ == EngineKind::kCuda) {
    auto options = cuda_options<CudaEngineOptions>(settings_);
    options.max_batch = max_batch;  // the engine takes the memory for its largest batch now
    options.lstm_seq_major = settings_.lstm_seq_major;
    options.fp16 = settings_.fp16;
    options.device_audio = settings_.device_audio;
    options.warn = reporters_.engine_warnings;
    try {
      return make_cuda_engine(model, options);
    } catch (const std::exception& e) {
      if (settings_.kind != EngineKind::kAuto) throw;
      tell(EngineNotice::kFallback,
           std::string("could not create the CUDA engine, using the CPU engine: ") + e.what());
      kind_ = EngineKind::kCpu;
    }
  }
#endif
  return make_cpu_engine(std::move(model), cpu_options(settings_));
}

std::unique_ptr<VoiceEncoder> EngineFactory::voice(std::shared_ptr<const VoiceModel> model) {
#ifdef SPEAKERSEG_HAVE_REMOTE
  if (kind_ == EngineKind::kRemote) return make_remote_voice_encoder(settings_.remote);
#endif
  if (!model) throw EngineError("the voice encoder needs the voice model: none was loaded");
#ifdef SPEAKERSEG_HAVE_CUDA
  if (kind_ == EngineKind::kCuda) {
    auto options = cuda_options<CudaVoiceEncoderOptions>(settings_);
    // lstm-algorithm is the segmentation LSTM's: the voice encoder takes what it can run of it.
    std::string note;
    options.lstm_algorithm = voice_lstm_algorithm(settings_.lstm_algorithm, &note);
    if (!note.empty()) tell(EngineNotice::kInfo, note);
    if (reporters_.engine_warnings)
      options.warn = [warn = reporters_.engine_warnings](const std::string& m) {
        warn("voice encoder: " + m);
      };
    try {
      return make_cuda_voice_encoder(model, options);
    } catch (const std::exception& e) {
      if (settings_.kind != EngineKind::kAuto) throw;
      // The segmentation engine stays on the GPU: only the voices move.
      tell(EngineNotice::kFallback,
           std::string("could not create the CUDA voice encoder, using the CPU one: ") + e.what());
    }
  }
#endif
  return make_cpu_voice_encoder(std::move(model), cpu_options(settings_));
}

}  // namespace speakerseg
