#include "gstspeakerchange-engine.h"

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engines/engine_factory.h"
#include "gstspeakerchange-private.h"
#include "identity/voiceprints.h"
#include "model/segmentation_model.h"
#include "model/voice_model.h"
#include "scheduling/engine_pool.h"

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

// The properties in the core's terms: the enums go through their nicks and the core's parsers,
// which know the same names.
speakerseg::EngineSettings engine_settings(const Settings& p) {
  speakerseg::EngineSettings s;
  speakerseg::parse_engine_kind(enum_nick(GST_TYPE_SPEAKER_CHANGE_ENGINE, p.engine), &s.kind);
  s.threads = p.threads;
  speakerseg::parse_cpu_precision(enum_nick(GST_TYPE_SPEAKER_CHANGE_PRECISION, p.precision),
                                  &s.precision);
  s.device = p.device;
  speakerseg::parse_lstm_algorithm(
      enum_nick(GST_TYPE_SPEAKER_CHANGE_LSTM_ALGORITHM, p.lstm_algorithm), &s.lstm_algorithm);
  s.cuda_graphs = p.cuda_graphs;
  s.remote.server = p.server;
  s.remote.model = p.remote_model;
  s.remote.voice_model = p.remote_voice_model;
  s.remote.deadline_ms = p.remote_deadline_ms;
  return s;
}

// The factory's notices: routine ones and unused settings in the debug log, a fallback to the CPU
// as the element's warning (posted with the other reports, outside the pool's lock). A `shared`
// engine may outlive this element, so the engines' own run-time warnings go to the debug log
// without it.
speakerseg::EngineFactory::Reporters reporters(GstSpeakerChange* self, bool shared,
                                               Reports& reports) {
  speakerseg::EngineFactory::Reporters r;
  r.notice = [self, &reports](const speakerseg::EngineNotice& n) {
    switch (n.level) {
      case speakerseg::EngineNotice::kInfo:
        GST_INFO_OBJECT(self, "%s", n.text.c_str());
        break;
      case speakerseg::EngineNotice::kIgnored:
        GST_WARNING_OBJECT(self, "%s", n.text.c_str());
        break;
      case speakerseg::EngineNotice::kFallback:
        reports.push_back([self, text = n.text] {
          GST_ELEMENT_WARNING(self, RESOURCE, SETTINGS, ("%s", text.c_str()), ("engine=auto"));
        });
        break;
    }
  };
  if (shared)
    r.engine_warnings = [](const std::string& m) { GST_WARNING("shared engine: %s", m.c_str()); };
  else
    r.engine_warnings = [self](const std::string& m) { GST_WARNING_OBJECT(self, "%s", m.c_str()); };
  return r;
}

// The segmentation engine the factory chose, with the model loaded where it runs here. Null on
// failure, with the error in `reports`.
std::unique_ptr<speakerseg::SegmentationEngine> create_engine(GstSpeakerChange* self,
                                                              const Settings& p,
                                                              speakerseg::EngineFactory& factory,
                                                              int max_batch, Reports& reports) {
  std::shared_ptr<const speakerseg::SegmentationModel> model;
  if (factory.needs_local_models()) {
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
  }
  try {
    return factory.segmentation(model, max_batch);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    const speakerseg::EngineKind kind = factory.kind();
    const speakerseg::EngineSettings s = factory.settings();
    reports.push_back([self, what, kind, s] {
      switch (kind) {
        case speakerseg::EngineKind::kRemote:
          GST_ELEMENT_ERROR(self, RESOURCE, OPEN_READ_WRITE,
                            ("Could not use the inference server: %s", what.c_str()),
                            ("engine=remote, server=%s, remote-model=%s", s.remote.server.c_str(),
                             s.remote.model.c_str()));
          break;
        case speakerseg::EngineKind::kCuda:
          GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS,
                            ("Could not create the CUDA engine: %s", what.c_str()),
                            ("engine=cuda, device=%d", s.device));
          break;
        default:
          GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS,
                            ("Could not create the CPU engine: %s", what.c_str()), (nullptr));
      }
    });
    return nullptr;
  }
}

}  // namespace

bool acquire_engine(GstSpeakerChange* self, const Settings& p, Stream* s) {
  Reports reports;
  std::unique_ptr<speakerseg::EngineFactory> factory;
  try {
    factory = std::make_unique<speakerseg::EngineFactory>(
        engine_settings(p), reporters(self, p.shared_engine, reports));
  } catch (const speakerseg::EngineSettingsError& e) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("%s", e.what()), ("%s", e.hint().c_str()));
    return false;
  }
  const bool use_remote = factory->kind() == speakerseg::EngineKind::kRemote;
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
      if (factory->needs_local_models())
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
  // The voice encoder runs where the segmentation engine runs (the factory's fallbacks included).
  auto make_voice = [&]() { return factory->voice(voice_model); };
  if (p.shared_engine) {
    speakerseg::EngineKey key;
    key.model_path = use_remote ? p.remote_model : p.model;
    key.kind = speakerseg::engine_kind_name(factory->kind());
    key.options =
        factory->identity() + ";outage-wait=" + std::to_string(p.outage_wait) +
        ";batch-size=" + std::to_string(engine_batch) +
        ";batches-in-flight=" + std::to_string(p.batches_in_flight) + ";stitch-threads=" +
        std::to_string(speakerseg::SharedScheduler::stitch_threads_for(p.stitch_threads)) +
        (p.reidentify ? ";voice-model=" + p.voice_model : "");
    // One engine per batch in flight; what the first one reported (a fallback, say) holds for
    // all, so the others' reports are kept only when they fail.
    int made = 0;
    try {
      s->scheduler = speakerseg::EnginePool::instance().get(
          key, engine_batch,
          [&] {
            Reports again;
            auto engine =
                create_engine(self, p, *factory, engine_batch, made++ == 0 ? reports : again);
            if (!engine) {
              reports.insert(reports.end(), again.begin(), again.end());
              throw EngineNotCreated();  // `reports` says why
            }
            return engine;
          },
          p.reidentify ? speakerseg::EnginePool::VoiceFactory(make_voice) : nullptr, p.outage_wait,
          p.batches_in_flight, p.stitch_threads);
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
    s->engine = create_engine(self, p, *factory, engine_batch, reports);
    if (s->engine && p.reidentify) {
      try {
        s->voice = make_voice();
      } catch (const std::exception& e) {
        const std::string what = e.what();
        reports.push_back([self, what, &p] {
          GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS,
                            ("Could not create the voice encoder: %s", what.c_str()),
                            ("engine=%s, device=%d",
                             enum_nick(GST_TYPE_SPEAKER_CHANGE_ENGINE, p.engine), p.device));
        });
        s->engine.reset();
      }
    }
    for (const auto& report : reports) report();
    if (!s->engine) return false;
    GST_INFO_OBJECT(self, "model %s, engine %s", p.model.c_str(), s->engine->description().c_str());
  }
  return true;
}

}  // namespace gstspeakerchange
