// SPDX-License-Identifier: MIT
//
// GObject glue of the speakerchange element. No signal processing here: windows, inference and
// turn decisions are core/'s (WindowBuffer, a SharedSegmenterChannel of a private engine or of the
// process-wide EnginePool); this file maps them onto GStreamer's buffers, events, timestamps,
// properties and messages.

/**
 * SECTION:element-speakerchange
 * @title: speakerchange
 * @short_description: announces who is speaking now and when that changes
 *
 * speakerchange analyses 16 kHz mono audio with the pyannote segmentation-3.0 network and
 * announces every change of the current speaker. It is a passthrough analyser like `level`: audio
 * leaves the element exactly as it came in (same buffers, same bytes, same timestamps, no added
 * latency); only messages and events are added.
 *
 * The network runs over 10 s windows that end every #GstSpeakerChange:step seconds, on a worker
 * thread, so the streaming thread never waits for inference unless the worker falls behind a
 * non-live stream (back-pressure). The per-window speaker labels are stitched into one timeline
 * for the whole stream (`speaker-0`, `speaker-1`, ... in order of appearance). A frame becomes
 * final once #GstSpeakerChange:latency seconds of newer audio have arrived; a new current speaker
 * counts once it has held for #GstSpeakerChange:min-speech seconds, "nobody" once silence has
 * lasted #GstSpeakerChange:min-silence seconds. A change is dated where the new turn began, so it
 * is always announced after the fact: `delay` says by how much.
 *
 * Every change is reported as a #GstStructure named `speaker-change`:
 *
 * * #guint64 `timestamp`: buffer time (PTS) where the new turn begins (the centre of its first
 *   16.875 ms network frame), in nanoseconds.
 * * #guint64 `running-time`: `timestamp` as running time in the current segment
 *   (#GST_CLOCK_TIME_NONE when it lies outside the segment).
 * * #guint64 `stream-time`: `timestamp` as stream time in the current segment
 *   (#GST_CLOCK_TIME_NONE when it lies outside the segment).
 * * #gchararray `speaker`: the new current speaker, "" when nobody speaks.
 * * #gchararray `previous-speaker`: the current speaker before the change, "" for nobody.
 * * #GstValueArray of #gchararray `active-speakers` (a #GST_TYPE_ARRAY, not a #GStrv): everyone
 *   active when the new turn began; during overlapped speech it holds more than `speaker`.
 * * #gdouble `confidence`: mean network activity of the new state (0..1) over the frames that
 *   confirmed it.
 * * #guint64 `delay`: nanoseconds between the change and the newest audio when it became final
 *   (the end of the window that decided it): at least #GstSpeakerChange:latency (plus about the
 *   min-speech or min-silence that confirmed the turn), except for changes made final by the end
 *   of a stretch of stream (EOS, discontinuity, long gap), which are announced with the audio
 *   there is. It does not depend on how fast inference runs: in a live pipeline the time the
 *   window waited and ran comes on top (`speaker-change-stats` reports it).
 *
 * The structure is sent
 *
 * * as an element message on the bus when #GstSpeakerChange:post-messages is %TRUE;
 * * as a serialized custom downstream event (%GST_EVENT_CUSTOM_DOWNSTREAM) on the source pad when
 *   #GstSpeakerChange:emit-events is %TRUE. The event travels in order with the audio: it is pushed
 *   as soon as the worker has the change, before the buffer being analysed goes on downstream.
 *   As a change is at least #GstSpeakerChange:latency old when it is announced, `timestamp` lies
 *   before the PTS of the buffer that follows the event (for any latency longer than a buffer);
 * * when #GstSpeakerChange:compat-rstranscribe is %TRUE, also as a custom downstream event named
 *   `rstranscribe/speaker-change` with a single #gchararray field `speaker` (%NULL when nobody
 *   speaks), which the caption and translation elements of gst-plugins-rs (textaccumulate,
 *   awstranslate, ...) react to.
 *
 * Changes are emitted from the streaming thread, in order, while it handles the first buffer (or
 * serialized event) after the worker has them ready. At EOS the element runs the last, partial
 * window, makes every remaining frame final and sends the remaining changes before it forwards EOS.
 *
 * ## Resources and states
 *
 * The model is loaded and the inference engine created on the READY to PAUSED transition (so that
 * properties set in READY take effect). If that fails (model file missing or invalid, an engine
 * this build lacks), the element posts an error message that says what is wrong and how to fix it
 * and the state change fails; NULL to READY never loads anything. The worker thread starts with the
 * first buffer and stops, like everything else, on PAUSED to READY. Properties flagged
 * "changeable only in NULL or READY state" that are set later take effect at the next READY to
 * PAUSED transition; #GstSpeakerChange:post-messages, #GstSpeakerChange:emit-events and
 * #GstSpeakerChange:compat-rstranscribe apply at once.
 *
 * With #GstSpeakerChange:mode `auto` the element asks upstream with a LATENCY query when the first
 * buffer arrives. A live upstream selects the `latency` mode (one window per inference) and lets
 * the worker drop the oldest waiting window when inference cannot keep up with real time (at most
 * 4 windows wait), so the announcement delay stays bounded. The live streams of one process get
 * different window phases (the n-th one's windows end a golden-ratio fraction of a step off the
 * first one's), so that channels started together do not all need inference at the same instant;
 * the first window still comes within one step. A non-live upstream (files) selects
 * the `throughput` mode (batches of #GstSpeakerChange:batch-size windows) and back-pressure: up to
 * 2 x batch-size windows wait, then the streaming thread waits for the worker, and nothing is
 * lost. Without an answer to the query upstream counts as not live.
 *
 * ## Shared engine
 *
 * With #GstSpeakerChange:shared-engine %TRUE (the default) every speakerchange of the process
 * with the same model path, engine kind (cpu or cuda), device, threads, lstm-algorithm,
 * cuda-graphs and engine batch size (#GstSpeakerChange:batch-size, or 1 with mode `latency`)
 * shares one loaded model, one engine and one inference worker. The worker runs the waiting
 * windows of all those streams together, the oldest first, up to the batch size per inference;
 * each stream keeps its own time line, speaker labels, queue and results, and a flush or error of
 * one stream does not disturb the others. By default a window runs as soon as the worker is
 * free, with every window waiting then; the windows that arrive while it runs make the next
 * batch, so batches grow with the load by themselves and an idle worker adds no delay.
 * #GstSpeakerChange:max-batch-wait above 0 makes a window wait up to that many seconds for other
 * streams' windows to fill a batch (fewer, larger inferences at the cost of delay); a streaming
 * thread waiting on its results (EOS, back-pressure) makes the worker run at once.
 * Queue sizes, dropping and back-pressure follow the element's mode as with an own engine. The
 * engine is created when the first such element starts and freed when the last one stops. With
 * %FALSE each element loads its own model and runs its own worker.
 *
 * ## Statistics
 *
 * When #GstSpeakerChange:stats-interval is above 0, the element posts an element message named
 * `speaker-change-stats` every that many seconds of stream time, with fields
 *
 * * #guint `queue-depth`: windows of this stream waiting for inference.
 * * #gint `last-batch-size`: windows in the last inference that ran any of this stream's windows
 *   (with a shared engine, counting every stream's windows in that batch).
 * * #guint64 `dropped-windows`: windows dropped so far because inference fell behind a live
 *   stream.
 * * #guint64 `delay`: the current announcement delay in nanoseconds: #GstSpeakerChange:latency
 *   plus what inference adds now (with a shared engine: the time from submission to results of
 *   the last window run, or the age of the oldest waiting window if longer; an own engine does
 *   not measure it).
 *
 * ## Time line
 *
 * Sample positions count from the first sample after start, a flush or a discontinuity; the PTS of
 * that first sample anchors them to buffer time. Each buffer's PTS is compared with the expected
 * one: within 40 ms it counts as continuous (the anchor follows it, absorbing jitter and drift);
 * a forward gap shorter than 1 s is filled with silence; a longer gap or a jump backwards ends the
 * stretch (its remaining changes are sent, as at EOS) and starts a new time line, with new speaker
 * labels, from that buffer. Buffers flagged %GST_BUFFER_FLAG_GAP count as silence. A GAP event
 * shorter than 5 s is filled with silence; a longer one ends the stretch like a discontinuity (a
 * GAP event without duration is forwarded and otherwise ignored). FLUSH_STOP forgets everything
 * that was pending. A caps change between F32LE and S16LE continues the same time line.
 *
 * The element adds no latency to the audio and answers the LATENCY query with upstream's answer.
 * Consumers of the events that need the changes in time should plan for `delay`.
 *
 * ## Example launch lines
 * |[
 * gst-launch-1.0 -m filesrc location=meeting.wav ! wavparse ! audioconvert ! audioresample ! \
 *     speakerchange ! fakesink
 * ]| prints every `speaker-change` message of a recording.
 * |[
 * gst-launch-1.0 -m pulsesrc ! audioconvert ! audioresample ! speakerchange latency=1.5 ! \
 *     fakesink sync=true
 * ]| follows a microphone live.
 */

