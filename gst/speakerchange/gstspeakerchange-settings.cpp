#include "gstspeakerchange-settings.h"

#include <string>

#include "engines/engine_factory.h"
#include "model/model_location.h"

namespace gstspeakerchange {
namespace {

// Where a model is looked for by default, for a property's blurb: a packaged build's build-tree
// path is the installed one, said once.
std::string default_locations(const char* variable, const std::string& build,
                              const std::string& installed) {
  const std::string env = std::string("$") + variable;
  if (build == installed) return env + ", else " + installed;
  return env + ", else " + build + " where it exists, else " + installed;
}

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
  PROP_PRECISION,
  PROP_DEVICE,
  PROP_SERVER,
  PROP_REMOTE_MODEL,
  PROP_REMOTE_VOICE_MODEL,
  PROP_REMOTE_DEADLINE,
  PROP_OUTAGE_WAIT,
  PROP_LSTM_ALGORITHM,
  PROP_CUDA_GRAPHS,
  PROP_BATCH_SIZE,
  PROP_POST_MESSAGES,
  PROP_EMIT_EVENTS,
  PROP_COMPAT_RSTRANSCRIBE,
  PROP_SHARED_ENGINE,
  PROP_MAX_BATCH_WAIT,
  PROP_BATCHES_IN_FLIGHT,
  PROP_STITCH_THREADS,
  PROP_STATS_INTERVAL,
  PROP_REIDENTIFY,
  PROP_VOICE_MODEL,
  PROP_VOICEPRINTS,
  PROP_MAX_SPEAKERS,
  PROP_VOICE_THRESHOLD,
  PROP_ENROLLED_THRESHOLD,
  PROP_STALL_MARGIN,
};

constexpr GParamFlags kReadyFlags =
    static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
constexpr GParamFlags kPlayingFlags = static_cast<GParamFlags>(
    G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING);

}  // namespace

bool default_reidentify() {
  return g_file_test(speakerseg::default_voice_model_path().c_str(), G_FILE_TEST_IS_REGULAR);
}

const char* enum_nick(GType type, int value) {
  auto* klass = static_cast<GEnumClass*>(g_type_class_ref(type));
  const GEnumValue* v = g_enum_get_value(klass, value);
  const char* nick = v ? v->value_nick : "?";
  g_type_class_unref(klass);  // static enum types stay registered; the nick stays valid
  return nick;
}

