#include "gstspeakerchange-engine.h"

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engines/cpu/cpu_engine.h"
#include "engines/cpu/cpu_voice_encoder.h"
#include "gstspeakerchange-private.h"
#include "identity/voiceprints.h"
#include "model/segmentation_model.h"
#include "model/voice_model.h"
#include "scheduling/engine_pool.h"
#ifdef SPEAKERSEG_HAVE_CUDA
#include "engines/cuda/cuda_engine.h"
#include "engines/cuda/cuda_voice_encoder.h"
#endif
#ifdef SPEAKERSEG_HAVE_REMOTE
#include "engines/remote/remote_engine.h"
#endif

namespace gstspeakerchange {
namespace {

// How a model file's error ends, in the element's terms: the core's loaders know neither front
// end. The environment variables give the properties their defaults (model_location.h).
constexpr const char* kNameAnotherModel =
    "set the element's model property to its path (its default comes from $SPEAKERCHANGE_MODEL "
    "where set)";
constexpr const char* kNameAnotherVoiceModel =
    "set the element's voice-model property to its path (its default comes from "
    "$SPEAKERCHANGE_VOICE_MODEL where set)";

// Errors and warnings of the engine's creation, posted by the caller once the pool's lock is free.
using Reports = std::vector<std::function<void()>>;

// Thrown out of the pool's factory when create_engine() failed (and said why in its reports).
struct EngineNotCreated {};

#ifdef SPEAKERSEG_HAVE_CUDA
speakerseg::LstmAlgorithm lstm_algorithm(const Settings& p) {
  switch (p.lstm_algorithm) {
    case GST_SPEAKER_CHANGE_LSTM_ALGORITHM_STANDARD:
      return speakerseg::LstmAlgorithm::kStandard;
    case GST_SPEAKER_CHANGE_LSTM_ALGORITHM_PERSIST_STATIC_SMALL_H:
      return speakerseg::LstmAlgorithm::kPersistStaticSmallH;
    case GST_SPEAKER_CHANGE_LSTM_ALGORITHM_PERSIST_DYNAMIC:
      return speakerseg::LstmAlgorithm::kPersistDynamic;
    default:
      return speakerseg::LstmAlgorithm::kAuto;
  }
}
#endif

#ifdef SPEAKERSEG_HAVE_REMOTE
speakerseg::RemoteEngineOptions remote_options(const Settings& p) {
  speakerseg::RemoteEngineOptions options;
  options.server = p.server;
  options.model = p.remote_model;
  options.voice_model = p.remote_voice_model;
  options.deadline_ms = p.remote_deadline_ms;
  return options;
}
#endif

speakerseg::CpuEngineOptions cpu_options(const Settings& p) {
  speakerseg::CpuEngineOptions options;
  options.threads = p.threads;
  options.precision = p.precision == GST_SPEAKER_CHANGE_PRECISION_BF16
                          ? speakerseg::CpuPrecision::kBf16
                          : speakerseg::CpuPrecision::kFp32;
  return options;
}

// Loads the model and creates the engine start() asked for (use_cuda: the CUDA engine, falling
// back to the CPU for engine=auto). Null on failure, with the error in `reports`. A `shared`
// engine may outlive this element, so its warnings go to the debug log, not to the element.
std::unique_ptr<speakerseg::SegmentationEngine> create_engine(GstSpeakerChange* self,
                                                              const Settings& p, bool use_cuda,
                                                              [[maybe_unused]] int max_batch,
                                                              [[maybe_unused]] bool shared,
                                                              Reports& reports) {
  std::unique_ptr<speakerseg::SegmentationEngine> engine;
#ifdef SPEAKERSEG_HAVE_REMOTE
  // The server runs the model: this machine needs no copy of it.
  if (p.engine == GST_SPEAKER_CHANGE_ENGINE_REMOTE) {
    try {
      return speakerseg::make_remote_engine(remote_options(p));
    } catch (const std::exception& e) {
      const std::string what = e.what(), server = p.server, model = p.remote_model;
      reports.push_back([self, what, server, model] {
        GST_ELEMENT_ERROR(
            self, RESOURCE, OPEN_READ_WRITE,
            ("Could not use the inference server: %s", what.c_str()),
            ("engine=remote, server=%s, remote-model=%s", server.c_str(), model.c_str()));
      });
      return nullptr;
    }
  }
#endif
  std::shared_ptr<const speakerseg::SegmentationModel> model;
  try {
    model = speakerseg::SegmentationModel::load_onnx(p.model, kNameAnotherModel);
  } catch (const std::exception& e) {
    const std::string what = e.what(), path = p.model;
    if (g_file_test(p.model.c_str(), G_FILE_TEST_EXISTS))
      reports.push_back([self, what, path] {
        GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("%s", what.c_str()),
                          ("model property: '%s'", path.c_str()));
      });
    else
      reports.push_back([self, what, path] {
        GST_ELEMENT_ERROR(self, RESOURCE, NOT_FOUND, ("%s", what.c_str()),
                          ("model property: '%s'", path.c_str()));
      });
    return nullptr;
  }
#ifdef SPEAKERSEG_HAVE_CUDA
  if (use_cuda) {
    try {
      speakerseg::CudaEngineOptions options;
      options.device = p.device;
      options.lstm_algorithm = lstm_algorithm(p);
      options.cuda_graphs = p.cuda_graphs;
      // The engine takes the memory for its largest batch now.
      options.max_batch = max_batch;
      if (shared)
        options.warn = [](const std::string& m) { GST_WARNING("shared engine: %s", m.c_str()); };
      else
        options.warn = [self](const std::string& m) { GST_WARNING_OBJECT(self, "%s", m.c_str()); };
      engine = speakerseg::make_cuda_engine(model, options);
    } catch (const std::exception& e) {
      const std::string what = e.what();
      const int device = p.device;
      if (p.engine == GST_SPEAKER_CHANGE_ENGINE_CUDA) {
        reports.push_back([self, what, device] {
          GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS,
                            ("Could not create the CUDA engine: %s", what.c_str()),
                            ("engine=cuda, device=%d", device));
        });
        return nullptr;
      }
      reports.push_back([self, what, device] {
        GST_ELEMENT_WARNING(
            self, RESOURCE, SETTINGS,
            ("Could not create the CUDA engine, using the CPU engine: %s", what.c_str()),
            ("engine=auto, device=%d", device));
      });
      use_cuda = false;
    }
  }
#endif
  if (!use_cuda) {
    try {
      engine = speakerseg::make_cpu_engine(model, cpu_options(p));
    } catch (const std::exception& e) {
      const std::string what = e.what();
      reports.push_back([self, what] {
        GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS,
                          ("Could not create the CPU engine: %s", what.c_str()), (nullptr));
      });
      return nullptr;
    }
  }
  return engine;
}

}  // namespace