#include "gstspeakerchange.h"
#include "speakerchange-result.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "async_segmenter.h"
#include "engine_pool.h"
#include "model_location.h"
#include "model_spec.h"
#include "pcm.h"
#include "segmentation_engine.h"
#include "segmentation_model.h"
#include "shared_segmenter.h"
#include "speaker_change.h"
#include "speaker_change_detector.h"
#include "stream_settings.h"
#include "window_buffer.h"
#include "window_segmenter.h"
#ifdef SPEAKERSEG_HAVE_CUDA
#include "cuda/cuda_engine.h"
#endif

GST_DEBUG_CATEGORY_STATIC(gst_speaker_change_debug);
#define GST_CAT_DEFAULT gst_speaker_change_debug

namespace {

// This build's engines: core_dep defines SPEAKERSEG_HAVE_CUDA where core/cuda was built.
#ifdef SPEAKERSEG_HAVE_CUDA
constexpr bool kHaveCudaEngine = true;
#else
constexpr bool kHaveCudaEngine = false;
#endif
constexpr const char* kNoCuda =
    "this build has no CUDA engine: rebuild with -Dcuda=enabled on a machine with the CUDA toolkit";

constexpr GstClockTime kContinuityTolerance = 40 * GST_MSECOND;  // jitter taken as continuous
constexpr GstClockTime kMaxFilledJump = GST_SECOND;     // PTS gaps shorter than this become silence
constexpr GstClockTime kMaxFilledGap = 5 * GST_SECOND;  // GAP events shorter than this, too
constexpr int kLiveMaxQueue = 4;

enum {
  PROP_0,
  PROP_MODEL,
  PROP_ENGINE,
  PROP_MODE,
  PROP_STEP,
  PROP_LATENCY,
  PROP_MIN_SPEECH,
  PROP_MIN_SILENCE,
  PROP_THREADS,
  PROP_DEVICE,
  PROP_LSTM_ALGORITHM,
  PROP_CUDA_GRAPHS,
  PROP_BATCH_SIZE,
  PROP_POST_MESSAGES,
  PROP_EMIT_EVENTS,
  PROP_COMPAT_RSTRANSCRIBE,
  PROP_SHARED_ENGINE,
  PROP_MAX_BATCH_WAIT,
  PROP_STATS_INTERVAL,
};

// The defaults are the core's, tuned on the evaluation recordings (docs/accuracy.md).
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
  int device = 0;
  GstSpeakerChangeLstmAlgorithm lstm_algorithm = GST_SPEAKER_CHANGE_LSTM_ALGORITHM_AUTO;
  bool cuda_graphs = true;
  int batch_size = kDefaultBatchSize;
  bool post_messages = true;
  bool emit_events = true;
  bool compat_rstranscribe = false;
  bool shared_engine = true;
  double max_batch_wait = kDefaultMaxBatchWait;
  double stats_interval = 0;
};

// What the streaming side owns: touched by start()/stop() and, between them, only by the streaming
// thread (buffers and serialized events, under the stream lock).
struct Stream {
  speakerseg::StreamSettings settings;
  GstSpeakerChangeMode mode = GST_SPEAKER_CHANGE_MODE_AUTO;
  int batch_size = kDefaultBatchSize;
  double max_batch_wait = 0;                      // seconds (shared engine only)
  GstClockTime stats_interval = 0;                // 0: no speaker-change-stats messages
  GstClockTime next_stats = GST_CLOCK_TIME_NONE;  // buffer time of the next one
  std::unique_ptr<speakerseg::SegmentationEngine>
      engine;  // own engine, until the segmenter takes it
  // The process-wide engine and worker (shared-engine=true), held from start() to stop() only,
  // so that the pool frees them when the last element stops.
  std::shared_ptr<speakerseg::SharedScheduler> scheduler;
  std::unique_ptr<speakerseg::WindowSegmenter> segmenter;  // from the first buffer on
  std::unique_ptr<speakerseg::WindowBuffer> windows;
  GstAudioInfo info;
  std::vector<float> scratch;
  std::vector<int16_t> s16_scratch;
  bool have_base = false;
  GstClockTimeDiff base = 0;  // buffer time of sample 0 of the current stretch
  uint64_t dropped_reported = 0;
};

}  // namespace

struct _GstSpeakerChange {
  GstAudioFilter parent;
  Settings* settings;
  Stream* stream;
};

#define gst_speaker_change_parent_class parent_class
G_DEFINE_TYPE(GstSpeakerChange, gst_speaker_change, GST_TYPE_AUDIO_FILTER)
GST_ELEMENT_REGISTER_DEFINE(speakerchange, "speakerchange", GST_RANK_NONE, GST_TYPE_SPEAKER_CHANGE)

// ---------------------------------------------------------------------------------------------
// Enum types

GType gst_speaker_change_engine_get_type(void) {
  static gsize id = 0;
  static const GEnumValue values[] = {
      {GST_SPEAKER_CHANGE_ENGINE_AUTO, "The best engine this build has (CPU in a CPU-only build)",
       "auto"},
      {GST_SPEAKER_CHANGE_ENGINE_CPU, "CPU engine (oneDNN)", "cpu"},
      {GST_SPEAKER_CHANGE_ENGINE_CUDA, "CUDA engine (cuDNN); needs a build with -Dcuda=enabled",
       "cuda"},
      {0, nullptr, nullptr},
  };
  if (g_once_init_enter(&id))
    g_once_init_leave(&id, g_enum_register_static("GstSpeakerChangeEngine", values));
  return id;
}

