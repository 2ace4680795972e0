// The element's settings, kept apart from its state and streaming as gst-plugins-rs does: what
// the properties say, their GParamSpecs (with the documentation gst-inspect-1.0 shows) and their
// get/set. Plain values under the object lock; nothing here touches the stream.
#pragma once

#include <gst/gst.h>

#include <string>

#include "gstspeakerchange.h"
#include "scheduling/shared_segmenter.h"
#include "streaming/stall_watch.h"
#include "streaming/stream_settings.h"

namespace gstspeakerchange {

constexpr speakerseg::StreamSettings kCoreDefaults{};
constexpr double kDefaultStep = kCoreDefaults.step;
constexpr double kDefaultLatency = kCoreDefaults.latency;
constexpr double kDefaultMinSpeech = kCoreDefaults.min_speech;
constexpr double kDefaultMinSilence = kCoreDefaults.min_silence;
constexpr int kDefaultBatchSize = 32;
// No waiting: under load the windows that arrive during one inference make the next batch anyway,
// and waiting for company only adds delay when there is no load (docs/performance.md).
constexpr double kDefaultMaxBatchWait = 0;

// What the properties say; guarded by the object lock.
struct Settings {
  std::string model;
  GstSpeakerChangeEngine engine = GST_SPEAKER_CHANGE_ENGINE_AUTO;
  GstSpeakerChangeMode mode = GST_SPEAKER_CHANGE_MODE_AUTO;
  double step = kDefaultStep;
  double latency = kDefaultLatency;
  double min_speech = kDefaultMinSpeech;
  double min_silence = kDefaultMinSilence;
  int threads = 0;
  GstSpeakerChangePrecision precision = GST_SPEAKER_CHANGE_PRECISION_FP32;
  int device = 0;
  std::string server;  // the remote engine's HOST:PORT
  std::string remote_model = "segmentation-3.0";
  std::string remote_voice_model = "voice-encoder-ge2e";
  int remote_deadline_ms = 10000;
  double outage_wait = speakerseg::SharedScheduler::kDefaultOutageWait;
  GstSpeakerChangeLstmAlgorithm lstm_algorithm = GST_SPEAKER_CHANGE_LSTM_ALGORITHM_AUTO;
  bool cuda_graphs = true;
  int batch_size = kDefaultBatchSize;
  bool post_messages = true;
  bool emit_events = true;
  bool compat_rstranscribe = false;
  bool shared_engine = true;
  double max_batch_wait = kDefaultMaxBatchWait;
  int batches_in_flight = 1;
  int stitch_threads = 0;
  double stats_interval = 0;
  bool reidentify = false;  // the element's init sets the default: on where the voice model is
  std::string voice_model;
  std::string voiceprints;
  int max_speakers = 0;
  double voice_threshold = kCoreDefaults.identity.match_threshold;
  double enrolled_threshold = kCoreDefaults.identity.enrolled_threshold;
  double stall_margin = speakerseg::kDefaultStallMargin;
};

// Whether identity by voice is on by default: where the voice model is installed.
bool default_reidentify();

// Installs every property, with its range, default and documentation, on the element's class.
void install_properties(GObjectClass* klass);

// Stores / reads property `prop_id`; false when the id is not one of the element's.
bool set_property(Settings& settings, guint prop_id, const GValue* value);
bool get_property(const Settings& settings, guint prop_id, GValue* value);

// The nick of an enum value ("latency"), for logs and messages.
const char* enum_nick(GType type, int value);

}  // namespace gstspeakerchange