bool acquire_engine(GstSpeakerChange* self, const Settings& p, Stream* s) {
  const bool use_remote = p.engine == GST_SPEAKER_CHANGE_ENGINE_REMOTE;
  if (use_remote && !kHaveRemoteEngine) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("engine=remote: %s", kNoRemote),
                      ("choose engine=cpu, cuda or auto"));
    return false;
  }
  if (use_remote && p.server.empty()) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS,
                      ("engine=remote needs the server property: HOST:PORT of an Open Inference "
                       "Protocol server's gRPC endpoint"),
                      ("e.g. server=localhost:8001 for NVIDIA Triton, localhost:8081 for KServe"));
    return false;
  }
  if (!use_remote && !p.server.empty())
    GST_WARNING_OBJECT(self, "server is set but engine is %s, not remote: the server is not used",
                       enum_nick(GST_TYPE_SPEAKER_CHANGE_ENGINE, p.engine));
  if (p.engine == GST_SPEAKER_CHANGE_ENGINE_CUDA && !kHaveCudaEngine) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("engine=cuda: %s", kNoCuda),
                      ("choose engine=cpu or engine=auto"));
    return false;
  }
  if (p.device != 0 && !kHaveCudaEngine) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS,
                      ("device=%d selects a GPU, but %s", p.device, kNoCuda),
                      ("leave device at 0 for the CPU engine"));
    return false;
  }
  if (p.lstm_algorithm != GST_SPEAKER_CHANGE_LSTM_ALGORITHM_AUTO && !kHaveCudaEngine) {
    GST_ELEMENT_ERROR(
        self, RESOURCE, SETTINGS,
        ("lstm-algorithm=%s selects a cuDNN RNN algorithm, but %s",
         enum_nick(GST_TYPE_SPEAKER_CHANGE_LSTM_ALGORITHM, p.lstm_algorithm), kNoCuda),
        ("leave lstm-algorithm at auto for the CPU engine"));
    return false;
  }

  // engine=cuda, or engine=auto with a GPU present, takes the CUDA engine where the build has it.
  bool use_cuda = false;