GType gst_speaker_change_mode_get_type(void) {
  static gsize id = 0;
  static const GEnumValue values[] = {
      {GST_SPEAKER_CHANGE_MODE_AUTO, "Latency for a live upstream, throughput otherwise", "auto"},
      {GST_SPEAKER_CHANGE_MODE_LATENCY, "One window per inference, as soon as it is complete",
       "latency"},
      {GST_SPEAKER_CHANGE_MODE_THROUGHPUT, "Batches of up to batch-size windows per inference",
       "throughput"},
      {0, nullptr, nullptr},
  };
  if (g_once_init_enter(&id))
    g_once_init_leave(&id, g_enum_register_static("GstSpeakerChangeMode", values));
  return id;
}

GType gst_speaker_change_lstm_algorithm_get_type(void) {
  static gsize id = 0;
  static const GEnumValue values[] = {
      {GST_SPEAKER_CHANGE_LSTM_ALGORITHM_AUTO, "Let the engine choose", "auto"},
      {GST_SPEAKER_CHANGE_LSTM_ALGORITHM_STANDARD, "cuDNN standard RNN algorithm", "standard"},
      {GST_SPEAKER_CHANGE_LSTM_ALGORITHM_PERSIST_STATIC_SMALL_H,
       "cuDNN persistent kernel for small hidden sizes", "persist-static-small-h"},
      {GST_SPEAKER_CHANGE_LSTM_ALGORITHM_PERSIST_DYNAMIC,
       "cuDNN dynamically compiled persistent kernel", "persist-dynamic"},
      {0, nullptr, nullptr},
  };
  if (g_once_init_enter(&id))
    g_once_init_leave(&id, g_enum_register_static("GstSpeakerChangeLstmAlgorithm", values));
  return id;
}

namespace {

const char* enum_nick(GType type, int value) {
  auto* klass = static_cast<GEnumClass*>(g_type_class_ref(type));
  const GEnumValue* v = g_enum_get_value(klass, value);
  const char* nick = v ? v->value_nick : "?";
  g_type_class_unref(klass);  // static enum types stay registered; the nick stays valid
  return nick;
}

// ---------------------------------------------------------------------------------------------
// Results

GstClockTime sample_time(const Stream* s, int64_t sample) {
  const GstClockTimeDiff t = s->base + static_cast<GstClockTimeDiff>(gst_util_uint64_scale_int(
                                           static_cast<guint64>(std::max<int64_t>(sample, 0)),
                                           GST_SECOND, speakerseg::kSampleRate));
  return static_cast<GstClockTime>(std::max<GstClockTimeDiff>(t, 0));
}

GstClockTime samples_to_duration(int64_t samples) {
  return gst_util_uint64_scale_int(static_cast<guint64>(std::max<int64_t>(samples, 0)), GST_SECOND,
                                   speakerseg::kSampleRate);
}

void emit_change(GstSpeakerChange* self, const speakerseg::SpeakerChange& c) {
  GstBaseTransform* trans = GST_BASE_TRANSFORM(self);
  const Stream* s = self->stream;
  const GstClockTime timestamp = sample_time(s, c.sample);
  GstClockTime running_time = GST_CLOCK_TIME_NONE, stream_time = GST_CLOCK_TIME_NONE;
  if (trans->segment.format == GST_FORMAT_TIME) {
    running_time = gst_segment_to_running_time(&trans->segment, GST_FORMAT_TIME, timestamp);
    stream_time = gst_segment_to_stream_time(&trans->segment, GST_FORMAT_TIME, timestamp);
  }

  GstSpeakerChangeResult r{};
  r.timestamp = timestamp;
  r.running_time = running_time;
  r.stream_time = stream_time;
  r.delay = samples_to_duration(c.announced_sample - c.sample);
  r.speaker = g_strdup(c.speaker.c_str());
  r.previous_speaker = g_strdup(c.previous.c_str());
  r.active_speakers = g_new0(gchar*, c.active.size() + 1);
  for (size_t i = 0; i < c.active.size(); i++) r.active_speakers[i] = g_strdup(c.active[i].c_str());
  r.confidence = c.confidence;
  GstStructure* st = gst_speaker_change_result_new_structure(&r);
  gst_speaker_change_result_clear(&r);

  GST_OBJECT_LOCK(self);
  const bool post = self->settings->post_messages;
  const bool events = self->settings->emit_events;
  const bool compat = self->settings->compat_rstranscribe;
  GST_OBJECT_UNLOCK(self);

  GST_INFO_OBJECT(self, "%" GST_PTR_FORMAT, st);
  if (post)
    gst_element_post_message(GST_ELEMENT(self),
                             gst_message_new_element(GST_OBJECT(self), gst_structure_copy(st)));
  GstPad* srcpad = GST_BASE_TRANSFORM_SRC_PAD(trans);
  if (events && !gst_pad_push_event(srcpad, gst_event_new_custom(GST_EVENT_CUSTOM_DOWNSTREAM,
                                                                 gst_structure_copy(st))))
    GST_DEBUG_OBJECT(self, "downstream did not take the speaker-change event");
  if (compat) {
    GstStructure* r = gst_structure_new("rstranscribe/speaker-change", "speaker", G_TYPE_STRING,
                                        c.speaker.empty() ? nullptr : c.speaker.c_str(), nullptr);
    if (!gst_pad_push_event(srcpad, gst_event_new_custom(GST_EVENT_CUSTOM_DOWNSTREAM, r)))
      GST_DEBUG_OBJECT(self, "downstream did not take the rstranscribe/speaker-change event");
  }
  gst_structure_free(st);
}

// Sends every change the worker has ready; reports a failed worker.
GstFlowReturn emit_ready(GstSpeakerChange* self) {
  Stream* s = self->stream;
  if (!s->segmenter) return GST_FLOW_OK;
  for (const auto& c : s->segmenter->take_changes()) emit_change(self, c);
  const uint64_t dropped = s->segmenter->dropped_windows();
  if (dropped != s->dropped_reported) {
    GST_WARNING_OBJECT(self,
                       "inference is slower than real time: %" G_GUINT64_FORMAT
                       " windows dropped so far (raise step or threads, or use a faster engine)",
                       dropped);
    s->dropped_reported = dropped;
  }
  const std::string error = s->segmenter->error();
  if (!error.empty()) {
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Speaker segmentation failed: %s", error.c_str()),
                      (nullptr));
    return GST_FLOW_ERROR;
  }
  return GST_FLOW_OK;
}

speakerseg::WindowBuffer::WindowFn submitter(Stream* s) {
  return [s](int64_t start, const float* samples) {
    s->segmenter->submit(speakerseg::WindowJob::from_window(start, samples));
  };
}

// Forgets the current stretch without announcing anything (flush).
void forget_stretch(Stream* s) {
  if (s->segmenter) s->segmenter->reset();
  if (s->windows) s->windows->reset();
  s->have_base = false;
  s->base = 0;
  s->next_stats = GST_CLOCK_TIME_NONE;
}

