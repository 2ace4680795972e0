// speakerseg: the core engine's own front door. Runs segmentation-3.0 over a recording and writes
// the per-window log-probabilities, or measures the engine's speed.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engines/engine_factory.h"
#include "features/mel_spectrogram.h"
#include "identity/speaker_identifier.h"
#include "identity/utterance_embedding.h"
#include "identity/voiceprints.h"
#include "io/audio_file.h"
#include "io/npy.h"
#include "model/model_location.h"
#include "replay_engine.h"
#include "scheduling/async_segmenter.h"
#include "scheduling/shared_segmenter.h"
#include "streaming/sliding_windows.h"
#include "streaming/speaker_change_detector.h"
#include "streaming/stream_settings.h"
#include "streaming/window_buffer.h"

using namespace speakerseg;

namespace {

struct Args {
  std::map<std::string, std::string> values;
  bool flag(const char* name) const { return values.count(name) != 0; }
  std::string get(const char* name, const std::string& fallback = "") const {
    auto it = values.find(name);
    return it == values.end() ? fallback : it->second;
  }
  double number(const char* name, double fallback) const {
    auto it = values.find(name);
    if (it == values.end()) return fallback;
    char* end = nullptr;
    const double v = std::strtod(it->second.c_str(), &end);
    if (end == it->second.c_str() || *end)
      throw std::invalid_argument(std::string("--") + name + " takes a number, got '" + it->second +
                                  "'");
    return v;
  }
};

// --input, else the recording of the machine this was built on (../shared's sample.wav), which an
// installed tool usually lacks: then say to pass --input.
std::vector<float> input_or_sample(const Args& a) {
  if (a.flag("input")) return read_mono_16k(a.get("input"));
  struct stat st {};
  if (stat(SPEAKERSEG_SAMPLE_WAV, &st) != 0)
    throw std::invalid_argument(
        std::string("no --input FILE.wav given, and the default recording (") +
        SPEAKERSEG_SAMPLE_WAV + ", where this tool was built) is not here");
  return read_mono_16k(SPEAKERSEG_SAMPLE_WAV);
}

std::shared_ptr<const SegmentationModel> load_model(const Args& a) {
  return SegmentationModel::load_onnx(
      a.get("model", default_model_path()),
      std::string("pass its path with --model or in $") + kModelEnvironmentVariable);
}

std::shared_ptr<const VoiceModel> load_voice_model(const Args& a) {
  return VoiceModel::load_onnx(
      a.get("voice-model", default_voice_model_path()),
      std::string("pass its path with --voice-model or in $") + kVoiceModelEnvironmentVariable);
}

// Every option of every command: a misspelt one is an error, not a setting silently left at its
// default (an option a command does not use is still ignored).
constexpr const char* kFlags[] = {
    "device-audio", "fp16", "json",       "lstm-seq-major", "no-cuda-graphs", "offline", "own",
    "profile",      "raw",  "reidentify", "replay",         "tf32",           "verbose"};
constexpr const char* kValued[] = {"batch",
                                   "channels",
                                   "clean-others",
                                   "deadline-ms",
                                   "decision-seconds",
                                   "device",
                                   "end",
                                   "engine",
                                   "enrolled-merge-threshold",
                                   "enrolled-threshold",
                                   "evidence-seconds",
                                   "feeders",
                                   "in-flight",
                                   "input",
                                   "keep-floor-long",
                                   "keep-floor-short",
                                   "latency",
                                   "lstm-algorithm",
                                   "match-threshold",
                                   "max-speakers",
                                   "merge-threshold",
                                   "min-gap",
                                   "min-silence",
                                   "min-speech",
                                   "model",
                                   "name",
                                   "narrowband-shift",
                                   "onset",
                                   "output",
                                   "partial-step",
                                   "precision",
                                   "remote-model",
                                   "remote-voice-model",
                                   "replay-device-ms",
                                   "rttm",
                                   "runs",
                                   "seconds",
                                   "server",
                                   "start",
                                   "step",
                                   "stitch-threads",
                                   "switch-margin",
                                   "takeover-threshold",
                                   "threads",
                                   "turn-gap",
                                   "uri",
                                   "voice-lead",
                                   "voice-lead-floor",
                                   "voice-margin",
                                   "voice-model",
                                   "voice-threshold",
                                   "voiceprints",
                                   "warmup"};

template <size_t N>
bool listed(const char* const (&names)[N], const std::string& key) {
  return std::find_if(std::begin(names), std::end(names),
                      [&](const char* n) { return key == n; }) != std::end(names);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 2; i < argc; ++i) {
    std::string key = argv[i];
    if (key.rfind("--", 0) != 0) throw std::invalid_argument("unexpected argument '" + key + "'");
    key = key.substr(2);
    if (listed(kFlags, key)) {
      a.values[key] = "1";
    } else if (listed(kValued, key)) {
      if (i + 1 >= argc) throw std::invalid_argument("--" + key + " needs a value");
      a.values[key] = argv[++i];
    } else {
      throw std::invalid_argument("unknown option --" + key);
    }
  }
  return a;
}

// An integer option from `lo` to `hi`; `rule` says so in the error.
int integer_option(const Args& a, const char* name, int fallback, int lo, int hi,
                   const std::string& rule) {
  const double v = a.number(name, fallback);
  if (v < lo || v > hi || v != std::floor(v))
    throw std::invalid_argument(std::string("--") + name + " must be " + rule);
  return static_cast<int>(v);
}

int positive(const Args& a, const char* name, int fallback) {
  return integer_option(a, name, fallback, 1, std::numeric_limits<int>::max(),
                        "a positive integer");
}