void install_properties(GObjectClass* gobject_class) {
  /**
   * GstSpeakerChange:model:
   *
   * Path of the pyannote segmentation-3.0 ONNX file, loaded on READY to PAUSED. Defaults to the
   * SPEAKERCHANGE_MODEL environment variable when set, else to the build tree's copy (meson's
   * -Dmodel) where it exists, else to the copy `meson install` put in
   * <datadir>/speakerchange/segmentation-3.0.onnx.
   */
  static const std::string model_blurb =
      "Path of the segmentation-3.0 ONNX model (default: " +
      default_locations(speakerseg::kModelEnvironmentVariable, speakerseg::build_model_path(),
                        speakerseg::installed_model_path()) +
      ")";
  g_object_class_install_property(
      gobject_class, PROP_MODEL,
      g_param_spec_string("model", "Model", model_blurb.c_str(),
                          speakerseg::default_model_path().c_str(), kReadyFlags));
  /**
   * GstSpeakerChange:engine:
   *
   * Inference engine: `cpu`, `cuda` (a GPU of this machine), `remote` (an Open Inference
   * Protocol server, #GstSpeakerChange:server), or `auto` (CUDA where this build has it and a GPU
   * is found, else the CPU). An engine this build lacks makes the READY to PAUSED transition fail
   * with an error that says how to get it.
   */
  static const std::string engine_blurb =
      std::string("Inference engine (this build: CPU") +
      (speakerseg::build_has_cuda_engine() ? ", CUDA" : "") +
      (speakerseg::build_has_remote_engine() ? ", remote" : "") + ")";
  g_object_class_install_property(
      gobject_class, PROP_ENGINE,
      g_param_spec_enum("engine", "Engine", engine_blurb.c_str(), GST_TYPE_SPEAKER_CHANGE_ENGINE,
                        GST_SPEAKER_CHANGE_ENGINE_AUTO, kReadyFlags));
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
      g_param_spec_double(
          "step", "Step", "Seconds between the ends of successive 10 s analysis windows",
          speakerseg::kStepRange.min, speakerseg::kStepRange.max, kDefaultStep, kReadyFlags));
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
                          speakerseg::kLatencyRange.min, speakerseg::kLatencyRange.max,
                          kDefaultLatency, kReadyFlags));
  /**
   * GstSpeakerChange:min-speech:
   *
   * Seconds a new current speaker must hold the turn before it counts as a change.
   */
  g_object_class_install_property(
      gobject_class, PROP_MIN_SPEECH,
      g_param_spec_double("min-speech", "Minimum speech",
                          "Seconds a new current speaker must last to count as a change",
                          speakerseg::kMinSpeechRange.min, speakerseg::kMinSpeechRange.max,
                          kDefaultMinSpeech, kReadyFlags));
  /**
   * GstSpeakerChange:min-silence:
   *
   * Seconds nobody must speak before "nobody" counts as a change (`speaker` ""). A shorter pause
   * is part of the speaker's turn when they go on after it (a breath, a pause for thought); when
   * somebody else speaks next, a silence of 0.3 s or more before them is announced as a change
   * to nobody, together with the change to them.
   */
  g_object_class_install_property(
      gobject_class, PROP_MIN_SILENCE,
      g_param_spec_double(
          "min-silence", "Minimum silence",
          "Seconds nobody must speak before \"nobody\" counts as a change (a shorter "
          "pause stays in the speaker's turn unless somebody else speaks next)",
          speakerseg::kMinSilenceRange.min, speakerseg::kMinSilenceRange.max, kDefaultMinSilence,
          kReadyFlags));
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
   * GstSpeakerChange:precision:
   *
   * Precision of the CPU engine's LSTM products (both networks: the recurrence and the input
   * projections). `bf16` rounds weights and activations to bf16 and keeps the sums in fp32:
   * about 1.5x the windows per second on one core of an AMD Zen 4, but not the same numbers
   * (docs/performance.md measures both). It needs a CPU with AVX512_BF16; elsewhere starting
   * fails with an error that says so. The CUDA engine ignores it (with a warning). An
   * exploration: fp32 is the default.
   */
  g_object_class_install_property(
      gobject_class, PROP_PRECISION,
      g_param_spec_enum("precision", "Precision",
                        "CPU engine's LSTM products: fp32, or bf16 on CPUs with AVX512_BF16 "
                        "(faster, slightly different results)",
                        GST_TYPE_SPEAKER_CHANGE_PRECISION, GST_SPEAKER_CHANGE_PRECISION_FP32,
                        kReadyFlags));
  /**
   * GstSpeakerChange:device:
   *
   * Index of the GPU the CUDA engine runs on. Must stay 0 in a build without the CUDA engine.
   */
  g_object_class_install_property(
      gobject_class, PROP_DEVICE,
      g_param_spec_int("device", "Device",
                       speakerseg::build_has_cuda_engine()
                           ? "GPU index for the CUDA engine"
                           : "GPU index for the CUDA engine (must be 0 in a CPU-only build)",
                       0, 64, 0, kReadyFlags));
  /**
   * GstSpeakerChange:server:
   *
   * HOST:PORT of the Open Inference Protocol server (its gRPC port: 8001 for NVIDIA Triton, 8081
   * for KServe) that engine=remote sends windows and voice partials to (docs/scale-out.md). The
   * server and its models are checked on READY to PAUSED: unreachable, not ready, a missing model
   * or one of the wrong shape fails the transition with an error that names them.
   */
  g_object_class_install_property(
      gobject_class, PROP_SERVER,
      g_param_spec_string("server", "Server",
                          speakerseg::build_has_remote_engine()
                              ? "HOST:PORT of the inference server's gRPC endpoint (engine=remote)"
                              : "HOST:PORT of the inference server (engine=remote; not in this "
                                "build)",
                          "", kReadyFlags));
  /**
   * GstSpeakerChange:remote-model:
   *
   * The segmentation network's name on #GstSpeakerChange:server ([B, 1, samples] `input` ->
   * [B, frames, 7] `output`, as deploy/triton names it).
   */
  g_object_class_install_property(
      gobject_class, PROP_REMOTE_MODEL,
      g_param_spec_string("remote-model", "Remote model",
                          "Name of the segmentation model on the server (engine=remote)",
                          "segmentation-3.0", kReadyFlags));
  /**
   * GstSpeakerChange:remote-voice-model:
   *
   * The voice encoder's name on #GstSpeakerChange:server ([B, frames, 40] `mel` -> [B, 256]
   * `embedding`), used with #GstSpeakerChange:reidentify.
   */
  g_object_class_install_property(
      gobject_class, PROP_REMOTE_VOICE_MODEL,
      g_param_spec_string("remote-voice-model", "Remote voice model",
                          "Name of the voice encoder on the server (engine=remote, reidentify)",
                          "voice-encoder-ge2e", kReadyFlags));
  /**
   * GstSpeakerChange:remote-deadline:
   *
   * Milliseconds the remote engine waits for one request's answer (a batch of windows) before it
   * gives up on it.
   */
  g_object_class_install_property(
      gobject_class, PROP_REMOTE_DEADLINE,
      g_param_spec_int("remote-deadline", "Remote deadline",
                       "Milliseconds to wait for the server's answer to one request "
                       "(engine=remote)",
                       1, 600000, 10000, kReadyFlags));
  /**
   * GstSpeakerChange:outage-wait:
   *
   * Seconds a window waits for an engine that cannot answer for now (engine=remote: the server
   * lost, overloaded or past #GstSpeakerChange:remote-deadline) before it is dropped unanalysed.
   * The element then carries on: the audio passes untouched, a warning says why, and
   * `speaker-change-unanalysed` messages say how much stream time went unanalysed; analysis
   * resumes by itself when the engine answers again. Longer waits lose less of a short outage and
   * delay announcements more.
   */
  g_object_class_install_property(
      gobject_class, PROP_OUTAGE_WAIT,
      g_param_spec_double("outage-wait", "Outage wait",
                          "Seconds a window waits for an unavailable engine (engine=remote: the "
                          "server lost) before it goes unanalysed",
                          0.0, 3600.0, speakerseg::SharedScheduler::kDefaultOutageWait,
                          kReadyFlags));
  /**
   * GstSpeakerChange:lstm-algorithm:
   *
   * cuDNN RNN algorithm of the CUDA engine's LSTM. Only `auto` is valid in a CPU-only build.
   * `persist-static-small-h` is the segmentation LSTM's only: cuDNN refuses it for the voice
   * encoder's 256-wide LSTM, which then takes `auto` (reidentify on the GPU).
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
   * has the same model, engine kind, device, threads, precision, lstm-algorithm, cuda-graphs and
   * engine batch size (batch-size, or 1 in `latency` mode). Their windows then run together in
   * batches of up to that size, each stream keeping its own speakers and results. %FALSE gives the
   * element its own engine and worker. The shared engine is released when the last element using it
   * stops.
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
   * GstSpeakerChange:batches-in-flight:
   *
   * With #GstSpeakerChange:shared-engine, how many batches may run at once, each on an engine of
   * its own (a CUDA stream with its buffers and graphs, or a remote engine's requests), so that
   * one batch is assembled, stitched and handed back while another runs. Part of what the shared
   * engine is keyed by. With the CPU engine each has its own #GstSpeakerChange:threads. Ignored
   * with an own engine.
   */
  g_object_class_install_property(
      gobject_class, PROP_BATCHES_IN_FLIGHT,
      g_param_spec_int("batches-in-flight", "Batches in flight",
                       "Batches the shared engine may run at once, each on an engine of its own "
                       "(shared engine only)",
                       1, 8, 1, kReadyFlags));
  /**
   * GstSpeakerChange:stitch-threads:
   *
   * With #GstSpeakerChange:shared-engine, how many threads stitch the channels of a batch into
   * their time lines once its inference is done (and, with #GstSpeakerChange:reidentify, make
   * their utterances' mel spectrograms and decide their voices): the batch's worker and this many
   * minus one helpers, shared by every batch in flight; 0 (the default): one per core, at most
   * 8. With identity by voice that work is most of the host's, and one thread for every channel
   * is what limited how many a process served (docs/performance.md, "Identity's host side, and
   * stitching beside the worker"). Part of what the shared engine is keyed by. Ignored with an
   * own engine.
   */
  g_object_class_install_property(
      gobject_class, PROP_STITCH_THREADS,
      g_param_spec_int("stitch-threads", "Stitch threads",
                       "Threads that stitch a shared batch's streams after inference, the "
                       "worker's included (0 = one per core, at most 8; shared engine only)",
                       0, 64, 0, kReadyFlags));
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
  /**
   * GstSpeakerChange:reidentify:
   *
   * Name speakers by voice, all stream long: each speaker's clean speech (where they alone are
   * active) is embedded with the GE2E voice encoder (#GstSpeakerChange:voice-model), so that a
   * speaker who comes back after others or after silence gets their label back, two voices
   * heard in one window are never given one label, a label that two people came to share is
   * split, and the people in #GstSpeakerChange:voiceprints are announced by name. On by default
   * where the voice model is installed; %TRUE without it fails the READY to PAUSED transition
   * with an error that says how to get it. See docs/identity.md for what it costs and gains.
   */
  g_object_class_install_property(
      gobject_class, PROP_REIDENTIFY,
      g_param_spec_boolean("reidentify", "Re-identify",
                           "Name speakers by voice all stream long (default: on where the voice "
                           "model is installed)",
                           default_reidentify(), kReadyFlags));
  /**
   * GstSpeakerChange:voice-model:
   *
   * Path of the GE2E voice encoder (voice-encoder-ge2e.onnx, made by scripts/setup.sh from the
   * resemblyzer 0.1.4 wheel). Defaults to the SPEAKERCHANGE_VOICE_MODEL environment variable
   * when set, else the build tree's copy where it exists, else the installed one.
   */
  static const std::string voice_blurb =
      "Path of the GE2E voice encoder ONNX file (default: " +
      default_locations(speakerseg::kVoiceModelEnvironmentVariable,
                        speakerseg::build_voice_model_path(),
                        speakerseg::installed_voice_model_path()) +
      ")";
  g_object_class_install_property(
      gobject_class, PROP_VOICE_MODEL,
      g_param_spec_string("voice-model", "Voice model", voice_blurb.c_str(),
                          speakerseg::default_voice_model_path().c_str(), kReadyFlags));
  /**
   * GstSpeakerChange:voiceprints:
   *
   * Path of a voiceprints file (JSON, made with `speakerseg enroll`): the people to announce by
   * name when their voice is recognised. Empty: nobody is known in advance. Read on READY to
   * PAUSED; a missing or malformed file, or one made with another encoder, fails the transition.
   */
  g_object_class_install_property(
      gobject_class, PROP_VOICEPRINTS,
      g_param_spec_string("voiceprints", "Voiceprints",
                          "Voiceprints file of the people to announce by name (speakerseg enroll; "
                          "needs reidentify)",
                          "", kReadyFlags));
  /**
   * GstSpeakerChange:max-speakers:
   *
   * Most different people a stream is told apart into (enrolled ones included); beyond it, a new
   * voice is given the nearest known one. 0: no limit (a stream remembers at most 1000 voices,
   * forgetting the least recently heard; enrolled ones are never forgotten).
   */
  g_object_class_install_property(
      gobject_class, PROP_MAX_SPEAKERS,
      g_param_spec_int("max-speakers", "Maximum speakers",
                       "Most people a stream is told apart into (0 = no limit; needs reidentify)",
                       static_cast<int>(speakerseg::kMaxSpeakersRange.min),
                       static_cast<int>(speakerseg::kMaxSpeakersRange.max), 0, kReadyFlags));
  /**
   * GstSpeakerChange:voice-threshold:
   *
   * Cosine similarity of GE2E voice embeddings at or above which a known voice takes a turn,
   * if it is also ahead of every other voice by a margin of 0.1 (tuned on the train programmes
   * and meetings at latency 2 s, docs/identity.md; between two telephone-band voices the bar is
   * 0.10 higher). Higher: fewer people merged, more returning speakers given a new label. 0 (the
   * default): 0.78.
   */
  g_object_class_install_property(
      gobject_class, PROP_VOICE_THRESHOLD,
      g_param_spec_double("voice-threshold", "Voice threshold",
                          "Cosine similarity at which a voice is taken for a known person "
                          "(0 = the tuned 0.78)",
                          speakerseg::kVoiceThresholdRange.min,
                          speakerseg::kVoiceThresholdRange.max,
                          kCoreDefaults.identity.match_threshold, kReadyFlags));
  /**
   * GstSpeakerChange:enrolled-threshold:
   *
   * Cosine similarity at or above which an enrolled person (#GstSpeakerChange:voiceprints) takes a
   * turn, if they are also ahead of every other voice by a margin of 0.1. Lower than
   * #GstSpeakerChange:voice-threshold because an enrolment usually comes from another recording
   * (another day, microphone or room), which scores the person's own turns lower than their voice
   * learnt from the stream does, and a short enrolment lower still (tuned on the train programmes
   * at latency 2 s with enrolments of 6-20 s from the same and from another microphone,
   * docs/identity.md). Higher: an enrolled name given less often, to others and to the person.
   * 0 (the default): 0.68. An anonymous voice the stream grew to 6 s or more of speech is taken
   * for an enrolled person its voiceprint matches from this threshold + 0.80 -
   * #GstSpeakerChange:voice-threshold (0.70 by default: 0.80 merges two anonymous voices), unless
   * a turn's evidence has named that person since the voice was first heard. A voiceprint
   * enrolled from telephone-band speech is matched against telephone-band speech 0.1 lower, as
   * any two telephone voices are.
   */
  g_object_class_install_property(
      gobject_class, PROP_ENROLLED_THRESHOLD,
      g_param_spec_double("enrolled-threshold", "Enrolled threshold",
                          "Cosine similarity at which a voice is taken for an enrolled person "
                          "(0 = the tuned 0.68)",
                          speakerseg::kEnrolledThresholdRange.min,
                          speakerseg::kEnrolledThresholdRange.max,
                          kCoreDefaults.identity.enrolled_threshold, kReadyFlags));
  /**
   * GstSpeakerChange:stall-margin:
   *
   * With a live upstream: a feed counts as stalled once the pipeline clock has run this many
   * seconds, on top of upstream's latency and #GstSpeakerChange:latency, past the end of the newest
   * audio (buffers, GAP events with a duration), and this plus #GstSpeakerChange:latency after
   * anything (a GAP event without a duration too) last arrived, as when a network stream drops
   * without an EOS. The element then announces what the audio it holds still decides (as at EOS),
   * and a change to nobody with `stalled` %TRUE; analysis resumes with the next audio, on a new
   * time line. The margin absorbs network jitter and bursts. -1 (any negative value): never (for
   * sources that legitimately send nothing for long, without GAP events). Not used with a non-live
   * upstream.
   */
  g_object_class_install_property(
      gobject_class, PROP_STALL_MARGIN,
      g_param_spec_double("stall-margin", "Stall margin",
                          "Live upstream: seconds, beyond upstream's latency and latency, the "
                          "clock may run past the newest audio before the feed counts as stalled "
                          "and nobody is announced (-1 = never)",
                          speakerseg::kStallMarginRange.min, speakerseg::kStallMarginRange.max,
                          speakerseg::kDefaultStallMargin, kReadyFlags));

  gst_type_mark_as_plugin_api(GST_TYPE_SPEAKER_CHANGE_ENGINE, static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(GST_TYPE_SPEAKER_CHANGE_MODE, static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(GST_TYPE_SPEAKER_CHANGE_LSTM_ALGORITHM,
                              static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(GST_TYPE_SPEAKER_CHANGE_PRECISION, static_cast<GstPluginAPIFlags>(0));
}

bool set_property(Settings& p, guint prop_id, const GValue* value) {
  switch (prop_id) {
    case PROP_MODEL: {
      const char* v = g_value_get_string(value);
      p.model = v ? v : "";
      break;
    }
    case PROP_ENGINE:
      p.engine = static_cast<GstSpeakerChangeEngine>(g_value_get_enum(value));
      break;
    case PROP_SERVER: {
      const char* v = g_value_get_string(value);
      p.server = v ? v : "";
      break;
    }
    case PROP_REMOTE_MODEL: {
      const char* v = g_value_get_string(value);
      p.remote_model = v ? v : "";
      break;
    }
    case PROP_REMOTE_VOICE_MODEL: {
      const char* v = g_value_get_string(value);
      p.remote_voice_model = v ? v : "";
      break;
    }
    case PROP_REMOTE_DEADLINE:
      p.remote_deadline_ms = g_value_get_int(value);
      break;
    case PROP_OUTAGE_WAIT:
      p.outage_wait = g_value_get_double(value);
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
    case PROP_PRECISION:
      p.precision = static_cast<GstSpeakerChangePrecision>(g_value_get_enum(value));
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
    case PROP_BATCHES_IN_FLIGHT:
      p.batches_in_flight = g_value_get_int(value);
      break;
    case PROP_STITCH_THREADS:
      p.stitch_threads = g_value_get_int(value);
      break;
    case PROP_STATS_INTERVAL:
      p.stats_interval = g_value_get_double(value);
      break;
    case PROP_REIDENTIFY:
      p.reidentify = g_value_get_boolean(value);
      break;
    case PROP_VOICE_MODEL: {
      const char* v = g_value_get_string(value);
      p.voice_model = v ? v : "";
      break;
    }
    case PROP_VOICEPRINTS: {
      const char* v = g_value_get_string(value);
      p.voiceprints = v ? v : "";
      break;
    }
    case PROP_MAX_SPEAKERS:
      p.max_speakers = g_value_get_int(value);
      break;
    case PROP_VOICE_THRESHOLD:
      p.voice_threshold = g_value_get_double(value);
      break;
    case PROP_ENROLLED_THRESHOLD:
      p.enrolled_threshold = g_value_get_double(value);
      break;
    case PROP_STALL_MARGIN:
      p.stall_margin = g_value_get_double(value);
      break;
    default:
      return false;
  }
  return true;
}

bool get_property(const Settings& p, guint prop_id, GValue* value) {
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
    case PROP_PRECISION:
      g_value_set_enum(value, p.precision);
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
    case PROP_BATCHES_IN_FLIGHT:
      g_value_set_int(value, p.batches_in_flight);
      break;
    case PROP_STITCH_THREADS:
      g_value_set_int(value, p.stitch_threads);
      break;
    case PROP_STATS_INTERVAL:
      g_value_set_double(value, p.stats_interval);
      break;
    case PROP_REIDENTIFY:
      g_value_set_boolean(value, p.reidentify);
      break;
    case PROP_VOICE_MODEL:
      g_value_set_string(value, p.voice_model.c_str());
      break;
    case PROP_SERVER:
      g_value_set_string(value, p.server.c_str());
      break;
    case PROP_REMOTE_MODEL:
      g_value_set_string(value, p.remote_model.c_str());
      break;
    case PROP_REMOTE_VOICE_MODEL:
      g_value_set_string(value, p.remote_voice_model.c_str());
      break;
    case PROP_REMOTE_DEADLINE:
      g_value_set_int(value, p.remote_deadline_ms);
      break;
    case PROP_OUTAGE_WAIT:
      g_value_set_double(value, p.outage_wait);
      break;
    case PROP_VOICEPRINTS:
      g_value_set_string(value, p.voiceprints.c_str());
      break;
    case PROP_MAX_SPEAKERS:
      g_value_set_int(value, p.max_speakers);
      break;
    case PROP_VOICE_THRESHOLD:
      g_value_set_double(value, p.voice_threshold);
      break;
    case PROP_ENROLLED_THRESHOLD:
      g_value_set_double(value, p.enrolled_threshold);
      break;
    case PROP_STALL_MARGIN:
      g_value_set_double(value, p.stall_margin);
      break;
    default:
      return false;
  }
  return true;
}

}  // namespace gstspeakerchange