// Posts a speaker-change-stats element message when stats-interval seconds of stream time have
// passed since the last one (or since the stretch began).
void post_stats_if_due(GstSpeakerChange* self) {
  Stream* s = self->stream;
  if (s->stats_interval == 0 || !s->segmenter || !s->have_base) return;
  const GstClockTime now = sample_time(s, s->windows->total());
  if (!GST_CLOCK_TIME_IS_VALID(s->next_stats))
    s->next_stats = sample_time(s, 0) + s->stats_interval;
  if (now < s->next_stats) return;
  s->next_stats += s->stats_interval * ((now - s->next_stats) / s->stats_interval + 1);

  const speakerseg::WindowSegmenter& w = *s->segmenter;
  const int batch = w.last_shared_batch_size();
  const double inference = w.current_delay_seconds();
  const GstClockTime delay =
      static_cast<GstClockTime>(std::llround((s->settings.latency + inference) * GST_SECOND));
  GstStructure* st =
      gst_structure_new("speaker-change-stats", "queue-depth", G_TYPE_UINT,
                        static_cast<guint>(w.queue_depth()), "last-batch-size", G_TYPE_INT, batch,
                        "dropped-windows", G_TYPE_UINT64, static_cast<guint64>(w.dropped_windows()),
                        "delay", G_TYPE_UINT64, static_cast<guint64>(delay), nullptr);
  GST_DEBUG_OBJECT(self, "%" GST_PTR_FORMAT, st);
  gst_element_post_message(GST_ELEMENT(self), gst_message_new_element(GST_OBJECT(self), st));
}

// Ends the current stretch: runs the last partial window, makes every frame final, sends what is
// left; then starts afresh (EOS, discontinuity, long gap).
GstFlowReturn end_stretch(GstSpeakerChange* self) {
  Stream* s = self->stream;
  GstFlowReturn ret = GST_FLOW_OK;
  if (s->segmenter && s->windows->total() > 0) {
    s->windows->flush_tail(submitter(s));
    s->segmenter->finish(s->windows->total());
    ret = emit_ready(self);
  }
  forget_stretch(s);
  return ret;
}

// Creates the worker on the first data: the mode depends on whether upstream is live.
bool ensure_segmenter(GstSpeakerChange* self) {
  Stream* s = self->stream;
  if (s->segmenter) return true;
  if (!s->engine && !s->scheduler) {
    GST_ELEMENT_ERROR(self, CORE, STATE_CHANGE, ("Data arrived before the element was started"),
                      (nullptr));
    return false;
  }
  gboolean live = FALSE;
  GstQuery* query = gst_query_new_latency();
  if (gst_pad_peer_query(GST_BASE_TRANSFORM_SINK_PAD(self), query))
    gst_query_parse_latency(query, &live, nullptr, nullptr);
  else
    GST_DEBUG_OBJECT(self, "upstream did not answer the latency query: taken as not live");
  gst_query_unref(query);

  GstSpeakerChangeMode mode = s->mode;
  if (mode == GST_SPEAKER_CHANGE_MODE_AUTO)
    mode = live ? GST_SPEAKER_CHANGE_MODE_LATENCY : GST_SPEAKER_CHANGE_MODE_THROUGHPUT;
  speakerseg::AsyncSegmenterOptions options;
  options.batch_size = mode == GST_SPEAKER_CHANGE_MODE_LATENCY ? 1 : s->batch_size;
  options.max_queue = live ? kLiveMaxQueue : 2 * options.batch_size;
  options.drop_when_late = live;
  if (live) {
    // Live channels of one process are usually started together; give each its own window phase
    // so that their windows do not all come due, and queue for inference, at the same instant.
    static std::atomic<uint64_t> live_streams{0};
    s->windows->reset(
        speakerseg::staggered_first_end(s->windows->step_samples(), live_streams.fetch_add(1)));
  }
  GST_INFO_OBJECT(self, "upstream is %s: %s mode, batch %d, queue %d, %s, %s",
                  live ? "live" : "not live", enum_nick(GST_TYPE_SPEAKER_CHANGE_MODE, mode),
                  s->scheduler ? s->scheduler->batch_size() : options.batch_size, options.max_queue,
                  live ? "dropping late windows" : "back-pressure",
                  s->scheduler ? "shared engine" : "own engine");
  try {
    if (s->scheduler) {
      speakerseg::SharedChannelOptions shared;
      shared.max_queue = options.max_queue;
      shared.drop_when_late = options.drop_when_late;
      shared.max_batch_wait = s->max_batch_wait;
      s->segmenter =
          std::make_unique<speakerseg::SharedSegmenterChannel>(s->scheduler, s->settings, shared);
    } else {
      s->segmenter = speakerseg::make_async_segmenter(std::move(s->engine), s->settings, options);
    }
  } catch (const std::exception& e) {
    GST_ELEMENT_ERROR(self, LIBRARY, INIT, ("Could not start the inference worker: %s", e.what()),
                      (nullptr));
    return false;
  }
  s->dropped_reported = 0;
  return true;
}

// Feeds `n` samples (null: silence) whose first sample has buffer time `pts` (NONE: whatever
// follows the previous samples), after checking the time line for gaps and jumps.
GstFlowReturn process(GstSpeakerChange* self, GstClockTime pts, const float* samples, size_t n) {
  Stream* s = self->stream;
  if (!ensure_segmenter(self)) return GST_FLOW_ERROR;
  GstFlowReturn ret = GST_FLOW_OK;
  if (GST_CLOCK_TIME_IS_VALID(pts)) {
    const GstClockTimeDiff t = static_cast<GstClockTimeDiff>(pts);
    if (s->have_base) {
      const GstClockTimeDiff expected =
          s->base + static_cast<GstClockTimeDiff>(samples_to_duration(s->windows->total()));
      const GstClockTimeDiff jump = t - expected;
      if (std::abs(jump) <= static_cast<GstClockTimeDiff>(kContinuityTolerance)) {
        s->base += jump;  // jitter or clock drift: follow upstream's time line
      } else if (jump > 0 && jump < static_cast<GstClockTimeDiff>(kMaxFilledJump)) {
        const int64_t missing = static_cast<int64_t>(gst_util_uint64_scale_round(
            static_cast<guint64>(jump), speakerseg::kSampleRate, GST_SECOND));
        GST_DEBUG_OBJECT(self, "filling a gap of %" GST_STIME_FORMAT " with silence",
                         GST_STIME_ARGS(jump));
        s->windows->push(nullptr, static_cast<size_t>(missing), submitter(s));
        s->base = t - static_cast<GstClockTimeDiff>(samples_to_duration(s->windows->total()));
      } else {
        GST_INFO_OBJECT(self,
                        "time line jumps by %" GST_STIME_FORMAT
                        ": ending the stretch, starting a new one at %" GST_TIME_FORMAT,
                        GST_STIME_ARGS(jump), GST_TIME_ARGS(pts));
        ret = end_stretch(self);
        if (ret != GST_FLOW_OK) return ret;
      }
    }
    if (!s->have_base) {
      s->base = t;
      s->have_base = true;
    }
  } else if (!s->have_base) {
    const GstSegment& seg = GST_BASE_TRANSFORM(self)->segment;
    s->base = seg.format == GST_FORMAT_TIME ? static_cast<GstClockTimeDiff>(seg.start) : 0;
    s->have_base = true;
  }
  if (n > 0) s->windows->push(samples, n, submitter(s));
  post_stats_if_due(self);
  return emit_ready(self);
}