// The engines --engine and its options ask for (core/engines/engine_factory.h decides): what
// the factory notices goes to stderr, the routine (auto found no GPU) only with --verbose.
EngineFactory engine_factory(const Args& a) {
  EngineSettings s;
  const std::string engine = a.get("engine", "auto");
  if (!parse_engine_kind(engine, &s.kind))
    throw std::invalid_argument("--engine takes cpu, cuda, remote or auto, got '" + engine + "'");
  s.threads = a.flag("threads") ? positive(a, "threads", 1) : 0;
  if (a.flag("precision") && !parse_cpu_precision(a.get("precision"), &s.precision))
    throw std::invalid_argument(
        "--precision takes fp32, bf16, fp16-emulated, bf16-emulated, tf32-emulated, "
        "fp16-emulated-fp32-sinc, bf16-emulated-fp32-sinc or tf32-emulated-fp32-sinc, got '" +
        a.get("precision") + "'");
  if (a.flag("lstm-algorithm") && !parse_lstm_algorithm(a.get("lstm-algorithm"), &s.lstm_algorithm))
    throw std::invalid_argument(
        "--lstm-algorithm takes standard, persist-static-small-h, persist-dynamic or auto");
  const double device = a.number("device", 0);
  if (device < 0 || device != std::floor(device))
    throw std::invalid_argument("--device must be a GPU index (0, 1, ...)");
  s.device = static_cast<int>(device);
  s.cuda_graphs = !a.flag("no-cuda-graphs");
  s.tf32 = a.flag("tf32");
  s.fp16 = a.flag("fp16");
  if (s.tf32 && s.fp16) throw std::invalid_argument("--tf32 and --fp16 exclude each other");
  s.lstm_seq_major = a.flag("lstm-seq-major");
  // With --replay the replay engine does its host side (live), not the engine it replays.
  s.device_audio = a.flag("device-audio") && !a.flag("replay");
  s.remote.server = a.get("server");
  s.remote.model = a.get("remote-model", s.remote.model);
  s.remote.voice_model = a.get("remote-voice-model", s.remote.voice_model);
  s.remote.deadline_ms = positive(a, "deadline-ms", s.remote.deadline_ms);
  EngineFactory::Reporters reporters;
  reporters.notice = [verbose = a.flag("verbose")](const EngineNotice& n) {
    if (n.level != EngineNotice::kInfo || verbose)
      std::fprintf(stderr, "speakerseg: %s\n", n.text.c_str());
  };
  try {
    return EngineFactory(s, reporters);
  } catch (const EngineSettingsError& e) {
    throw std::invalid_argument(std::string(e.what()) + " (" + e.hint() + ")");
  }
}

// The segmentation engine of `engines`, for batches up to `max_batch`; the model is read only
// where the engine runs here.
std::unique_ptr<SegmentationEngine> make_engine(EngineFactory& engines, const Args& a,
                                                int max_batch) {
  return engines.segmentation(engines.needs_local_models() ? load_model(a) : nullptr, max_batch);
}

int cmd_info(const Args& a) {
  auto model = load_model(a);
  std::printf(
      "model: %s\nparameters: %zu\nsinc filters: %s\nwindow: %d samples -> %d frames of %d "
      "classes\n",
      model->source.c_str(), model->parameter_count(),
      model->sinc_computed_from_band_edges ? "computed from low_hz_/band_hz_" : "folded constant",
      kWindowSamples, frames_for_samples(kWindowSamples), kClasses);
#ifdef SPEAKERSEG_HAVE_CUDA
  std::printf("%s", cuda_environment().c_str());
#endif
  return 0;
}

// Log-probabilities [windows][frames][kClasses] of `audio`'s 10 s windows every `step` samples
// (window_starts: pyannote's sliding), `batch` windows per forward pass; `progress` after each.
std::vector<float> window_logprobs(SegmentationEngine& engine, const std::vector<float>& audio,
                                   int step, int batch,
                                   const std::function<void(size_t, size_t)>& progress = nullptr) {
  const auto starts = window_starts(static_cast<int64_t>(audio.size()), kWindowSamples, step);
  const size_t per_window = static_cast<size_t>(frames_for_samples(kWindowSamples)) * kClasses;
  std::vector<float> out(starts.size() * per_window);
  std::vector<float> windows(static_cast<size_t>(batch) * kWindowSamples);
  for (size_t first = 0; first < starts.size(); first += batch) {
    const int n = static_cast<int>(std::min<size_t>(batch, starts.size() - first));
    for (int i = 0; i < n; ++i)
      extract_window(audio, starts[first + i], kWindowSamples,
                     &windows[static_cast<size_t>(i) * kWindowSamples]);
    engine.forward(windows.data(), n, kWindowSamples, &out[first * per_window]);
    if (progress) progress(first + n, starts.size());
  }
  return out;
}

int cmd_logits(const Args& a) {
  const std::string input = a.get("input"), output = a.get("output");
  if (input.empty() || output.empty())
    throw std::invalid_argument("logits needs --input and --output");
  const double step_s = a.number("step", 1.0);
  check_range(kStepRange, step_s);
  const int batch = positive(a, "batch", 32);
  EngineFactory engines = engine_factory(a);
  auto engine = make_engine(engines, a, batch);
  const std::vector<float> audio = read_mono_16k(input);
  const int step = static_cast<int>(std::lround(step_s * kSampleRate));
  const bool progress = isatty(STDERR_FILENO);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<float> out =
      window_logprobs(*engine, audio, step, batch, [&](size_t done, size_t total) {
        if (progress) std::fprintf(stderr, "\rspeakerseg: %zu/%zu windows", done, total);
      });
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int frames = frames_for_samples(kWindowSamples);
  const int64_t windows =
      static_cast<int64_t>(out.size() / (static_cast<size_t>(frames) * kClasses));
  write_npy(output, {windows, frames, kClasses}, out.data());
  std::fprintf(
      stderr, "%sspeakerseg: %lld windows of %s (%.1f s of audio) in %.2f s with %s -> %s\n",
      progress ? "\r" : "", static_cast<long long>(windows), input.c_str(),
      audio.size() / double(kSampleRate), dt, engine->description().c_str(), output.c_str());
  return 0;
}

// The voice encoder on the device of `engines`' segmentation engine.
std::unique_ptr<VoiceEncoder> make_voice_encoder(EngineFactory& engines, const Args& a) {
  return engines.voice(engines.needs_local_models() ? load_voice_model(a) : nullptr);
}

// The samples [--start, --end) of --input, checked against the file's length.
std::vector<float> read_clip(const Args& a) {
  const std::string input = a.get("input");
  std::vector<float> audio = read_mono_16k(input);
  const double seconds = audio.size() / double(kSampleRate);
  const double start = a.number("start", 0), end = a.number("end", seconds);
  if (start < 0 || end > seconds + 1e-9 || !(end > start))
    throw std::invalid_argument("--start/--end must satisfy 0 <= start < end <= " +
                                std::to_string(seconds) + " (the length of " + input + ")");
  const auto first = static_cast<size_t>(std::llround(start * kSampleRate));
  const auto last = std::min(audio.size(), static_cast<size_t>(std::llround(end * kSampleRate)));
  return std::vector<float>(audio.begin() + first, audio.begin() + last);
}