// ---------------------------------------------------------------------------------------------
// The element's enum types (declared in gstspeakerchange.h)

GType gst_speaker_change_engine_get_type(void) {
  static gsize id = 0;
  static const GEnumValue values[] = {
      {GST_SPEAKER_CHANGE_ENGINE_AUTO, "The best engine this build has (CPU in a CPU-only build)",
       "auto"},
      {GST_SPEAKER_CHANGE_ENGINE_CPU, "CPU engine (oneDNN)", "cpu"},
      {GST_SPEAKER_CHANGE_ENGINE_CUDA, "CUDA engine (cuDNN); needs a build with -Dcuda=enabled",
       "cuda"},
      {GST_SPEAKER_CHANGE_ENGINE_REMOTE,
       "An Open Inference Protocol server (the server property: Triton, KServe); needs a build "
       "with -Dremote=enabled",
       "remote"},
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
       "cuDNN persistent kernel for small hidden sizes (the segmentation LSTM only: the voice "
       "encoder takes auto)",
       "persist-static-small-h"},
      {GST_SPEAKER_CHANGE_LSTM_ALGORITHM_PERSIST_DYNAMIC,
       "cuDNN dynamically compiled persistent kernel", "persist-dynamic"},
      {0, nullptr, nullptr},
  };
  if (g_once_init_enter(&id))
    g_once_init_leave(&id, g_enum_register_static("GstSpeakerChangeLstmAlgorithm", values));
  return id;
}

GType gst_speaker_change_precision_get_type(void) {
  static gsize id = 0;
  static const GEnumValue values[] = {
      {GST_SPEAKER_CHANGE_PRECISION_FP32, "Every product in fp32", "fp32"},
      {GST_SPEAKER_CHANGE_PRECISION_BF16,
       "LSTM products in bf16, sums in fp32 (CPUs with AVX512_BF16)", "bf16"},
      {0, nullptr, nullptr},
  };
  if (g_once_init_enter(&id))
    g_once_init_leave(&id, g_enum_register_static("GstSpeakerChangePrecision", values));
  return id;
}