// ---------------------------------------------------------------------------------------------
// GstBaseTransform / GstAudioFilter vfuncs

// Errors and warnings of the engine's creation, posted by the caller once the pool's lock is free.
using Reports = std::vector<std::function<void()>>;

// Thrown out of the pool's factory when create_engine() failed (and said why in its reports).
struct EngineNotCreated {};

// Loads the model and creates the engine start() asked for (use_cuda: the CUDA engine, falling
// back to the CPU for engine=auto). Null on failure, with the error in `reports`. A `shared`
// engine may outlive this element, so its warnings go to the debug log, not to the element.
std::unique_ptr<speakerseg::SegmentationEngine> create_engine(GstSpeakerChange* self,
                                                              const Settings& p, bool use_cuda,
                                                              [[maybe_unused]] int max_batch,
                                                              [[maybe_unused]] bool shared,
                                                              Reports& reports) {
  std::unique_ptr<speakerseg::SegmentationEngine> engine;
  std::shared_ptr<const speakerseg::SegmentationModel> model;
  try {
    model = speakerseg::SegmentationModel::load_onnx(p.model);
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
                          ("model property: '%s' (set it, or the SPEAKERCHANGE_MODEL environment "
                           "variable, to the path of segmentation-3.0.onnx)",
                           path.c_str()));
      });
    return nullptr;
  }
#ifdef SPEAKERSEG_HAVE_CUDA
  if (use_cuda) {
    try {
      speakerseg::CudaEngineOptions options;
      options.device = p.device;
      switch (p.lstm_algorithm) {
        case GST_SPEAKER_CHANGE_LSTM_ALGORITHM_STANDARD:
          options.lstm_algorithm = speakerseg::LstmAlgorithm::kStandard;
          break;
        case GST_SPEAKER_CHANGE_LSTM_ALGORITHM_PERSIST_STATIC_SMALL_H:
          options.lstm_algorithm = speakerseg::LstmAlgorithm::kPersistStaticSmallH;
          break;
        case GST_SPEAKER_CHANGE_LSTM_ALGORITHM_PERSIST_DYNAMIC:
          options.lstm_algorithm = speakerseg::LstmAlgorithm::kPersistDynamic;
          break;
        default:
          options.lstm_algorithm = speakerseg::LstmAlgorithm::kAuto;
      }
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
      speakerseg::CpuEngineOptions options;
      options.threads = p.threads;
      engine = speakerseg::make_cpu_engine(model, options);
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

gboolean speaker_change_start(GstBaseTransform* trans) {
  auto* self = GST_SPEAKER_CHANGE(trans);
  GST_OBJECT_LOCK(self);
  const Settings p = *self->settings;
  GST_OBJECT_UNLOCK(self);
  Stream* s = self->stream;

  if (p.engine == GST_SPEAKER_CHANGE_ENGINE_CUDA && !kHaveCudaEngine) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("engine=cuda: %s", kNoCuda),
                      ("choose engine=cpu or engine=auto"));
    return FALSE;
  }
  if (p.device != 0 && !kHaveCudaEngine) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS,
                      ("device=%d selects a GPU, but %s", p.device, kNoCuda),
                      ("leave device at 0 for the CPU engine"));
    return FALSE;
  }
  if (p.lstm_algorithm != GST_SPEAKER_CHANGE_LSTM_ALGORITHM_AUTO && !kHaveCudaEngine) {
    GST_ELEMENT_ERROR(
        self, RESOURCE, SETTINGS,
        ("lstm-algorithm=%s selects a cuDNN RNN algorithm, but %s",
         enum_nick(GST_TYPE_SPEAKER_CHANGE_LSTM_ALGORITHM, p.lstm_algorithm), kNoCuda),
        ("leave lstm-algorithm at auto for the CPU engine"));
    return FALSE;
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
#endif
  // Latency mode runs one window at a time; auto may pick throughput (upstream not live), so it
  // plans for the full batch like throughput mode.
  const int engine_batch = p.mode == GST_SPEAKER_CHANGE_MODE_LATENCY ? 1 : p.batch_size;
  Reports reports;
  if (p.shared_engine) {
    speakerseg::EngineKey key;
    key.model_path = p.model;
    key.kind = use_cuda ? "cuda" : "cpu";
    key.device = use_cuda ? std::to_string(p.device) : "";
    key.options = "threads=" + std::to_string(p.threads) + ";lstm-algorithm=" +
                  enum_nick(GST_TYPE_SPEAKER_CHANGE_LSTM_ALGORITHM, p.lstm_algorithm) +
                  ";cuda-graphs=" + (p.cuda_graphs ? "1" : "0") +
                  ";batch-size=" + std::to_string(engine_batch);
    try {
      s->scheduler = speakerseg::EnginePool::instance().get(key, engine_batch, [&] {
        auto engine = create_engine(self, p, use_cuda, engine_batch, true, reports);
        if (!engine) throw EngineNotCreated();  // `reports` says why
        return engine;
      });
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
    if (!s->scheduler) return FALSE;
    GST_INFO_OBJECT(self, "model %s, shared engine %s (batch %d, key %s)", p.model.c_str(),
                    s->scheduler->description().c_str(), s->scheduler->batch_size(),
                    key.options.c_str());
  } else {
    s->engine = create_engine(self, p, use_cuda, engine_batch, false, reports);
    for (const auto& report : reports) report();
    if (!s->engine) return FALSE;
    GST_INFO_OBJECT(self, "model %s, engine %s", p.model.c_str(), s->engine->description().c_str());
  }

  s->settings = speakerseg::StreamSettings{};
  s->settings.step = p.step;
  s->settings.latency = p.latency;
  s->settings.min_speech = p.min_speech;
  s->settings.min_silence = p.min_silence;
  s->mode = p.mode;
  s->batch_size = p.batch_size;
  s->max_batch_wait = p.max_batch_wait;
  s->stats_interval = static_cast<GstClockTime>(std::llround(p.stats_interval * GST_SECOND));
  try {
    s->windows = std::make_unique<speakerseg::WindowBuffer>(speakerseg::kWindowSamples,
                                                            speakerseg::step_samples(s->settings));
  } catch (const std::exception& e) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("Invalid step: %s", e.what()), (nullptr));
    s->engine.reset();
    s->scheduler.reset();
    return FALSE;
  }
  forget_stretch(s);
  return TRUE;
}

gboolean speaker_change_stop(GstBaseTransform* trans) {
  Stream* s = GST_SPEAKER_CHANGE(trans)->stream;
  s->segmenter.reset();  // stops and joins the worker, or leaves the shared one
  s->engine.reset();
  s->scheduler.reset();  // the pool frees the shared engine when its last element stops
  s->windows.reset();
  s->scratch = {};
  s->s16_scratch = {};
  s->have_base = false;
  gst_audio_info_init(&s->info);
  return TRUE;
}