// Partials per second of the voice encoder on the file's partials (160 mel frames every 80),
// repeated to fill the batch, after one warm-up call: the voice side of
// scripts/benchmarks/bench_vs_onnxruntime.py.
int cmd_bench_voice(const Args& a) {
  const int batch = positive(a, "batch", 1);
  const double seconds = a.number("seconds", 3.0);
  EngineFactory engines = engine_factory(a);
  auto encoder = make_voice_encoder(engines, a);
  const std::vector<float> audio = input_or_sample(a);
  const MelSpectrogram mel;
  const std::vector<float> spectrum = mel.compute(audio.data(), static_cast<int64_t>(audio.size()));
  const auto starts =
      partial_starts(MelSpectrogram::frames_for(static_cast<int64_t>(audio.size())));
  if (starts.empty()) throw std::invalid_argument("the input is shorter than one partial (1.59 s)");
  const size_t per = static_cast<size_t>(kPartialFrames) * kMelBands;
  std::vector<float> partials(batch * per), out(static_cast<size_t>(batch) * kEmbeddingDim);
  for (int i = 0; i < batch; ++i)
    std::copy_n(&spectrum[static_cast<size_t>(starts[i % starts.size()]) * kMelBands], per,
                &partials[i * per]);
  encoder->embed(partials.data(), batch, kPartialFrames, out.data());  // warm-up
  std::vector<double> times;
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
             seconds ||
         times.size() < 3) {
    const auto t = std::chrono::steady_clock::now();
    encoder->embed(partials.data(), batch, kPartialFrames, out.data());
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
  }
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  std::printf(
      "{\"encoder\": \"%s\", \"batch\": %d, \"runs\": %zu, \"ms_per_call\": %.3f, "
      "\"partials_per_s\": %.1f}\n",
      encoder->description().c_str(), batch, times.size(), 1e3 * median, batch / median);
  return 0;
}

// The changes `detector` finds in `audio`, fed in 20 ms buffers as a live source would feed it.
std::vector<SpeakerChange> detect_changes(SpeakerChangeDetector& detector,
                                          const std::vector<float>& audio) {
  std::vector<SpeakerChange> changes;
  const size_t chunk = kSampleRate / 50;
  for (size_t i = 0; i < audio.size(); i += chunk) {
    detector.push(&audio[i], std::min(chunk, audio.size() - i));
    for (auto& c : detector.take_changes()) changes.push_back(std::move(c));
  }
  detector.finish();
  for (auto& c : detector.take_changes()) changes.push_back(std::move(c));
  return changes;
}

// One stretch of the current-speaker timeline that `changes` announce.
struct Turn {
  std::string speaker;
  int64_t start, end;  // samples
};

// Everyone's turns, each until the next change or `end` (the end of the audio), with the names
// revisions gave them; nobody's left out.
std::vector<Turn> speaker_turns(const std::vector<SpeakerChange>& all, int64_t end) {
  const std::vector<SpeakerChange> changes = apply_revisions(all);
  std::vector<Turn> turns;
  for (size_t i = 0; i < changes.size(); ++i) {
    const int64_t stop = i + 1 < changes.size() ? changes[i + 1].sample : end;
    if (!changes[i].speaker.empty() && stop > changes[i].sample)
      turns.push_back({changes[i].speaker, changes[i].sample, stop});
  }
  return turns;
}

// An enrolment embeds the speaker's speech, not the pauses between their phrases: silences from
// this long are left out (the stream's min-silence keeps shorter pauses inside a turn, for
// announcing; the voiceprints were tuned on enrolments cut this way).
constexpr double kEnrolmentPause = 0.3;

// The clip's speech, joined: the turns the streaming logic finds in it offline (as `changes
// --offline` would), pauses from kEnrolmentPause left out. An enrolment embeds and counts only
// these, since the voice encoder embeds whatever it is given: silence or noise in the clip would
// dilute the voiceprint and, counted as speech, give it more weight than it has earned.
std::vector<float> speech_of(EngineFactory& engines, const Args& a,
                             const std::vector<float>& clip) {
  StreamSettings settings;
  settings.latency = 1e9;
  settings.min_silence = kEnrolmentPause;
  const int batch = 32;  // as `changes --offline`
  auto engine = make_engine(engines, a, batch);
  SpeakerChangeDetector detector(*engine, settings, batch);
  std::vector<float> speech;
  for (const Turn& t :
       speaker_turns(detect_changes(detector, clip), static_cast<int64_t>(clip.size())))
    speech.insert(speech.end(), clip.begin() + t.start, clip.begin() + t.end);
  return speech;
}

int cmd_enroll(const Args& a) {
  const std::string name = a.get("name"), file = a.get("voiceprints");
  if (name.empty() || file.empty() || a.get("input").empty())
    throw std::invalid_argument("enroll needs --name, --input and --voiceprints");
  // An existing file must be valid: enrolling into a broken one would throw its speakers away.
  Voiceprints prints;
  struct stat st {};
  if (::stat(file.c_str(), &st) == 0) prints = *Voiceprints::load(file);
  EngineFactory engines = engine_factory(a);
  const std::vector<float> speech = speech_of(engines, a, read_clip(a));
  const std::string where =
      a.get("input") + (a.flag("start") || a.flag("end") ? " between --start and --end" : "");
  if (speech.empty())
    throw std::runtime_error("no speech found in " + where + ": nothing enrolled");
  auto encoder = make_voice_encoder(engines, a);
  const MelSpectrogram mel;
  const auto n = static_cast<int64_t>(speech.size());
  const double seconds = n / double(kSampleRate);
  bool narrowband = false;
  const std::vector<float> e = utterance_embedding(*encoder, mel, speech.data(), n, &narrowband);
  if (e.empty()) {
    char found[32];
    std::snprintf(found, sizeof found, "%.2f", seconds);
    throw std::runtime_error(std::string("only ") + found + " s of speech found in " + where +
                             "; enrolment needs at least 1.59 s of the speaker alone: give a "
                             "longer clip");
  }
  prints.enroll(name, e, seconds, narrowband);
  prints.save(file);
  std::fprintf(stderr, "speakerseg: enrolled %s (%.2f s of speech%s) in %s: %zu speaker%s\n",
               name.c_str(), seconds, narrowband ? ", telephone band" : "", file.c_str(),
               prints.speakers.size(), prints.speakers.size() > 1 ? "s" : "");
  return 0;
}