#ifdef SPEAKERSEG_HAVE_CUDA
  if (p.engine == GST_SPEAKER_CHANGE_ENGINE_CUDA) {
    use_cuda = true;
  } else if (p.engine == GST_SPEAKER_CHANGE_ENGINE_AUTO) {
    std::string why;
    use_cuda = speakerseg::cuda_device_count(&why) > 0;
    if (!use_cuda)
      GST_INFO_OBJECT(self, "no CUDA device found (%s): using the CPU engine", why.c_str());
  }
  if (use_cuda && p.precision != GST_SPEAKER_CHANGE_PRECISION_FP32)
    GST_WARNING_OBJECT(self, "precision applies to the CPU engine only: the CUDA engine runs FP32");
#endif
  // Latency mode runs one window at a time; auto may pick throughput (upstream not live), so it
  // plans for the full batch like throughput mode.
  const int engine_batch = p.mode == GST_SPEAKER_CHANGE_MODE_LATENCY ? 1 : p.batch_size;

  // Identity by voice: the voice model and the voiceprints are read now, so that a bad file fails
  // READY to PAUSED instead of the stream.
  if (!p.reidentify && (!p.voiceprints.empty() || p.max_speakers > 0)) {
    GST_ELEMENT_ERROR(
        self, RESOURCE, SETTINGS,
        ("%s is set but reidentify is false",
         p.voiceprints.empty() ? "max-speakers" : "voiceprints"),
        ("set reidentify=true (it needs the voice model: scripts/setup.sh makes it)"));
    return false;
  }
  std::shared_ptr<const speakerseg::VoiceModel> voice_model;
  s->enrolled.reset();  // a start that failed left the last one's (stop() does not run then)
  if (p.reidentify) {
    try {
      // The remote engine's voice encoder runs on the server: no local copy needed.
      if (!use_remote)
        voice_model = speakerseg::VoiceModel::load_onnx(p.voice_model, kNameAnotherVoiceModel);
      if (!p.voiceprints.empty()) s->enrolled = speakerseg::Voiceprints::load(p.voiceprints);
    } catch (const speakerseg::VoiceprintsError& e) {
      if (g_file_test(p.voiceprints.c_str(), G_FILE_TEST_EXISTS))
        GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("%s", e.what()),
                          ("voiceprints property: '%s'", p.voiceprints.c_str()));
      else
        GST_ELEMENT_ERROR(self, RESOURCE, NOT_FOUND, ("%s", e.what()),
                          ("voiceprints property: '%s'", p.voiceprints.c_str()));
      return false;
    } catch (const std::exception& e) {
      constexpr const char* kHow =
          "reidentify=true needs the GE2E voice model: run scripts/setup.sh (it makes "
          "models/voice-encoder-ge2e.onnx from the resemblyzer 0.1.4 wheel), set voice-model to "
          "its path, or set reidentify=false; voice-model: '%s'";
      if (g_file_test(p.voice_model.c_str(), G_FILE_TEST_EXISTS))
        GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("%s", e.what()),
                          (kHow, p.voice_model.c_str()));
      else
        GST_ELEMENT_ERROR(self, RESOURCE, NOT_FOUND, ("%s", e.what()),
                          (kHow, p.voice_model.c_str()));
      return false;
    }
  }
  // The voice encoder runs where the segmentation engine was asked to; with engine=auto a CUDA
  // encoder that cannot be made leaves the voices on the CPU, with a warning in the debug log (the
  // factory may run for a shared worker that outlives this element).
  auto make_voice = [&]() -> std::unique_ptr<speakerseg::VoiceEncoder> {
#ifdef SPEAKERSEG_HAVE_REMOTE
    if (use_remote) return speakerseg::make_remote_voice_encoder(remote_options(p));
#endif
#ifdef SPEAKERSEG_HAVE_CUDA
    if (use_cuda) {
      speakerseg::CudaVoiceEncoderOptions options;
      options.device = p.device;
      options.lstm_algorithm = lstm_algorithm(p);
      options.cuda_graphs = p.cuda_graphs;
      options.warn = [](const std::string& m) { GST_WARNING("voice encoder: %s", m.c_str()); };
      try {
        return speakerseg::make_cuda_voice_encoder(voice_model, options);
      } catch (const std::exception& e) {
        if (p.engine == GST_SPEAKER_CHANGE_ENGINE_CUDA) throw;
        GST_WARNING("could not create the CUDA voice encoder, using the CPU one: %s", e.what());
      }
    }
#endif
    return speakerseg::make_cpu_voice_encoder(voice_model, cpu_options(p));
  };
  Reports reports;
  if (p.shared_engine) {
    speakerseg::EngineKey key;
    key.model_path = use_remote ? p.remote_model : p.model;
    key.kind = use_remote ? "remote" : use_cuda ? "cuda" : "cpu";
    key.device = use_remote ? p.server : use_cuda ? std::to_string(p.device) : "";
    key.options =
        (use_remote ? "voice=" + p.remote_voice_model +
                          ";deadline-ms=" + std::to_string(p.remote_deadline_ms) + ";"
                    : std::string()) +
        "outage-wait=" + std::to_string(p.outage_wait) + ";" +
        "threads=" + std::to_string(p.threads) +
        ";precision=" + enum_nick(GST_TYPE_SPEAKER_CHANGE_PRECISION, p.precision) +
        ";lstm-algorithm=" + enum_nick(GST_TYPE_SPEAKER_CHANGE_LSTM_ALGORITHM, p.lstm_algorithm) +
        ";cuda-graphs=" + (p.cuda_graphs ? "1" : "0") +
        ";batch-size=" + std::to_string(engine_batch) +
        (p.reidentify ? ";voice-model=" + p.voice_model : "");
    try {
      s->scheduler = speakerseg::EnginePool::instance().get(
          key, engine_batch,
          [&] {
            auto engine = create_engine(self, p, use_cuda, engine_batch, true, reports);
            if (!engine) throw EngineNotCreated();  // `reports` says why
            return engine;
          },
          p.reidentify ? speakerseg::EnginePool::VoiceFactory(make_voice) : nullptr, p.outage_wait);
    } catch (const EngineNotCreated&) {
    } catch (const std::exception& e) {
      const std::string what = e.what();
      reports.push_back([self, what] {
        GST_ELEMENT_ERROR(self, LIBRARY, INIT,
                          ("Could not start the shared inference worker: %s", what.c_str()),
                          (nullptr));
      });
    }
    // Posted outside the pool's lock: a bus sync handler may start another element.
    for (const auto& report : reports) report();
    if (!s->scheduler) return false;
    GST_INFO_OBJECT(self, "model %s, shared engine %s (batch %d, key %s)", p.model.c_str(),
                    s->scheduler->description().c_str(), s->scheduler->batch_size(),
                    key.options.c_str());
  } else {
    s->engine = create_engine(self, p, use_cuda, engine_batch, false, reports);
    for (const auto& report : reports) report();
    if (!s->engine) return false;
    if (p.reidentify) {
      try {
        s->voice = make_voice();
      } catch (const std::exception& e) {
        GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS,
                          ("Could not create the voice encoder: %s", e.what()),
                          ("engine=%s, device=%d",
                           enum_nick(GST_TYPE_SPEAKER_CHANGE_ENGINE, p.engine), p.device));
        s->engine.reset();
        return false;
      }
    }
    GST_INFO_OBJECT(self, "model %s, engine %s", p.model.c_str(), s->engine->description().c_str());
  }
  return true;
}

}  // namespace gstspeakerchange