gboolean speaker_change_setup(GstAudioFilter* filter, const GstAudioInfo* info) {
  auto* self = GST_SPEAKER_CHANGE(filter);
  const GstAudioFormat format = GST_AUDIO_INFO_FORMAT(info);
  if (format != GST_AUDIO_FORMAT_F32LE && format != GST_AUDIO_FORMAT_S16LE) {
    GST_ERROR_OBJECT(self, "unsupported format %s", GST_AUDIO_INFO_NAME(info));
    return FALSE;
  }
  GST_DEBUG_OBJECT(self, "format %s", GST_AUDIO_INFO_NAME(info));
  self->stream->info = *info;  // a format change keeps the time line going
  return TRUE;
}

GstFlowReturn speaker_change_transform_ip(GstBaseTransform* trans, GstBuffer* buf) {
  auto* self = GST_SPEAKER_CHANGE(trans);
  Stream* s = self->stream;
  const int bpf = GST_AUDIO_INFO_BPF(&s->info);
  if (bpf <= 0) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, (nullptr), ("buffer before caps"));
    return GST_FLOW_NOT_NEGOTIATED;
  }
  GstMapInfo map;
  if (!gst_buffer_map(buf, &map, GST_MAP_READ)) {
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Could not map the buffer for reading"), (nullptr));
    return GST_FLOW_ERROR;
  }
  const size_t n = map.size / static_cast<size_t>(bpf);
  const float* samples = nullptr;  // silence
  if (n > 0 && !GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_GAP)) {
    if (GST_AUDIO_INFO_FORMAT(&s->info) == GST_AUDIO_FORMAT_F32LE) {
      if (reinterpret_cast<uintptr_t>(map.data) % alignof(float) == 0) {
        samples = reinterpret_cast<const float*>(map.data);
      } else {
        s->scratch.resize(n);
        std::memcpy(s->scratch.data(), map.data, n * sizeof(float));
        samples = s->scratch.data();
      }
    } else {
      const int16_t* in = reinterpret_cast<const int16_t*>(map.data);
      if (reinterpret_cast<uintptr_t>(map.data) % alignof(int16_t) != 0) {
        s->s16_scratch.resize(n);
        std::memcpy(s->s16_scratch.data(), map.data, n * sizeof(int16_t));
        in = s->s16_scratch.data();
      }
      s->scratch.resize(n);
      speakerseg::s16_to_float(in, n, s->scratch.data());
      samples = s->scratch.data();
    }
  }
  const GstFlowReturn ret = process(self, GST_BUFFER_PTS(buf), samples, n);
  gst_buffer_unmap(buf, &map);
  return ret;
}

gboolean speaker_change_sink_event(GstBaseTransform* trans, GstEvent* event) {
  auto* self = GST_SPEAKER_CHANGE(trans);
  Stream* s = self->stream;
  GstFlowReturn ret = GST_FLOW_OK;
  switch (GST_EVENT_TYPE(event)) {
    case GST_EVENT_FLUSH_STOP:
      forget_stretch(s);
      break;
    case GST_EVENT_EOS:
      // Results first, then EOS. A worker failure is posted as an error; EOS still goes on.
      ret = end_stretch(self);
      break;
    case GST_EVENT_GAP: {
      GstClockTime timestamp, duration;
      gst_event_parse_gap(event, &timestamp, &duration);
      if (!GST_CLOCK_TIME_IS_VALID(duration)) break;
      if (duration < kMaxFilledGap) {
        const guint64 n =
            gst_util_uint64_scale_round(duration, speakerseg::kSampleRate, GST_SECOND);
        ret = process(self, timestamp, nullptr, static_cast<size_t>(n));
      } else {
        GST_INFO_OBJECT(self, "gap of %" GST_TIME_FORMAT ": ending the stretch",
                        GST_TIME_ARGS(duration));
        ret = end_stretch(self);
      }
      if (ret != GST_FLOW_OK) {
        gst_event_unref(event);
        return FALSE;
      }
      break;
    }
    default:
      break;
  }
  return GST_BASE_TRANSFORM_CLASS(parent_class)->sink_event(trans, event);
}

// ---------------------------------------------------------------------------------------------
// GObject