int cmd_voiceprint(const Args& a) {
  const std::string output = a.get("output");
  if (a.get("input").empty() || output.empty())
    throw std::invalid_argument("voiceprint needs --input and --output");
  const int step = positive(a, "partial-step", kPartialStep);
  if (a.flag("partial-step") && !a.flag("raw"))
    throw std::invalid_argument("--partial-step applies to --raw only");
  const std::vector<float> clip = read_clip(a);
  EngineFactory engines = engine_factory(a);
  auto encoder = make_voice_encoder(engines, a);
  const MelSpectrogram mel;
  const int64_t n = static_cast<int64_t>(clip.size());
  const std::vector<float> rows = a.flag("raw")
                                      ? embed_partials(*encoder, mel, clip.data(), n, step)
                                      : utterance_embedding(*encoder, mel, clip.data(), n);
  if (rows.empty())
    throw std::invalid_argument("the clip is " + std::to_string(n / double(kSampleRate)) +
                                " s long; a voice embedding needs at least one partial of 1.59 s");
  const int64_t count = static_cast<int64_t>(rows.size() / kEmbeddingDim);
  write_npy(output, {count, kEmbeddingDim}, rows.data());
  std::fprintf(stderr, "speakerseg: %lld embedding%s of %.2f s with %s -> %s\n",
               static_cast<long long>(count), count > 1 ? "s" : "", n / double(kSampleRate),
               encoder->description().c_str(), output.c_str());
  return 0;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

int cmd_changes(const Args& a) {
  const std::string input = a.get("input");
  if (input.empty()) throw std::invalid_argument("changes needs --input");
  StreamSettings settings;
  settings.step = a.number("step", settings.step);
  settings.latency = a.flag("offline") ? 1e9 : a.number("latency", settings.latency);
  settings.min_speech = a.number("min-speech", settings.min_speech);
  settings.min_silence = a.number("min-silence", settings.min_silence);
  settings.min_gap = a.number("min-gap", settings.min_gap);
  settings.onset = a.number("onset", settings.onset);
  settings.match_threshold = a.number("match-threshold", settings.match_threshold);
  settings.switch_margin = a.number("switch-margin", settings.switch_margin);
  IdentitySettings& id = settings.identity;
  id.enabled = a.flag("reidentify");
  id.match_threshold = a.number("voice-threshold", id.match_threshold);
  id.enrolled_threshold = a.number("enrolled-threshold", id.enrolled_threshold);
  id.margin = a.number("voice-margin", id.margin);
  id.lead = a.number("voice-lead", id.lead);
  id.lead_floor = a.number("voice-lead-floor", id.lead_floor);
  id.keep_floor_short = a.number("keep-floor-short", id.keep_floor_short);
  id.keep_floor_long = a.number("keep-floor-long", id.keep_floor_long);
  id.merge_threshold = a.number("merge-threshold", id.merge_threshold);
  id.enrolled_merge_threshold = a.number("enrolled-merge-threshold", id.enrolled_merge_threshold);
  id.narrowband_shift = a.number("narrowband-shift", id.narrowband_shift);
  id.takeover_threshold = a.number("takeover-threshold", id.takeover_threshold);
  id.turn_gap = a.number("turn-gap", id.turn_gap);
  id.evidence_seconds = a.number("evidence-seconds", id.evidence_seconds);
  id.decision_seconds = a.number("decision-seconds", id.decision_seconds);
  id.clean_others = a.number("clean-others", id.clean_others);
  id.max_speakers = a.flag("max-speakers") ? positive(a, "max-speakers", 1) : 0;
  validate_settings(settings, a.flag("offline"));
  if (!id.enabled && (a.flag("voiceprints") || a.flag("voice-model") || a.flag("max-speakers")))
    throw std::invalid_argument(
        "--voiceprints, --voice-model and --max-speakers need --reidentify");
  const int batch = positive(a, "batch", a.flag("offline") ? 32 : 1);
  EngineFactory engines = engine_factory(a);
  auto engine = make_engine(engines, a, batch);
  std::unique_ptr<VoiceEncoder> voice;
  std::shared_ptr<const Voiceprints> enrolled;
  if (id.enabled) {
    voice = make_voice_encoder(engines, a);
    if (a.flag("voiceprints")) enrolled = Voiceprints::load(a.get("voiceprints"));
  }
  const std::vector<float> audio = read_mono_16k(input);
  SpeakerChangeDetector detector(*engine, settings, batch, voice.get(), enrolled);
  const std::vector<SpeakerChange> changes = detect_changes(detector, audio);
  const std::vector<Turn> turns = speaker_turns(changes, static_cast<int64_t>(audio.size()));
  // Nothing on stdout is a valid result, but from the outside it looks like a failure.
  if (turns.empty()) std::fprintf(stderr, "speakerseg: no speech found in %s\n", input.c_str());

  for (const auto& c : changes) {
    if (c.revision) {
      std::printf(
          "{\"revises\": %.3f, \"speaker\": %s, \"was\": %s, \"delay\": %.3f, \"voice\": "
          "%.3f}\n",
          c.sample / double(kSampleRate), json_string(c.speaker).c_str(),
          json_string(c.was).c_str(), (c.announced_sample - c.sample) / double(kSampleRate),
          c.voice_score);
      continue;
    }
    std::printf("{\"time\": %.3f, \"speaker\": %s, \"previous\": %s, \"active\": [",
                c.sample / double(kSampleRate), json_string(c.speaker).c_str(),
                json_string(c.previous).c_str());
    for (size_t i = 0; i < c.active.size(); ++i)
      std::printf("%s%s", i ? ", " : "", json_string(c.active[i]).c_str());
    std::printf("], \"confidence\": %.3f, \"delay\": %.3f", c.confidence,
                (c.announced_sample - c.sample) / double(kSampleRate));
    if (id.enabled) std::printf(", \"voice\": %.3f", c.voice_score);
    std::printf("}\n");
  }
  if (const SpeakerIdentifier* identifier = detector.timeline().identifier()) {
    const IdentityStats& s = identifier->stats();
    std::fprintf(
        stderr,
        "speakerseg: identity: %llu turns decided (%llu by a known voice, %llu "
        "provisional), %llu revised, %llu voices merged, %llu taken over; %.1f s of audio "
        "embedded (%.0f%% of %.1f s)\n",
        static_cast<unsigned long long>(s.turns), static_cast<unsigned long long>(s.recognised),
        static_cast<unsigned long long>(s.provisional), static_cast<unsigned long long>(s.revised),
        static_cast<unsigned long long>(s.merged), static_cast<unsigned long long>(s.takeovers),
        s.embedded_seconds, 100 * s.embedded_seconds / (audio.size() / double(kSampleRate)),
        audio.size() / double(kSampleRate));
  }
  if (a.flag("rttm")) {
    FILE* f = std::fopen(a.get("rttm").c_str(), "w");
    if (!f) throw std::runtime_error("cannot write '" + a.get("rttm") + "'");
    std::string uri = a.get("uri", input.substr(input.find_last_of('/') + 1));
    uri = uri.substr(0, uri.find_last_of('.'));
    for (const Turn& t : turns) {
      const double start = t.start / double(kSampleRate), end = t.end / double(kSampleRate);
      std::fprintf(f, "SPEAKER %s 1 %.3f %.3f <NA> <NA> %s <NA> <NA>\n", uri.c_str(), start,
                   end - start, t.speaker.c_str());
    }
    std::fclose(f);
  }
  return 0;
}

int cmd_bench(const Args& a) {
  const int batch = positive(a, "batch", 1);
  const double seconds = a.number("seconds", 3.0);
  EngineFactory engines = engine_factory(a);
  auto engine = make_engine(engines, a, batch);
  // The same windows the ONNX Runtime side of scripts/benchmarks/bench_vs_onnxruntime.py takes:
  // 10 s windows at 1 s steps through the file, repeated to fill the batch.
  const std::vector<float> audio = input_or_sample(a);
  const auto starts =
      window_starts(static_cast<int64_t>(audio.size()), kWindowSamples, kSampleRate);
  std::vector<float> windows(static_cast<size_t>(batch) * kWindowSamples);
  for (int i = 0; i < batch; ++i)
    extract_window(audio, starts[i % starts.size()], kWindowSamples,
                   &windows[static_cast<size_t>(i) * kWindowSamples]);
  std::vector<float> out(static_cast<size_t>(batch) * frames_for_samples(kWindowSamples) *
                         kClasses);
  engine->forward(windows.data(), batch, kWindowSamples,
                  out.data());  // warm-up: allocation, page faults
  const auto warm = engine->stage_seconds();
  std::vector<double> times;
  const int min_runs = positive(a, "runs", 3);
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  while (elapsed < seconds || static_cast<int>(times.size()) < min_runs) {
    const auto t = std::chrono::steady_clock::now();
    engine->forward(windows.data(), batch, kWindowSamples, out.data());
    const auto now = std::chrono::steady_clock::now();
    times.push_back(std::chrono::duration<double>(now - t).count());
    elapsed = std::chrono::duration<double>(now - start).count();
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  const double p99 = sorted[std::min(sorted.size() - 1, sorted.size() * 99 / 100)];
  const double wps = batch / median;
  if (a.flag("json")) {
    std::printf(
        "{\"engine\": \"%s\", \"batch\": %d, \"runs\": %zu, \"median_ms\": %.4f, "
        "\"p99_ms\": %.4f, \"windows_per_s\": %.3f",
        engine->description().c_str(), batch, times.size(), median * 1e3, p99 * 1e3, wps);
  } else {
    std::printf(
        "%s  batch %d  %zu runs  median %.2f ms/batch  p99 %.2f ms  %.1f windows/s  (%.2f "
        "ms/window)\n",
        engine->description().c_str(), batch, times.size(), median * 1e3, p99 * 1e3, wps,
        median * 1e3 / batch);
  }
  if (a.flag("profile")) {
    const auto total = engine->stage_seconds();
    double sum = 0;
    for (size_t s = 0; s < total.size(); ++s) sum += total[s].second - warm[s].second;
    if (a.flag("json")) std::printf(", \"stages_ms_per_window\": {");
    for (size_t s = 0; s < total.size(); ++s) {
      const double per_window = (total[s].second - warm[s].second) / times.size() / batch * 1e3;
      if (a.flag("json"))
        std::printf("%s\"%s\": %.4f", s ? ", " : "", total[s].first.c_str(), per_window);
      else
        std::printf("  %-11s %7.3f ms/window  %5.1f%%\n", total[s].first.c_str(), per_window,
                    100 * (total[s].second - warm[s].second) / sum);
    }
    if (a.flag("json")) std::printf("}");
  }
  if (a.flag("json")) std::printf("}\n");
  return 0;
}

// N live channels, each fed 100 ms buffers in real time by one of --feeders threads (the
// streaming threads' part), through WindowBuffer and a WindowSegmenter as the element does, so
// that the shared engine's capacity can be measured where GStreamer is not installed (the GPU
// check). A change's added delay is the wall time when it is taken minus the time the buffer
// holding its deciding sample arrived: waiting for the worker, inference and stitching.
int cmd_live(const Args& a) {
  using Clock = std::chrono::steady_clock;
  const int n = positive(a, "channels", 1);
  const double seconds = a.number("seconds", 30), warmup = a.number("warmup", 15);
  StreamSettings settings;
  settings.step = a.number("step", settings.step);
  settings.latency = a.number("latency", settings.latency);
  validate_settings(settings);
  const bool own = a.flag("own");
  const int batch = positive(a, "batch", own ? 1 : 32);
  const int feeders = std::min(n, positive(a, "feeders", 1));
  const int in_flight = positive(a, "in-flight", 1);
  // As the element: 0, one per core (at most 8).
  const int stitch_threads =
      integer_option(a, "stitch-threads", 0, 0, 64, "an integer from 0 to 64");
  const std::vector<float> audio = input_or_sample(a);
  const int64_t tick = kSampleRate / 10;
  if (static_cast<int64_t>(audio.size()) < 2 * tick) throw std::invalid_argument("input too short");
  EngineFactory engines = engine_factory(a);
  std::shared_ptr<const SegmentationModel> model;
  if (engines.needs_local_models()) model = load_model(a);
  // --replay: the engine's answers for the recording's windows, computed once now, handed out
  // at once during the run (tools/replay_engine.h): the host side's own ceiling.
  std::shared_ptr<const std::vector<float>> replayed;
  std::string replay_source;
  ReplayDeviceTime device_time;
  if (a.flag("replay-device-ms")) {
    const std::string v = a.get("replay-device-ms", "");
    const auto comma = v.find(',');
    // The whole text must be the numbers: "8x" is a mistake, not 8.
    auto ms = [&](const std::string& text) {
      size_t used = 0;
      const double x = std::stod(text, &used);
      if (used != text.size()) throw std::invalid_argument(text);
      return x;
    };
    try {
      device_time = {ms(v.substr(0, comma)),
                     comma == std::string::npos ? 0.0 : ms(v.substr(comma + 1))};
    } catch (const std::exception&) {
      throw std::invalid_argument("--replay-device-ms wants FIXED,PER_WINDOW milliseconds, got '" +
                                  v + "'");
    }
    if (device_time.fixed_ms < 0 || device_time.per_window_ms < 0 || !a.flag("replay"))
      throw std::invalid_argument(
          "--replay-device-ms wants --replay and two milliseconds of at least 0 "
          "(FIXED,PER_WINDOW)");
  }
  if (a.flag("replay")) {
    auto engine = engines.segmentation(model, 32);
    replay_source = engine->description();
    replayed = std::make_shared<const std::vector<float>>(
        window_logprobs(*engine, audio, kSampleRate, 32));
  }
  auto segmentation = [&](int max_batch) -> std::unique_ptr<SegmentationEngine> {
    if (replayed)
      return std::make_unique<ReplayEngine>(replayed, replay_source, device_time,
                                            a.flag("device-audio"), max_batch);
    return engines.segmentation(model, max_batch);
  };
  settings.identity.enabled = a.flag("reidentify");
  std::shared_ptr<const VoiceModel> voice_model;
  if (settings.identity.enabled && engines.needs_local_models()) voice_model = load_voice_model(a);
  // With --replay the voice encoder is replayed too (ReplayVoiceEncoder): the real encoder's
  // embeddings of the recording's partials, computed once now.
  std::shared_ptr<const std::vector<float>> replayed_voices;
  std::string voice_source;
  if (settings.identity.enabled && replayed) {
    auto encoder = engines.voice(voice_model);
    voice_source = encoder->description();
    const std::vector<float> loud =
        normalise_volume(audio.data(), static_cast<int64_t>(audio.size()));
    replayed_voices = std::make_shared<const std::vector<float>>(
        embed_partials(*encoder, MelSpectrogram(), loud.data(), static_cast<int64_t>(loud.size())));
  }
  auto voice = [&]() -> std::unique_ptr<VoiceEncoder> {
    if (!settings.identity.enabled) return nullptr;
    if (replayed_voices) return std::make_unique<ReplayVoiceEncoder>(replayed_voices, voice_source);
    return engines.voice(voice_model);
  };

  struct Channel {
    std::unique_ptr<WindowSegmenter> segmenter;
    std::unique_ptr<WindowBuffer> windows;
    int64_t offset = 0;
  };
  std::shared_ptr<SharedScheduler> scheduler;
  if (!own) {
    std::vector<std::unique_ptr<SegmentationEngine>> lanes;
    for (int i = 0; i < in_flight; ++i) lanes.push_back(segmentation(batch));
    scheduler = std::make_shared<SharedScheduler>(
        std::move(lanes), batch, voice(), SharedScheduler::kDefaultOutageWait, stitch_threads);
  }
  std::vector<Channel> channels(static_cast<size_t>(n));
  const int step = step_samples(settings);
  for (int i = 0; i < n; ++i) {
    Channel& c = channels[static_cast<size_t>(i)];
    if (own)
      c.segmenter = make_async_segmenter(segmentation(1), settings,
                                         AsyncSegmenterOptions{1, 4, true}, voice());
    else
      c.segmenter = std::make_unique<SharedSegmenterChannel>(scheduler, settings,
                                                             SharedChannelOptions{4, true, 0});
    c.windows = std::make_unique<WindowBuffer>(kWindowSamples, step,
                                               staggered_first_end(step, static_cast<uint64_t>(i)));
    c.offset = static_cast<int64_t>(i * 7.3 * kSampleRate) % static_cast<int64_t>(audio.size());
  }

  const int64_t ticks = static_cast<int64_t>(std::ceil((warmup + seconds) * 10));
  const int64_t warmup_samples = static_cast<int64_t>(warmup * kSampleRate);
  const auto t0 = Clock::now() + std::chrono::milliseconds(200);
  auto tick_time = [&](int64_t k) { return t0 + std::chrono::milliseconds(100 * k); };
  std::vector<std::vector<double>> added(static_cast<size_t>(feeders));
  std::vector<double> late(static_cast<size_t>(feeders), 0.0);
  std::vector<float> buffer_of(static_cast<size_t>(feeders) * tick);
  auto feed = [&](int f) {
    float* buf = &buffer_of[static_cast<size_t>(f) * tick];
    for (int64_t k = 1; k <= ticks; ++k) {
      std::this_thread::sleep_until(tick_time(k));  // buffer k-1 is complete: it "arrives"
      late[f] =
          std::max(late[f], std::chrono::duration<double>(Clock::now() - tick_time(k)).count());
      for (int i = f; i < n; i += feeders) {
        Channel& c = channels[static_cast<size_t>(i)];
        // The recording looped, in runs: a division per sample here was the feeders' main cost.
        const int64_t length = static_cast<int64_t>(audio.size());
        for (int64_t j = 0; j < tick;) {
          const int64_t at = (c.offset + (k - 1) * tick + j) % length;
          const int64_t run = std::min(length - at, tick - j);
          std::copy_n(audio.begin() + at, run, buf + j);
          j += run;
        }
        c.windows->push(buf, static_cast<size_t>(tick),
                        [&](WindowJob&& w) { c.segmenter->submit(std::move(w)); });
        for (const auto& change : c.segmenter->take_changes()) {
          if (change.announced_sample < warmup_samples) continue;
          const int64_t arrived = (change.announced_sample + tick - 1) / tick;
          added[f].push_back(
              std::chrono::duration<double>(Clock::now() - tick_time(arrived)).count());
        }
      }
    }
  };
  std::vector<std::thread> threads;
  for (int f = 0; f < feeders; ++f) threads.emplace_back(feed, f);
  for (auto& t : threads) t.join();

  std::vector<double> all;
  for (const auto& v : added) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  auto quantile = [&](double q) {
    return all[std::min(all.size() - 1, static_cast<size_t>(q * all.size()))];
  };
  auto pct = [&](double q) {  // JSON has no NaN: null when nothing was announced
    if (all.empty()) return std::string("null");
    char text[32];
    std::snprintf(text, sizeof text, "%.3f", quantile(q));
    return std::string(text);
  };
  uint64_t dropped = 0;
  std::string error;
  for (const auto& c : channels) {
    dropped += c.segmenter->dropped_windows();
    if (error.empty()) error = c.segmenter->error();
  }
  const bool ok = error.empty() && !all.empty() && quantile(0.95) <= 0.5 && dropped == 0;
  const std::string engine = own ? "own engines" : scheduler->description();
  std::printf(
      "{\"channels\": %d, \"shared\": %s, \"engine\": %s, \"batch\": %d, \"in_flight\": %d, "
      "\"ok\": %s, "
      "\"changes\": %zu, \"added_p50_s\": %s, \"added_p95_s\": %s, \"added_max_s\": %s, "
      "\"dropped_windows\": %llu, \"max_batch\": %d, \"feeder_late_max_s\": %.3f, "
      "\"stitch_threads\": %d, \"voice_utterances\": %llu, \"voice_calls\": %llu, "
      "\"error\": %s}\n",
      n, own ? "false" : "true", json_string(engine).c_str(), batch, own ? 1 : in_flight,
      ok ? "true" : "false", all.size(), pct(0.5).c_str(), pct(0.95).c_str(), pct(1.0).c_str(),
      static_cast<unsigned long long>(dropped), own ? 1 : scheduler->max_batch_size(),
      *std::max_element(late.begin(), late.end()), own ? 1 : scheduler->stitch_threads(),
      static_cast<unsigned long long>(own ? 0 : scheduler->voice_utterances()),
      static_cast<unsigned long long>(own ? 0 : scheduler->voice_calls()),
      json_string(error).c_str());
  channels.clear();  // channels leave the scheduler before it goes
  return 0;
}

// Each command's part of the usage, shown alone by `speakerseg NAME --help`.
struct Command {
  const char* name;
  int (*run)(const Args&);
  bool engine_options;
  const char* usage;
};

const Command kCommands[] = {
    {"logits", cmd_logits, true,
     "  speakerseg logits --input FILE.wav --output OUT.npy [--model M] [--step SECONDS]\n"
     "                    [--batch N] [--threads N]\n"
     "      log-probabilities [windows, 589, 7] of every 10 s window (pyannote's sliding: offsets\n"
     "      0, step, 2 step, ..., then one zero-padded window for the rest). Default step 1 s.\n"},
    {"bench", cmd_bench, true,
     "  speakerseg bench  [--input FILE.wav] [--model M] [--batch N] [--threads N]\n"
     "                    [--seconds S] [--runs N] [--profile] [--json]\n"
     "      windows per second of the engine on the file's windows (default: 32 windows of the\n"
     "      bundled sample), after one warm-up batch: timed batches for --seconds (default 3)\n"
     "      and at least --runs (default 3) of them.\n"},
    {"changes", cmd_changes, true,
     "  speakerseg changes --input FILE.wav [--model M] [--step S] [--latency S | --offline]\n"
     "                    [--min-speech S] [--min-silence S] [--batch N] [--threads N]\n"
     "                    [--rttm OUT.rttm] [--uri NAME]\n"
     "                    [--reidentify [--voiceprints FILE] [--max-speakers N]\n"
     "                     [--voice-threshold X] [--enrolled-threshold X] [--voice-model V]]\n"
     "      the speaker changes of a recording as JSON lines, by the same streaming logic as the\n"
     "      speakerchange element (windows every --step, final --latency behind the newest audio;\n"
     "      --offline: final at the end, with all the right context there is); none, and a note\n"
     "      on stderr, where no speech is found.\n"
     "      --reidentify: speakers are named by voice all stream long (a speaker who comes back\n"
     "      gets their label back; enrolled speakers by name), with a \"voice\" match score;\n"
     "      --voice-threshold: the cosine from which a known voice takes a turn\n"
     "      (default 0.78, tuned at --latency 2); --enrolled-threshold: the same for an\n"
     "      enrolled voice (default 0.68: an enrolment is usually another recording).\n"},
    {"enroll", cmd_enroll, true,
     "  speakerseg enroll --name NAME --input FILE.wav [--start S] [--end E] --voiceprints FILE\n"
     "                    [--model M] [--voice-model V]\n"
     "      adds NAME's voiceprint (the clip: NAME alone) to FILE, or refines it; makes FILE.\n"
     "      Only the clip's speech (as segmentation finds it) is embedded and counted; a clip\n"
     "      with less than 1.59 s of speech is refused.\n"},
    {"live", cmd_live, true,
     "  speakerseg live   --channels N [--seconds S] [--warmup S] [--step S] [--latency S]\n"
     "                    [--own] [--batch N] [--in-flight N] [--stitch-threads N]\n"
     "                    [--threads N] [--feeders N]\n"
     "                    [--input FILE.wav] [--reidentify [--voice-model V]]\n"
     "                    [--replay [--replay-device-ms FIXED,PER_WINDOW]] [--device-audio]\n"
     "      N live channels in real time through the element's streaming logic without GStreamer\n"
     "      (one shared engine, or --own: one per channel), 100 ms buffers, window phases\n"
     "      staggered; one JSON line: the delay load adds to announcements (p50/p95/max, after\n"
     "      --warmup), windows dropped, and ok = p95 <= 0.5 s and none dropped. --replay: the\n"
     "      engine's answers for the input's windows are computed first and handed out at once\n"
     "      during the run, so that only the host side is measured (its own ceiling); with\n"
     "      --reidentify the voice encoder's too (the recording's partials, handed out in turn).\n"
     "      --in-flight N: the shared engine runs up to N batches at once, each on an engine\n"
     "      of its own (with --threads each), as the element's batches-in-flight does.\n"
     "      --stitch-threads N: threads that stitch each batch's channels (and decide their\n"
     "      voices) after its forward pass: the lane's worker and N - 1 helpers (default 0:\n"
     "      one per core, at most 8, as the element's stitch-threads).\n"
     "      --replay-device-ms FIXED,PER_WINDOW: each replayed batch also waits that long, a\n"
     "      model of a device's time that uses no core (what batches in flight overlap).\n"
     "      --device-audio (CUDA engine, or --replay for its host side): streams' audio kept on\n"
     "      the device, each window uploading its new samples only.\n"},
    {"voiceprint", cmd_voiceprint, true,
     "  speakerseg voiceprint --input FILE.wav [--start S] [--end E] [--raw] [--partial-step N]\n"
     "                    --output OUT.npy [--voice-model V] [--threads N]\n"
     "      the GE2E voice embedding of the clip [start, end) (default: the whole file): one\n"
     "      utterance embedding [1, 256] as the stream computes it (volume raised to -30 dBFS,\n"
     "      partials every 80 mel frames, averaged); with --raw, no volume scaling and one\n"
     "      row per 160-frame partial at mel frames 0, N, 2N, ... wholly inside the clip\n"
     "      ([partials, 256]).\n"},
    {"bench-voice", cmd_bench_voice, true,
     "  speakerseg bench-voice [--input FILE.wav] [--voice-model V] [--batch N] [--threads N]\n"
     "                    [--seconds S]\n"
     "      GE2E partials per second on the file's partials (one JSON line).\n"},
    {"info", cmd_info, false,
     "  speakerseg info   [--model M]\n"
     "      what the loader found in the model file (and, in a CUDA build, the GPU and\n"
     "      libraries).\n"},
};

const char kEngineOptions[] =
    "    --engine cpu|cuda|remote|auto  auto (default): CUDA where this build has it and a GPU\n"
    "                             is found; remote: an Open Inference Protocol server (Triton,\n"
    "                             KServe; docs/scale-out.md)\n"
    "    --server HOST:PORT       the remote engine's server (its gRPC port)\n"
    "    --remote-model NAME      the segmentation model's name there (segmentation-3.0)\n"
    "    --remote-voice-model NAME  the voice encoder's name there (voice-encoder-ge2e)\n"
    "    --deadline-ms N          the remote engine's limit per request (10000)\n"
    "    --device N               GPU index (CUDA engine)\n"
    "    --lstm-algorithm A       standard | persist-static-small-h | persist-dynamic | auto\n"
    "    --no-cuda-graphs         run every pass eagerly instead of replaying a CUDA graph\n"
    "    --lstm-seq-major         the CUDA engine's LSTM sequences sequence-major and packed, as\n"
    "                             PyTorch hands them to cuDNN (a measurement: batch-major is\n"
    "                             the default)\n"
    "    --device-audio           the CUDA engine keeps streams' audio on the GPU and uploads\n"
    "                             each window's new samples only (live; a measurement: whole\n"
    "                             windows are the default)\n"
    "    --fp16                   FP16 tensor-core math past SincNet, FP32 data (CUDA engine;\n"
    "                             never run on a GPU yet: a measurement; its accuracy model,\n"
    "                             fp16-emulated-fp32-sinc, is harmless: docs/gpu.md)\n"
    "    --tf32                   TF32 tensor-core math instead of FP32 past SincNet (CUDA\n"
    "                             engine; emulated, within 0.002 DER of FP32: docs/gpu.md,\n"
    "                             \"Reduced precision, emulated\")\n"
    "    --precision fp32|bf16    the CPU engines' LSTM recurrence products: fp32 (default) or\n"
    "                             bf16 (CPUs with AVX512_BF16; an exploration,\n"
    "                             docs/performance.md)\n"
    "    --precision fp16-emulated|bf16-emulated|tf32-emulated\n"
    "                             the CPU engines emulating a GPU's tensor-core math in that\n"
    "                             format (every product's operands rounded, fp32 sums), to\n"
    "                             measure its accuracy; slower than fp32, not a speed mode;\n"
    "                             fp16|bf16|tf32-emulated-fp32-sinc: SincNet's products in\n"
    "                             fp32\n"
    "                             (docs/gpu.md, \"Reduced precision, emulated\")\n"
    "    --verbose                say which engine auto chose, and why\n";

const Command* find_command(const std::string& name) {
  for (const Command& c : kCommands)
    if (name == c.name) return &c;
  return nullptr;
}

// The whole usage, or one command's part of it (with the options it shares with the others).
void usage(FILE* out, const Command* only = nullptr) {
  std::fprintf(out, "usage:\n");
  for (const Command& c : kCommands)
    if (!only || only == &c) std::fprintf(out, "%s", c.usage);
  if (!only)
    std::fprintf(out,
                 "  speakerseg help [COMMAND], speakerseg COMMAND --help\n"
                 "      this usage, or one command's part of it.\n"
                 "\n"
                 "  logits, bench, changes, live and the voice commands also take the engine "
                 "options\n"
                 "    (the voice encoder runs where the segmentation engine does)\n");
  else if (only->engine_options)
    std::fprintf(out,
                 "\n  engine options (the voice encoder runs where the segmentation engine "
                 "does):\n");
  if (!only || only->engine_options) std::fprintf(out, "%s", kEngineOptions);
  std::fprintf(out,
               "\n"
               "  --model defaults to $%s, else the build tree's model where it exists,\n"
               "  else the installed one (--voice-model likewise, from $%s):\n"
               "    %s\n    %s\n    %s\n    %s\n",
               kModelEnvironmentVariable, kVoiceModelEnvironmentVariable,
               build_model_path().c_str(), installed_model_path().c_str(),
               build_voice_model_path().c_str(), installed_voice_model_path().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const std::string first = argc > 1 ? argv[1] : "";
  const Command* command = find_command(first);
  try {
    // Asking for help is not an error: stdout, exit 0, before any other argument is parsed.
    if (first == "help" || first == "--help" || first == "-h") {
      const Command* topic = argc > 2 ? find_command(argv[2]) : nullptr;
      if (argc > 2 && !topic)
        throw std::invalid_argument(std::string("unknown command '") + argv[2] + "'");
      usage(stdout, topic);
      return 0;
    }
    if (command && std::any_of(argv + 2, argv + argc, [](const char* arg) {
          return std::strcmp(arg, "--help") == 0 || std::strcmp(arg, "-h") == 0;
        })) {
      usage(stdout, command);
      return 0;
    }
    if (first.empty()) throw std::invalid_argument("no command given");
    if (!command) throw std::invalid_argument("unknown command '" + first + "'");
    return command->run(parse(argc, argv));
  } catch (const std::invalid_argument& e) {
    // The error and where to read more; the whole usage would bury the error.
    std::fprintf(stderr, "speakerseg: %s\nspeakerseg: see 'speakerseg %s--help'\n", e.what(),
                 command ? (first + " ").c_str() : "");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "speakerseg: error: %s\n", e.what());
    return 1;
  }
}