void speaker_change_set_property(GObject* object, guint prop_id, const GValue* value,
                                 GParamSpec* pspec) {
  auto* self = GST_SPEAKER_CHANGE(object);
  GST_OBJECT_LOCK(self);
  const bool running = GST_STATE(self) > GST_STATE_READY;
  Settings& p = *self->settings;
  switch (prop_id) {
    case PROP_MODEL: {
      const char* v = g_value_get_string(value);
      p.model = v ? v : "";
      break;
    }
    case PROP_ENGINE:
      p.engine = static_cast<GstSpeakerChangeEngine>(g_value_get_enum(value));
      break;
    case PROP_MODE:
      p.mode = static_cast<GstSpeakerChangeMode>(g_value_get_enum(value));
      break;
    case PROP_STEP:
      p.step = g_value_get_double(value);
      break;
    case PROP_LATENCY:
      p.latency = g_value_get_double(value);
      break;
    case PROP_MIN_SPEECH:
      p.min_speech = g_value_get_double(value);
      break;
    case PROP_MIN_SILENCE:
      p.min_silence = g_value_get_double(value);
      break;
    case PROP_THREADS:
      p.threads = g_value_get_int(value);
      break;
    case PROP_DEVICE:
      p.device = g_value_get_int(value);
      break;
    case PROP_LSTM_ALGORITHM:
      p.lstm_algorithm = static_cast<GstSpeakerChangeLstmAlgorithm>(g_value_get_enum(value));
      break;
    case PROP_CUDA_GRAPHS:
      p.cuda_graphs = g_value_get_boolean(value);
      break;
    case PROP_BATCH_SIZE:
      p.batch_size = g_value_get_int(value);
      break;
    case PROP_POST_MESSAGES:
      p.post_messages = g_value_get_boolean(value);
      break;
    case PROP_EMIT_EVENTS:
      p.emit_events = g_value_get_boolean(value);
      break;
    case PROP_COMPAT_RSTRANSCRIBE:
      p.compat_rstranscribe = g_value_get_boolean(value);
      break;
    case PROP_SHARED_ENGINE:
      p.shared_engine = g_value_get_boolean(value);
      break;
    case PROP_MAX_BATCH_WAIT:
      p.max_batch_wait = g_value_get_double(value);
      break;
    case PROP_STATS_INTERVAL:
      p.stats_interval = g_value_get_double(value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK(self);
  // Not under the object lock: logging an object takes its lock.
  if (running && (pspec->flags & GST_PARAM_MUTABLE_READY))
    GST_WARNING_OBJECT(self, "%s changes only take effect at the next READY to PAUSED transition",
                       pspec->name);
}

void speaker_change_get_property(GObject* object, guint prop_id, GValue* value, GParamSpec* pspec) {
  auto* self = GST_SPEAKER_CHANGE(object);
  GST_OBJECT_LOCK(self);
  const Settings& p = *self->settings;
  switch (prop_id) {
    case PROP_MODEL:
      g_value_set_string(value, p.model.c_str());
      break;
    case PROP_ENGINE:
      g_value_set_enum(value, p.engine);
      break;
    case PROP_MODE:
      g_value_set_enum(value, p.mode);
      break;
    case PROP_STEP:
      g_value_set_double(value, p.step);
      break;
    case PROP_LATENCY:
      g_value_set_double(value, p.latency);
      break;
    case PROP_MIN_SPEECH:
      g_value_set_double(value, p.min_speech);
      break;
    case PROP_MIN_SILENCE:
      g_value_set_double(value, p.min_silence);
      break;
    case PROP_THREADS:
      g_value_set_int(value, p.threads);
      break;
    case PROP_DEVICE:
      g_value_set_int(value, p.device);
      break;
    case PROP_LSTM_ALGORITHM:
      g_value_set_enum(value, p.lstm_algorithm);
      break;
    case PROP_CUDA_GRAPHS:
      g_value_set_boolean(value, p.cuda_graphs);
      break;
    case PROP_BATCH_SIZE:
      g_value_set_int(value, p.batch_size);
      break;
    case PROP_POST_MESSAGES:
      g_value_set_boolean(value, p.post_messages);
      break;
    case PROP_EMIT_EVENTS:
      g_value_set_boolean(value, p.emit_events);
      break;
    case PROP_COMPAT_RSTRANSCRIBE:
      g_value_set_boolean(value, p.compat_rstranscribe);
      break;
    case PROP_SHARED_ENGINE:
      g_value_set_boolean(value, p.shared_engine);
      break;
    case PROP_MAX_BATCH_WAIT:
      g_value_set_double(value, p.max_batch_wait);
      break;
    case PROP_STATS_INTERVAL:
      g_value_set_double(value, p.stats_interval);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK(self);
}

void speaker_change_finalize(GObject* object) {
  auto* self = GST_SPEAKER_CHANGE(object);
  delete self->stream;  // stops the worker if stop() never ran
  delete self->settings;
  self->stream = nullptr;
  self->settings = nullptr;
  G_OBJECT_CLASS(parent_class)->finalize(object);
}

constexpr GParamFlags kReadyFlags =
    static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
constexpr GParamFlags kPlayingFlags = static_cast<GParamFlags>(
    G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING);

}  // namespace

static void gst_speaker_change_class_init(GstSpeakerChangeClass* klass) {
  GObjectClass* gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass* element_class = GST_ELEMENT_CLASS(klass);
  GstBaseTransformClass* trans_class = GST_BASE_TRANSFORM_CLASS(klass);
  GstAudioFilterClass* filter_class = GST_AUDIO_FILTER_CLASS(klass);

  GST_DEBUG_CATEGORY_INIT(gst_speaker_change_debug, "speakerchange", 0, "speaker change detection");

  gobject_class->set_property = speaker_change_set_property;
  gobject_class->get_property = speaker_change_get_property;
  gobject_class->finalize = speaker_change_finalize;

  /**
   * GstSpeakerChange:model:
   *
   * Path of the pyannote segmentation-3.0 ONNX file, loaded on READY to PAUSED. Defaults to the
   * SPEAKERCHANGE_MODEL environment variable when set, else to the build tree's copy (meson's
   * -Dmodel) where it exists, else to the copy `meson install` put in
   * <datadir>/speakerchange/segmentation-3.0.onnx.
   */
  static const std::string model_blurb =
      std::string("Path of the segmentation-3.0 ONNX model (default: $") +
      speakerseg::kModelEnvironmentVariable + ", else " + speakerseg::build_model_path() +
      " where it exists, else " + speakerseg::installed_model_path() + ")";
  g_object_class_install_property(
      gobject_class, PROP_MODEL,
      g_param_spec_string("model", "Model", model_blurb.c_str(),
                          speakerseg::default_model_path().c_str(), kReadyFlags));
  /**
   * GstSpeakerChange:engine:
   *
   * Inference engine. This build has the CPU engine only: `auto` selects it and `cuda` makes the
   * READY to PAUSED transition fail with an error that says how to get a CUDA build.
   */
  g_object_class_install_property(
      gobject_class, PROP_ENGINE,
      g_param_spec_enum("engine", "Engine",
                        kHaveCudaEngine ? "Inference engine (this build: CPU and CUDA)"
                                        : "Inference engine (this build: CPU only)",
                        GST_TYPE_SPEAKER_CHANGE_ENGINE, GST_SPEAKER_CHANGE_ENGINE_AUTO,
                        kReadyFlags));
  /**
   * GstSpeakerChange:mode:
   *
   * How windows are grouped for inference. `latency` runs each window as soon as it is complete;
   * `throughput` runs up to #GstSpeakerChange:batch-size waiting windows at once; `auto` picks
   * `latency` for a live upstream and `throughput` otherwise (decided with a LATENCY query on the
   * first buffer). Live upstreams also let the worker drop late windows, whatever the mode.
   */
  g_object_class_install_property(
      gobject_class, PROP_MODE,
      g_param_spec_enum("mode", "Mode",
                        "How windows are grouped for inference: latency (one at a time), "
                        "throughput (batches of batch-size), auto (latency for a live upstream, "
                        "throughput otherwise)",
                        GST_TYPE_SPEAKER_CHANGE_MODE, GST_SPEAKER_CHANGE_MODE_AUTO, kReadyFlags));
  /**
   * GstSpeakerChange:step:
   *
   * Seconds between the ends of successive 10 s analysis windows: how often new results can
   * arrive, and how much inference the element does (10 / step windows per second of audio).
   */
  g_object_class_install_property(
      gobject_class, PROP_STEP,
      g_param_spec_double("step", "Step",
                          "Seconds between the ends of successive 10 s analysis windows", 0.1, 10.0,
                          kDefaultStep, kReadyFlags));
  /**
   * GstSpeakerChange:latency:
   *
   * Seconds of newer audio a frame waits for before it is final. Larger values give the later
   * windows a say and steadier results; changes are announced at least this late.
   */
  g_object_class_install_property(
      gobject_class, PROP_LATENCY,
      g_param_spec_double("latency", "Latency",
                          "Seconds of right context a frame waits for before it is final (changes "
                          "are announced at least this late)",
                          0.0, 60.0, kDefaultLatency, kReadyFlags));
  /**
   * GstSpeakerChange:min-speech:
   *
   * Seconds a new current speaker must hold the turn before it counts as a change.
   */
  g_object_class_install_property(
      gobject_class, PROP_MIN_SPEECH,
      g_param_spec_double("min-speech", "Minimum speech",
                          "Seconds a new current speaker must last to count as a change", 0.0, 10.0,
                          kDefaultMinSpeech, kReadyFlags));
  /**
   * GstSpeakerChange:min-silence:
   *
   * Seconds nobody must speak before "nobody" counts as a change (`speaker` "").
   */
  g_object_class_install_property(
      gobject_class, PROP_MIN_SILENCE,
      g_param_spec_double("min-silence", "Minimum silence",
                          "Seconds nobody must speak before \"nobody\" counts as a change", 0.0,
                          10.0, kDefaultMinSilence, kReadyFlags));
  /**
   * GstSpeakerChange:threads:
   *
   * CPU threads of the CPU engine; 0 uses every core OpenMP reports.
   */
  g_object_class_install_property(
      gobject_class, PROP_THREADS,
      g_param_spec_int("threads", "Threads", "CPU engine threads (0 = all cores)", 0, 256, 0,
                       kReadyFlags));
  /**
   * GstSpeakerChange:device:
   *
   * Index of the GPU the CUDA engine runs on. Must stay 0 in a build without the CUDA engine.
   */
  g_object_class_install_property(
      gobject_class, PROP_DEVICE,
      g_param_spec_int("device", "Device",
                       kHaveCudaEngine
                           ? "GPU index for the CUDA engine"
                           : "GPU index for the CUDA engine (must be 0 in a CPU-only build)",
                       0, 64, 0, kReadyFlags));
  /**
   * GstSpeakerChange:lstm-algorithm:
   *
   * cuDNN RNN algorithm of the CUDA engine's LSTM. Only `auto` is valid in a CPU-only build.
   */
  g_object_class_install_property(
      gobject_class, PROP_LSTM_ALGORITHM,
      g_param_spec_enum("lstm-algorithm", "LSTM algorithm",
                        "cuDNN RNN algorithm of the CUDA engine (only auto in a CPU-only build)",
                        GST_TYPE_SPEAKER_CHANGE_LSTM_ALGORITHM,
                        GST_SPEAKER_CHANGE_LSTM_ALGORITHM_AUTO, kReadyFlags));
  /**
   * GstSpeakerChange:cuda-graphs:
   *
   * Whether the CUDA engine captures each batch shape into a CUDA graph and replays it. Only
   * meaningful with the CUDA engine; ignored by the CPU engine.
   */
  g_object_class_install_property(
      gobject_class, PROP_CUDA_GRAPHS,
      g_param_spec_boolean("cuda-graphs", "CUDA graphs",
                           "Replay captured CUDA graphs (CUDA engine only; ignored on the CPU)",
                           TRUE, kReadyFlags));
  /**
   * GstSpeakerChange:batch-size:
   *
   * Most windows per inference in `throughput` mode. Non-live streams also queue up to twice this
   * many windows before the streaming thread waits for the worker; each waiting window holds
   * 640 kB, and the engine's working memory grows with the batch.
   */
  g_object_class_install_property(
      gobject_class, PROP_BATCH_SIZE,
      g_param_spec_int("batch-size", "Batch size", "Most windows per inference in throughput mode",
                       1, 1024, kDefaultBatchSize, kReadyFlags));
  /**
   * GstSpeakerChange:post-messages:
   *
   * Post a `speaker-change` element message on the bus for every change.
   */
  g_object_class_install_property(
      gobject_class, PROP_POST_MESSAGES,
      g_param_spec_boolean("post-messages", "Post messages",
                           "Post a 'speaker-change' element message on the bus for every change",
                           TRUE, kPlayingFlags));
  /**
   * GstSpeakerChange:emit-events:
   *
   * Push a serialized `speaker-change` custom downstream event for every change.
   */
  g_object_class_install_property(
      gobject_class, PROP_EMIT_EVENTS,
      g_param_spec_boolean("emit-events", "Emit events",
                           "Push a 'speaker-change' custom downstream event for every change", TRUE,
                           kPlayingFlags));
  /**
   * GstSpeakerChange:compat-rstranscribe:
   *
   * Also push the `rstranscribe/speaker-change` custom downstream event that the gst-plugins-rs
   * caption and translation elements understand.
   */
  g_object_class_install_property(
      gobject_class, PROP_COMPAT_RSTRANSCRIBE,
      g_param_spec_boolean("compat-rstranscribe", "rstranscribe compatibility",
                           "Also push 'rstranscribe/speaker-change' events (gst-plugins-rs "
                           "caption elements)",
                           FALSE, kPlayingFlags));
  /**
   * GstSpeakerChange:shared-engine:
   *
   * Share one engine and one inference worker with every other speakerchange of the process that
   * has the same model, engine kind, device, threads, lstm-algorithm, cuda-graphs and engine batch
   * size (batch-size, or 1 in `latency` mode). Their windows then run together in batches of up
   * to that size, each stream keeping its own speakers and results. %FALSE gives the element its
   * own engine and worker. The shared engine is released when the last element using it stops.
   */
  g_object_class_install_property(
      gobject_class, PROP_SHARED_ENGINE,
      g_param_spec_boolean("shared-engine", "Shared engine",
                           "Share one engine and worker with the other speakerchange elements of "
                           "the process that have the same model and engine settings",
                           TRUE, kReadyFlags));
  /**
   * GstSpeakerChange:max-batch-wait:
   *
   * With #GstSpeakerChange:shared-engine, the most seconds a window waits for windows of other
   * streams to fill a batch before it runs anyway. 0, the default, runs what is waiting as soon
   * as the worker is free (under load the batches fill by themselves). Ignored with an own
   * engine.
   */
  g_object_class_install_property(
      gobject_class, PROP_MAX_BATCH_WAIT,
      g_param_spec_double("max-batch-wait", "Maximum batch wait",
                          "Seconds a window may wait for other streams' windows to fill a shared "
                          "batch (0 = run as soon as the worker is free; shared engine only)",
                          0.0, 10.0, kDefaultMaxBatchWait, kReadyFlags));
  /**
   * GstSpeakerChange:stats-interval:
   *
   * Post a `speaker-change-stats` element message every this many seconds of stream time
   * (0: never). See the element description for its fields.
   */
  g_object_class_install_property(
      gobject_class, PROP_STATS_INTERVAL,
      g_param_spec_double("stats-interval", "Statistics interval",
                          "Seconds of stream time between 'speaker-change-stats' messages (0 = "
                          "none)",
                          0.0, 3600.0, 0.0, kReadyFlags));

  GstCaps* caps = gst_caps_from_string(
      "audio/x-raw, format = (string) { F32LE, S16LE }, rate = (int) 16000, channels = (int) 1, "
      "layout = (string) interleaved");
  gst_audio_filter_class_add_pad_templates(filter_class, caps);
  gst_caps_unref(caps);

  gst_element_class_set_static_metadata(
      element_class, "Speaker change detector", "Filter/Analyzer/Audio",
      "Announces who is speaking and when that changes (pyannote segmentation-3.0), as "
      "'speaker-change' element messages and custom downstream events (optionally also "
      "'rstranscribe/speaker-change' events); audio passes through untouched",
      "speakerchange developers");

  trans_class->start = speaker_change_start;
  trans_class->stop = speaker_change_stop;
  trans_class->transform_ip = speaker_change_transform_ip;
  trans_class->sink_event = speaker_change_sink_event;
  trans_class->transform_ip_on_passthrough = TRUE;
  filter_class->setup = speaker_change_setup;

  gst_type_mark_as_plugin_api(GST_TYPE_SPEAKER_CHANGE_ENGINE, static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(GST_TYPE_SPEAKER_CHANGE_MODE, static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(GST_TYPE_SPEAKER_CHANGE_LSTM_ALGORITHM,
                              static_cast<GstPluginAPIFlags>(0));
}

static void gst_speaker_change_init(GstSpeakerChange* self) {
  self->settings = new Settings();
  self->settings->model = speakerseg::default_model_path();
  self->stream = new Stream();
  gst_audio_info_init(&self->stream->info);
  GstBaseTransform* trans = GST_BASE_TRANSFORM(self);
  gst_base_transform_set_passthrough(trans, TRUE);
  gst_base_transform_set_gap_aware(trans, TRUE);
}
