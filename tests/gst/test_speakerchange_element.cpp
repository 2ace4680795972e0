// The speakerchange element through GstHarness: results on a real recording, their order with the
// audio, passthrough, the latency query, flushes, gaps, discontinuities, errors and the
// gst-plugins-rs compatibility event.
#include <gst/check/gstharness.h>
#include <gst/check/gsttestclock.h>
#include <gst/gst.h>
#include <gtest/gtest.h>

#ifdef SPEAKERSEG_HAVE_CUDA
#include "engines/cuda/cuda_engine.h"
#endif
#ifdef SPEAKERSEG_HAVE_REMOTE
#include "common/oip_server.h"
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/rttm.h"
#include "common/temp_dir.h"
#include "common/xorshift.h"
#include "engines/cpu/cpu_voice_encoder.h"
#include "engines/cpu/lstm_recurrence.h"
#include "features/mel_spectrogram.h"
#include "gstspeakerchange.h"
#include "identity/utterance_embedding.h"
#include "identity/voiceprints.h"
#include "io/audio_file.h"
#include "scheduling/engine_pool.h"
#include "speakerchange-result.h"

namespace {

constexpr int kRate = 16000;
constexpr size_t kBufferSamples = kRate / 50;      // 20 ms
constexpr GstClockTime kLatency = 2 * GST_SECOND;  // the element's default

std::string env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) ADD_FAILURE() << name << " is not set; run the tests through `meson test`";
  return v ? v : "";
}

GstClockTime at(double seconds) {
  return static_cast<GstClockTime>(std::llround(seconds * GST_SECOND));
}
double secs(GstClockTime t) {
  return static_cast<double>(t) / GST_SECOND;
}
size_t samples(double seconds) {
  return static_cast<size_t>(std::llround(seconds * kRate));
}

// sample.wav, read once; tests that need it skip without it (unless CI=true).
const std::vector<float>* sample_audio() {
  static std::vector<float> audio;
  static bool tried = false;
  if (!tried) {
    tried = true;
    const std::string path = env("SPEAKERCHANGE_SAMPLE_WAV");
    if (g_file_test(path.c_str(), G_FILE_TEST_EXISTS)) audio = speakerseg::read_mono_16k(path);
  }
  return audio.empty() ? nullptr : &audio;
}

#define REQUIRE_SAMPLE()                                                               \
  const std::vector<float>* sample_ptr = sample_audio();                               \
  if (!sample_ptr) {                                                                   \
    const char* ci = std::getenv("CI");                                                \
    if (ci && std::string(ci) == "true") FAIL() << "sample.wav is required on CI";     \
    GTEST_SKIP() << env("SPEAKERCHANGE_SAMPLE_WAV") << " is missing (../shared/data)"; \
  }                                                                                    \
  [[maybe_unused]] const std::vector<float>& sample = *sample_ptr

// Every start and end of an annotated turn, in seconds: where the current speaker can change.
std::vector<double> turn_boundaries() {
  const std::vector<speakerseg::test::Turn> turns =
      speakerseg::test::read_rttm(env("SPEAKERCHANGE_SAMPLE_RTTM"));
  EXPECT_FALSE(turns.empty()) << "no turns in sample.rttm";
  return speakerseg::test::turn_boundaries(turns);
}

struct Change {
  GstClockTime timestamp = 0, running_time = 0, stream_time = 0, delay = 0;
  std::string speaker, previous;
  std::vector<std::string> active;
  double confidence = 0;
  double voice_score = 0;
  bool stalled = false;
  bool revision = false;
};

bool operator==(const Change& a, const Change& b) {
  return a.timestamp == b.timestamp && a.running_time == b.running_time &&
         a.stream_time == b.stream_time && a.delay == b.delay && a.speaker == b.speaker &&
         a.previous == b.previous && a.active == b.active && a.confidence == b.confidence &&
         a.stalled == b.stalled;
}

std::ostream& operator<<(std::ostream& o, const Change& c) {
  o << secs(c.timestamp) << " s: '" << c.previous << "' -> '" << c.speaker << "' (delay "
    << secs(c.delay) << " s, confidence " << c.confidence << ")" << (c.stalled ? " stalled" : "");
  return o;
}

std::string describe(const std::vector<Change>& changes) {
  std::ostringstream o;
  for (const auto& c : changes) o << "\n  " << c;
  return o.str();
}

// The speakers announced after 18 s of sample.wav: by then both of its people have been heard
// alone long enough to be known by voice (Alice and Bob where they are enrolled).
std::set<std::string> speakers_after_18_s(const std::vector<Change>& changes) {
  std::set<std::string> late;
  for (const auto& c : changes)
    if (secs(c.timestamp) > 18 && !c.speaker.empty()) late.insert(c.speaker);
  return late;
}

Change parse_change(const GstStructure* s) {
  Change c;
  EXPECT_TRUE(gst_structure_has_name(s, "speaker-change"));
  guint64 v = 0;
  EXPECT_TRUE(gst_structure_get_uint64(s, "timestamp", &v));
  c.timestamp = v;
  EXPECT_TRUE(gst_structure_get_uint64(s, "running-time", &v));
  c.running_time = v;
  EXPECT_TRUE(gst_structure_get_uint64(s, "stream-time", &v));
  c.stream_time = v;
  EXPECT_TRUE(gst_structure_get_uint64(s, "delay", &v));
  c.delay = v;
  const char* str = gst_structure_get_string(s, "speaker");
  EXPECT_NE(str, nullptr);
  c.speaker = str ? str : "";
  str = gst_structure_get_string(s, "previous-speaker");
  EXPECT_NE(str, nullptr);
  c.previous = str ? str : "";
  EXPECT_TRUE(gst_structure_get_double(s, "confidence", &c.confidence));
  EXPECT_TRUE(gst_structure_get_double(s, "voice-score", &c.voice_score));
  gboolean stalled = FALSE;
  EXPECT_TRUE(gst_structure_get_boolean(s, "stalled", &stalled));
  c.stalled = stalled;
  const GValue* active = gst_structure_get_value(s, "active-speakers");
  EXPECT_TRUE(active && GST_VALUE_HOLDS_ARRAY(active));
  if (active && GST_VALUE_HOLDS_ARRAY(active))
    for (guint i = 0; i < gst_value_array_get_size(active); ++i)
      c.active.push_back(g_value_get_string(gst_value_array_get_value(active, i)));
  return c;
}

// A speaker-change-stats message.
struct Stats {
  guint queue_depth = 0;
  gint last_batch_size = 0;
  guint64 dropped_windows = 0, delay = 0, voice_embeddings = 0;
  gint last_voice_batch_size = 0;
  double unanalysed_seconds = 0;
};

// A speaker-change-unanalysed message.
struct Unanalysed {
  double seconds = 0;
  guint64 windows = 0;
  gboolean engine_available = FALSE;
  std::string reason;
};

// What reached the harness's sink pad, in order.
struct Item {
  enum Kind { kBuffer, kChange, kRevision, kRstranscribe, kFlushStop, kGap, kEos } kind;
  GstClockTime pts = GST_CLOCK_TIME_NONE, duration = GST_CLOCK_TIME_NONE;
  Change change;
  bool rs_has_speaker = false;
  bool rs_speaker_null = false;  // the field holds NULL (nobody)
  std::string rs_speaker;
};

// The changes that came out after the first FLUSH_STOP; *flushed says whether there was one.
std::vector<Change> changes_after_flush(const std::vector<Item>& items, bool* flushed) {
  auto flush = std::find_if(items.begin(), items.end(),
                            [](const Item& i) { return i.kind == Item::kFlushStop; });
  *flushed = flush != items.end();
  std::vector<Change> after;
  for (auto i = flush; i != items.end(); ++i)
    if (i->kind == Item::kChange) after.push_back(i->change);
  return after;
}

// One harnessed speakerchange element with a bus, fed by the test.
class ElementRun {
 public:
  using Configure = std::function<void(GstElement*)>;

  explicit ElementRun(const Configure& configure = {}, bool live = false, bool s16 = false)
      : s16_(s16) {
    element_ = gst_element_factory_make("speakerchange", nullptr);
    // Identity by voice is its own tests' subject (below); elsewhere it would only add the voice
    // encoder's time to every run.
    g_object_set(element_, "model", env("SPEAKERSEG_MODEL").c_str(), "threads", 1, "reidentify",
                 FALSE, nullptr);
    // Not live by default: back-pressure, so that no window is dropped and results repeat.
    gst_util_set_object_arg(G_OBJECT(element_), "mode", "throughput");
    if (configure) configure(element_);
    bus_ = gst_bus_new();
    gst_element_set_bus(element_, bus_);
    h_ = gst_harness_new_with_element(element_, "sink", "src");
    gst_harness_set_live(h_, live);
    gst_harness_set_drop_buffers(h_, TRUE);  // the probe sees them
    gst_pad_add_probe(h_->sinkpad,
                      static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER |
                                                   GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM |
                                                   GST_PAD_PROBE_TYPE_EVENT_FLUSH),
                      &ElementRun::probe, this, nullptr);
    set_format(s16);
  }

  ~ElementRun() {
    gst_harness_teardown(h_);
    gst_element_set_bus(element_, nullptr);
    gst_object_unref(element_);
    gst_object_unref(bus_);
  }

  ElementRun(const ElementRun&) = delete;
  ElementRun& operator=(const ElementRun&) = delete;

  GstHarness* harness() { return h_; }

  void set_format(bool s16) {
    s16_ = s16;
    gst_harness_set_src_caps_str(
        h_, s16 ? "audio/x-raw, format=S16LE, rate=16000, channels=1, layout=interleaved"
                : "audio/x-raw, format=F32LE, rate=16000, channels=1, layout=interleaved");
  }

  // Pushes audio[from, to) in 20 ms buffers, the first one at `pts`.
  void push(const std::vector<float>& audio, size_t from, size_t to, GstClockTime pts,
            bool discont = false) {
    const GstFlowReturn flow = try_push(audio, from, to, pts, discont);
    ASSERT_EQ(flow, GST_FLOW_OK) << gst_flow_get_name(flow);
  }

  // As push(), but stops at the first buffer the element refuses and returns what it said.
  GstFlowReturn try_push(const std::vector<float>& audio, size_t from, size_t to, GstClockTime pts,
                         bool discont = false) {
    for (size_t i = from; i < to; i += kBufferSamples) {
      const size_t n = std::min(kBufferSamples, to - i);
      const size_t bytes = n * (s16_ ? sizeof(int16_t) : sizeof(float));
      GstBuffer* buf = gst_buffer_new_allocate(nullptr, bytes, nullptr);
      GstMapInfo map;
      gst_buffer_map(buf, &map, GST_MAP_WRITE);
      if (s16_) {
        auto* out = reinterpret_cast<int16_t*>(map.data);
        for (size_t k = 0; k < n; ++k)
          out[k] = static_cast<int16_t>(
              std::clamp(std::lround(audio[i + k] * 32768.0f), -32768L, 32767L));
      } else {
        std::memcpy(map.data, &audio[i], bytes);
      }
      input_.insert(input_.end(), map.data, map.data + bytes);
      gst_buffer_unmap(buf, &map);
      GST_BUFFER_PTS(buf) = pts + gst_util_uint64_scale_int(i - from, GST_SECOND, kRate);
      GST_BUFFER_DURATION(buf) = gst_util_uint64_scale_int(n, GST_SECOND, kRate);
      if (discont && i == from) GST_BUFFER_FLAG_SET(buf, GST_BUFFER_FLAG_DISCONT);
      input_pts_.push_back(GST_BUFFER_PTS(buf));
      const GstFlowReturn flow = gst_harness_push(h_, buf);
      if (flow != GST_FLOW_OK) return flow;
    }
    return GST_FLOW_OK;
  }

  void push_silence(size_t n, GstClockTime pts) { push(std::vector<float>(n, 0.f), 0, n, pts); }

  void event(GstEvent* e) { EXPECT_TRUE(gst_harness_push_event(h_, e)); }
  void eos() { event(gst_event_new_eos()); }
  void flush() {
    event(gst_event_new_flush_start());
    event(gst_event_new_flush_stop(TRUE));
    GstSegment segment;
    gst_segment_init(&segment, GST_FORMAT_TIME);
    event(gst_event_new_segment(&segment));
  }

  // Everything the element posted as speaker-change messages so far (the bus is read whole: its
  // errors and warnings are kept for errors() and warnings()).
  std::vector<Change> messages() {
    while (GstMessage* m = gst_bus_pop(bus_)) {
      if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR || GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING) {
        GError* err = nullptr;
        gchar* debug = nullptr;
        if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR)
          gst_message_parse_error(m, &err, &debug);
        else
          gst_message_parse_warning(m, &err, &debug);
        (GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR ? errors_ : warnings_)
            .push_back(std::string(err->message) + " | " + (debug ? debug : ""));
        g_clear_error(&err);
        g_free(debug);
      }
      const GstStructure* s =
          GST_MESSAGE_TYPE(m) == GST_MESSAGE_ELEMENT ? gst_message_get_structure(m) : nullptr;
      if (s && gst_structure_has_name(s, "speaker-change")) messages_.push_back(parse_change(s));
      if (s && gst_structure_has_name(s, "speaker-change-stats")) {
        Stats st;
        EXPECT_TRUE(gst_structure_get_uint(s, "queue-depth", &st.queue_depth));
        EXPECT_TRUE(gst_structure_get_int(s, "last-batch-size", &st.last_batch_size));
        EXPECT_TRUE(gst_structure_get_uint64(s, "dropped-windows", &st.dropped_windows));
        EXPECT_TRUE(gst_structure_get_uint64(s, "delay", &st.delay));
        EXPECT_TRUE(gst_structure_get_uint64(s, "voice-embeddings", &st.voice_embeddings));
        EXPECT_TRUE(gst_structure_get_int(s, "last-voice-batch-size", &st.last_voice_batch_size));
        EXPECT_TRUE(gst_structure_get_double(s, "unanalysed-seconds", &st.unanalysed_seconds));
        stats_.push_back(st);
      }
      if (s && gst_structure_has_name(s, "speaker-change-unanalysed")) {
        Unanalysed u;
        EXPECT_TRUE(gst_structure_get_double(s, "unanalysed-seconds", &u.seconds));
        EXPECT_TRUE(gst_structure_get_uint64(s, "unanalysed-windows", &u.windows));
        EXPECT_TRUE(gst_structure_get_boolean(s, "engine-available", &u.engine_available));
        const char* reason = gst_structure_get_string(s, "reason");
        EXPECT_NE(reason, nullptr);
        u.reason = reason ? reason : "";
        unanalysed_.push_back(u);
      }
      gst_message_unref(m);
    }
    return messages_;
  }
  // Every speaker-change-stats message posted so far.
  std::vector<Stats> stats() {
    messages();
    return stats_;
  }
  // Every speaker-change-unanalysed message posted so far.
  std::vector<Unanalysed> unanalysed() {
    messages();
    return unanalysed_;
  }
  // Waits for the next speaker-change message that announces a stall (other messages are kept as
  // messages() keeps them). The minute is a guard against a hang, not a measure of speed.
  Change wait_for_stall() {
    while (GstMessage* m = gst_bus_timed_pop_filtered(bus_, 60 * GST_SECOND, GST_MESSAGE_ELEMENT)) {
      const GstStructure* s = gst_message_get_structure(m);
      const bool change = s && gst_structure_has_name(s, "speaker-change");
      if (change) messages_.push_back(parse_change(s));
      gst_message_unref(m);
      if (change && messages_.back().stalled) {
        // The element pushes its events after posting the message, from a thread of its own
        // under the stream lock: once that lock is free, they have all gone by the probe.
        GstPad* sink = gst_element_get_static_pad(element_, "sink");
        GST_PAD_STREAM_LOCK(sink);
        GST_PAD_STREAM_UNLOCK(sink);
        gst_object_unref(sink);
        return messages_.back();
      }
    }
    ADD_FAILURE() << "no stall announced";
    return {};
  }
  // The errors and the warnings posted so far ("message | debug" each).
  std::vector<std::string> errors() {
    messages();
    return errors_;
  }
  std::vector<std::string> warnings() {
    messages();
    return warnings_;
  }

  const std::vector<Item>& items() const { return items_; }
  std::vector<Change> events() const {
    std::vector<Change> out;
    for (const auto& i : items_)
      if (i.kind == Item::kChange) out.push_back(i.change);
    return out;
  }
  const std::vector<uint8_t>& input() const { return input_; }
  const std::vector<uint8_t>& output() const { return output_; }
  const std::vector<GstClockTime>& input_pts() const { return input_pts_; }
  const std::vector<GstClockTime>& output_pts() const { return output_pts_; }

 private:
  static GstPadProbeReturn probe(GstPad*, GstPadProbeInfo* info, gpointer data) {
    auto* self = static_cast<ElementRun*>(data);
    Item item{};
    if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER) {
      GstBuffer* buf = GST_PAD_PROBE_INFO_BUFFER(info);
      item.kind = Item::kBuffer;
      item.pts = GST_BUFFER_PTS(buf);
      item.duration = GST_BUFFER_DURATION(buf);
      GstMapInfo map;
      gst_buffer_map(buf, &map, GST_MAP_READ);
      self->output_.insert(self->output_.end(), map.data, map.data + map.size);
      gst_buffer_unmap(buf, &map);
      self->output_pts_.push_back(item.pts);
      self->items_.push_back(item);
      return GST_PAD_PROBE_OK;
    }
    GstEvent* e = GST_PAD_PROBE_INFO_EVENT(info);
    switch (GST_EVENT_TYPE(e)) {
      case GST_EVENT_CUSTOM_DOWNSTREAM: {
        const GstStructure* s = gst_event_get_structure(e);
        if (gst_structure_has_name(s, "speaker-change")) {
          item.kind = Item::kChange;
          item.change = parse_change(s);
        } else if (gst_structure_has_name(s, GST_SPEAKER_CHANGE_REVISION_NAME)) {
          // Through the public parser: what an application gets.
          GstSpeakerChangeResult r;
          if (!gst_speaker_change_result_parse_event(e, &r)) {
            ADD_FAILURE() << "a speaker-change-revision event that does not parse";
            return GST_PAD_PROBE_OK;
          }
          item.kind = Item::kRevision;
          item.change.timestamp = r.timestamp;
          item.change.delay = r.delay;
          item.change.speaker = r.speaker;
          item.change.previous = r.previous_speaker;
          item.change.voice_score = r.voice_score;
          item.change.revision = r.revision;
          gst_speaker_change_result_clear(&r);
        } else if (gst_structure_has_name(s, "rstranscribe/speaker-change")) {
          item.kind = Item::kRstranscribe;
          item.rs_has_speaker = gst_structure_has_field_typed(s, "speaker", G_TYPE_STRING);
          const char* speaker = gst_structure_get_string(s, "speaker");
          item.rs_speaker_null = speaker == nullptr;
          item.rs_speaker = speaker ? speaker : "";
        } else {
          return GST_PAD_PROBE_OK;
        }
        break;
      }
      case GST_EVENT_FLUSH_STOP:
        item.kind = Item::kFlushStop;
        break;
      case GST_EVENT_GAP:
        item.kind = Item::kGap;
        gst_event_parse_gap(e, &item.pts, &item.duration);
        break;
      case GST_EVENT_EOS:
        item.kind = Item::kEos;
        break;
      default:
        return GST_PAD_PROBE_OK;
    }
    self->items_.push_back(item);
    return GST_PAD_PROBE_OK;
  }

  GstElement* element_ = nullptr;
  GstBus* bus_ = nullptr;
  GstHarness* h_ = nullptr;
  bool s16_ = false;
  std::vector<Item> items_;
  std::vector<Change> messages_;
  std::vector<Stats> stats_;
  std::vector<Unanalysed> unanalysed_;
  std::vector<std::string> errors_, warnings_;
  std::vector<uint8_t> input_, output_;
  std::vector<GstClockTime> input_pts_, output_pts_;
};

// The whole of sample.wav in one stream: what the other tests compare with.
std::vector<Change> run_whole(const std::vector<float>& audio, bool s16 = false) {
  ElementRun run({}, false, s16);
  run.push(audio, 0, audio.size(), 0);
  run.eos();
  return run.events();
}

const std::vector<Change>& reference(const std::vector<float>& audio) {
  static const std::vector<Change> changes = run_whole(audio);
  return changes;
}

// `got` are `want` moved by `shift`, give or take `tolerance`.
void expect_same_changes(const std::vector<Change>& got, const std::vector<Change>& want,
                         GstClockTimeDiff shift, GstClockTime tolerance) {
  ASSERT_EQ(got.size(), want.size()) << "got:" << describe(got) << "\nwant:" << describe(want);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].speaker, want[i].speaker) << i;
    EXPECT_EQ(got[i].previous, want[i].previous) << i;
    const GstClockTimeDiff d =
        GST_CLOCK_DIFF(static_cast<GstClockTime>(want[i].timestamp + shift), got[i].timestamp);
    EXPECT_LE(std::llabs(d), static_cast<long long>(tolerance))
        << i << ": " << got[i] << " vs " << want[i];
  }
}

constexpr GstClockTime kFrame = 16875 * GST_USECOND;  // one network frame

// Checks that every change from one speaker to another lies within 0.5 s of an annotated turn
// change (`boundaries`, in seconds); returns how many such changes there are.
int changes_near_turns(const std::vector<Change>& events, const std::vector<double>& boundaries) {
  int between_speakers = 0;
  for (const auto& c : events) {
    if (c.speaker.empty() || c.previous.empty()) continue;
    ++between_speakers;
    double nearest = 1e9;
    for (double b : boundaries) nearest = std::min(nearest, std::fabs(b - secs(c.timestamp)));
    EXPECT_LT(nearest, 0.5) << c << describe(events);
  }
  return between_speakers;
}

// ---------------------------------------------------------------------------------------------

TEST(SpeakerChangeElement, FindsTheTurnChangesOfARecording) {
  REQUIRE_SAMPLE();
  ElementRun run;
  run.push(sample, 0, sample.size(), 0);
  run.eos();
  const auto events = run.events();
  const auto messages = run.messages();
  EXPECT_TRUE(run.errors().empty());

  // Messages on the bus and events downstream carry the same changes.
  EXPECT_EQ(messages, events) << "messages:" << describe(messages)
                              << "\nevents:" << describe(events);
  ASSERT_GE(events.size(), 5u) << describe(events);

  // Every change from one speaker to another is near an annotated turn change.
  const auto boundaries = turn_boundaries();
  ASSERT_FALSE(boundaries.empty());
  for (const auto& c : events) {
    EXPECT_EQ(c.running_time, c.timestamp);  // default segment: times are running times
    EXPECT_EQ(c.stream_time, c.timestamp);
    EXPECT_GE(c.confidence, 0.0);
    EXPECT_LE(c.confidence, 1.0);
    if (!c.speaker.empty()) {
      EXPECT_NE(std::find(c.active.begin(), c.active.end(), c.speaker), c.active.end()) << c;
    }
  }
  EXPECT_GE(changes_near_turns(events, boundaries), 4) << describe(events);

  // EOS goes last, after the remaining results; at least the last change waited for EOS.
  const auto& items = run.items();
  ASSERT_FALSE(items.empty());
  EXPECT_EQ(items.back().kind, Item::kEos);
  EXPECT_EQ(
      std::count_if(items.begin(), items.end(), [](const Item& i) { return i.kind == Item::kEos; }),
      1);
  size_t last_buffer = 0;
  for (size_t i = 0; i < items.size(); ++i)
    if (items[i].kind == Item::kBuffer) last_buffer = i;
  EXPECT_GE(std::count_if(items.begin() + static_cast<long>(last_buffer), items.end(),
                          [](const Item& i) { return i.kind == Item::kChange; }),
            1);
}

TEST(SpeakerChangeElement, S16InputGivesTheSameChanges) {
  REQUIRE_SAMPLE();
  // sample.wav is 16-bit: the S16LE buffers carry exactly the samples the F32LE ones do.
  expect_same_changes(run_whole(sample, true), reference(sample), 0, kFrame);
}

TEST(SpeakerChangeElement, EventsStayInOrderWithTheAudio) {
  REQUIRE_SAMPLE();
  // Latency mode: results arrive while the stream flows, not only at EOS.
  ElementRun run([](GstElement* e) { gst_util_set_object_arg(G_OBJECT(e), "mode", "latency"); });
  run.push(sample, 0, sample.size(), 0);
  run.eos();
  const auto& items = run.items();
  const GstClockTime end = gst_util_uint64_scale_int(sample.size(), GST_SECOND, kRate);
  int before_a_buffer = 0, at_eos = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].kind != Item::kChange) continue;
    const Change& c = items[i].change;
    auto next = std::find_if(items.begin() + static_cast<long>(i), items.end(),
                             [](const Item& it) { return it.kind == Item::kBuffer; });
    if (next != items.end()) {
      // Announced during the stream: in the past of the audio that follows it, and at least
      // `latency` after the change.
      ++before_a_buffer;
      EXPECT_LE(c.timestamp, next->pts) << c;
      EXPECT_GE(c.delay, kLatency) << c;
    } else {
      // Made final by EOS: announced with the last audio.
      ++at_eos;
      EXPECT_LE(c.timestamp, end) << c;
      EXPECT_LE(std::llabs(GST_CLOCK_DIFF(end, c.timestamp + c.delay)),
                static_cast<long long>(GST_USECOND))
          << c;
    }
  }
  EXPECT_GE(before_a_buffer, 3) << describe(run.events());
  EXPECT_EQ(before_a_buffer + at_eos, static_cast<int>(run.events().size()));
  expect_same_changes(run.events(), reference(sample), 0, kFrame);
}

TEST(SpeakerChangeElement, AudioPassesThroughUntouched) {
  REQUIRE_SAMPLE();
  for (bool s16 : {false, true}) {
    SCOPED_TRACE(s16 ? "S16LE" : "F32LE");
    ElementRun run({}, false, s16);
    run.push(sample, 0, samples(12), 0);
    run.eos();
    EXPECT_FALSE(run.events().empty());
    EXPECT_EQ(run.output(), run.input());
    EXPECT_EQ(run.output_pts(), run.input_pts());
  }
}

TEST(SpeakerChangeElement, LatencyQueryAnswersWhatUpstreamAnswers) {
  {
    ElementRun run({}, true);
    gst_harness_set_upstream_latency(run.harness(), 30 * GST_MSECOND);
    EXPECT_EQ(gst_harness_query_latency(run.harness()), 30 * GST_MSECOND);
    GstQuery* q = gst_query_new_latency();
    ASSERT_TRUE(gst_pad_peer_query(run.harness()->sinkpad, q));
    gboolean live = FALSE;
    GstClockTime min = 0, max = 0;
    gst_query_parse_latency(q, &live, &min, &max);
    EXPECT_TRUE(live);
    EXPECT_EQ(min, 30 * GST_MSECOND);
    EXPECT_EQ(max, GST_CLOCK_TIME_NONE);
    gst_query_unref(q);
  }
  {
    ElementRun run({}, false);
    GstQuery* q = gst_query_new_latency();
    ASSERT_TRUE(gst_pad_peer_query(run.harness()->sinkpad, q));
    gboolean live = TRUE;
    gst_query_parse_latency(q, &live, nullptr, nullptr);
    EXPECT_FALSE(live);
    gst_query_unref(q);
  }
}

TEST(SpeakerChangeElement, FlushStartsAFreshTimeline) {
  REQUIRE_SAMPLE();
  ElementRun run;
  run.push(sample, 0, samples(20), 0);
  run.flush();
  run.push(sample, 0, sample.size(), 0);
  run.eos();
  bool flushed = false;
  const std::vector<Change> after = changes_after_flush(run.items(), &flushed);
  ASSERT_TRUE(flushed);
  // Timestamps restart, the first change is reported again, nothing of before leaks through.
  expect_same_changes(after, reference(sample), 0, kFrame);
  ASSERT_FALSE(after.empty());
  EXPECT_EQ(after.front().previous, "");
}

// sample.wav with `gap` seconds of silence inserted at 12 s, by `insert` (a GAP event or a jump in
// the buffer timestamps): one time line, the later turns moved by the gap.
void check_gap_is_filled(double gap, const std::function<void(ElementRun&)>& insert) {
  const std::vector<float>& sample = *sample_audio();
  ElementRun run;
  run.push(sample, 0, samples(12), 0);
  insert(run);
  run.push(sample, samples(12), sample.size(), at(12 + gap));
  run.eos();
  const auto events = run.events();
  const auto& items = run.items();

  // Every change between speakers lies near an annotated turn change, moved by the gap.
  std::vector<double> boundaries;
  for (double b : turn_boundaries()) boundaries.push_back(b > 12 ? b + gap : b);
  EXPECT_GE(changes_near_turns(events, boundaries), 5) << describe(events);

  // No reset at the gap: the turn that began shortly before it (at about 11 s) becomes final only
  // with audio from after the gap, so it is announced after the first buffer that follows it.
  auto after_gap = std::find_if(items.begin(), items.end(), [&](const Item& i) {
    return i.kind == Item::kBuffer && i.pts == at(12 + gap);
  });
  ASSERT_NE(after_gap, items.end());
  auto late = std::find_if(after_gap, items.end(), [](const Item& i) {
    return i.kind == Item::kChange && i.change.timestamp > at(10.5) &&
           i.change.timestamp < at(12) && !i.change.previous.empty();
  });
  EXPECT_NE(late, items.end()) << describe(events);
  EXPECT_EQ(events.front().previous, "");
  for (size_t i = 1; i < events.size(); ++i) EXPECT_EQ(events[i].previous, events[i - 1].speaker);
}

TEST(SpeakerChangeElement, ShortGapEventsAreFilledWithSilence) {
  REQUIRE_SAMPLE();
  for (double gap : {0.5, 2.0}) {  // 2 s: longer than a timestamp jump that is filled
    SCOPED_TRACE(gap);
    check_gap_is_filled(gap,
                        [gap](ElementRun& run) { run.event(gst_event_new_gap(at(12), at(gap))); });
  }
}

TEST(SpeakerChangeElement, GapEventIsForwarded) {
  REQUIRE_SAMPLE();
  ElementRun run;
  run.push(sample, 0, samples(1), 0);
  run.event(gst_event_new_gap(at(1), at(0.5)));
  run.event(gst_event_new_gap(at(1.5), at(10)));  // long: ends the stretch
  run.push(sample, samples(1), samples(2), at(11.5));
  run.eos();
  std::vector<std::pair<GstClockTime, GstClockTime>> gaps;
  for (const auto& i : run.items())
    if (i.kind == Item::kGap) gaps.emplace_back(i.pts, i.duration);
  const std::vector<std::pair<GstClockTime, GstClockTime>> want = {{at(1), at(0.5)},
                                                                   {at(1.5), at(10)}};
  EXPECT_EQ(gaps, want);
  EXPECT_EQ(run.items().back().kind, Item::kEos);
}

TEST(SpeakerChangeElement, SmallTimestampGapIsFilledWithSilence) {
  REQUIRE_SAMPLE();
  check_gap_is_filled(0.5, [](ElementRun&) {});  // 0.5 s missing, no GAP event
}

TEST(SpeakerChangeElement, TimestampJumpEndsTheStretchAndStartsANewOne) {
  REQUIRE_SAMPLE();
  ElementRun run;
  run.push(sample, 0, samples(15), 0);
  run.push(sample, samples(15), sample.size(), at(18), true);  // 3 s jump, DISCONT
  run.eos();
  const auto& items = run.items();
  const auto events = run.events();
  // The first stretch ends at the jump: its changes go out before the first buffer after it.
  auto jump = std::find_if(items.begin(), items.end(), [](const Item& i) {
    return i.kind == Item::kBuffer && i.pts == at(18);
  });
  ASSERT_NE(jump, items.end());
  std::vector<Change> first, second;
  for (auto i = items.begin(); i != items.end(); ++i)
    if (i->kind == Item::kChange) (i < jump ? first : second).push_back(i->change);
  ASSERT_FALSE(first.empty()) << describe(events);
  ASSERT_FALSE(second.empty()) << describe(events);
  for (const auto& c : first) EXPECT_LT(c.timestamp, at(15)) << c;
  for (const auto& want : reference(sample))
    if (want.timestamp < at(13)) {
      auto it = std::find_if(first.begin(), first.end(), [&](const Change& c) {
        return c.speaker == want.speaker && c.previous == want.previous &&
               std::llabs(GST_CLOCK_DIFF(want.timestamp, c.timestamp)) < at(0.3);
      });
      EXPECT_NE(it, first.end()) << "missing " << want << describe(first);
    }
  // The second stretch starts afresh at the new time: from nobody, labels from speaker-0.
  EXPECT_GE(second.front().timestamp, at(18)) << describe(second);
  EXPECT_EQ(second.front().previous, "") << describe(second);
  EXPECT_EQ(second.front().speaker, "speaker-0") << describe(second);
}

TEST(SpeakerChangeElement, BackwardJumpStartsANewTimeline) {
  REQUIRE_SAMPLE();
  ElementRun run;
  run.push(sample, 0, samples(15), 0);
  run.push(sample, 0, sample.size(), 0, true);  // the recording again from 0, without a flush
  run.eos();
  const auto& items = run.items();
  // The second buffer at PTS 0 starts the second stretch.
  auto restart = std::find_if(items.begin() + 1, items.end(),
                              [](const Item& i) { return i.kind == Item::kBuffer && i.pts == 0; });
  ASSERT_NE(restart, items.end());
  std::vector<Change> second;
  for (auto i = restart; i != items.end(); ++i)
    if (i->kind == Item::kChange) second.push_back(i->change);
  expect_same_changes(second, reference(sample), 0, kFrame);
}

TEST(SpeakerChangeElement, TimestampJitterKeepsTheTimeline) {
  REQUIRE_SAMPLE();
  ElementRun run;
  // Buffers 5 ms early or late in turn, as a source that timestamps with a jittery clock.
  for (size_t i = 0; i < sample.size(); i += kBufferSamples) {
    const GstClockTime exact = gst_util_uint64_scale_int(i, GST_SECOND, kRate);
    const GstClockTime jitter = 5 * GST_MSECOND;
    const GstClockTime pts =
        (i / kBufferSamples) % 2 ? exact + jitter : exact - std::min(exact, jitter);
    run.push(sample, i, std::min(sample.size(), i + kBufferSamples), pts);
  }
  run.eos();
  expect_same_changes(run.events(), reference(sample), 0, kFrame + 10 * GST_MSECOND);
}

TEST(SpeakerChangeElement, RunningAndStreamTimeFollowTheSegment) {
  REQUIRE_SAMPLE();
  ElementRun run;
  GstSegment segment;
  gst_segment_init(&segment, GST_FORMAT_TIME);
  segment.start = at(1);
  segment.base = at(100);
  segment.time = at(50);
  run.event(gst_event_new_segment(&segment));
  run.push(sample, 0, samples(13), at(1));
  run.eos();
  const auto events = run.events();
  ASSERT_FALSE(events.empty());
  for (const auto& c : events) {
    EXPECT_EQ(c.running_time, c.timestamp - at(1) + at(100)) << c;
    EXPECT_EQ(c.stream_time, c.timestamp - at(1) + at(50)) << c;
  }
  // The first change of the recording, at about 6.66 s of audio, now 1 s later in buffer time.
  EXPECT_LE(std::llabs(GST_CLOCK_DIFF(reference(sample).front().timestamp + at(1),
                                      events.front().timestamp)),
            static_cast<long long>(kFrame));
}

TEST(SpeakerChangeElement, LeadingSilenceShiftsTheChanges) {
  REQUIRE_SAMPLE();
  ElementRun run;
  run.push_silence(samples(10), 0);
  run.push(sample, 0, sample.size(), at(10));
  run.eos();
  expect_same_changes(run.events(), reference(sample), at(10), at(0.1));
}

TEST(SpeakerChangeElement, StreamShorterThanAWindow) {
  REQUIRE_SAMPLE();
  ElementRun run;
  run.push(sample, samples(6), samples(9), 0);
  run.eos();
  EXPECT_TRUE(run.errors().empty());
  ASSERT_FALSE(run.items().empty());
  EXPECT_EQ(run.items().back().kind, Item::kEos);
  for (const auto& c : run.events()) EXPECT_LE(c.timestamp, at(3)) << c;
}

TEST(SpeakerChangeElement, CapsChangeKeepsTheTimeline) {
  REQUIRE_SAMPLE();
  ElementRun run;
  run.push(sample, 0, samples(15), 0);
  run.set_format(true);
  run.push(sample, samples(15), sample.size(), at(15));
  run.eos();
  expect_same_changes(run.events(), reference(sample), 0, kFrame);
}

TEST(SpeakerChangeElement, LiveUpstreamRunsInLatencyMode) {
  REQUIRE_SAMPLE();
  // mode=auto with a live upstream: one window per inference, late windows dropped. Pushed far
  // faster than real time, so what is found depends on the machine; the stream must flow.
  ElementRun run([](GstElement* e) { gst_util_set_object_arg(G_OBJECT(e), "mode", "auto"); }, true);
  run.push(sample, 0, sample.size(), 0);
  run.eos();
  EXPECT_TRUE(run.errors().empty());
  ASSERT_FALSE(run.items().empty());
  EXPECT_EQ(run.items().back().kind, Item::kEos);
  EXPECT_EQ(run.output(), run.input());
}

// Moves the harness's test clock on to `target`, firing on the way every clock wait due by then.
void advance_clock(GstHarness* h, GstClockTime target) {
  GstTestClock* clock = gst_harness_get_testclock(h);
  for (;;) {
    GstClockID id = nullptr;
    if (!gst_test_clock_peek_next_pending_id(clock, &id)) break;
    const GstClockTime due = gst_clock_id_get_time(id);
    gst_clock_id_unref(id);
    if (due > target) break;
    gst_test_clock_crank(clock);
  }
  if (gst_clock_get_time(GST_CLOCK(clock)) < target) gst_test_clock_set_time(clock, target);
  gst_object_unref(clock);
}

// When the element's clock wait is due next (NONE: nothing armed).
GstClockTime next_clock_wait(GstHarness* h) {
  GstTestClock* clock = gst_harness_get_testclock(h);
  GstClockID id = nullptr;
  GstClockTime due = GST_CLOCK_TIME_NONE;
  if (gst_test_clock_peek_next_pending_id(clock, &id)) {
    due = gst_clock_id_get_time(id);
    gst_clock_id_unref(id);
  }
  gst_object_unref(clock);
  return due;
}

// audio[from, to) as a live source delivers it, from buffer time `pts`: a second at a time, the
// clock following, `lag` ahead of the buffer times.
void push_live(ElementRun& run, const std::vector<float>& audio, size_t from, size_t to,
               GstClockTime pts, GstClockTime lag = 0) {
  for (size_t i = from; i < to; i += kRate) {
    const size_t end = std::min(to, i + kRate);
    const GstClockTime at_i = pts + gst_util_uint64_scale_int(i - from, GST_SECOND, kRate);
    run.push(audio, i, end, at_i);
    advance_clock(run.harness(),
                  lag + at_i + gst_util_uint64_scale_int(end - i, GST_SECOND, kRate));
  }
}

// How many of `changes` announce a stall.
long stalls(const std::vector<Change>& changes) {
  return std::count_if(changes.begin(), changes.end(), [](const Change& c) { return c.stalled; });
}

// No stall announced before the clock reaches `due`, where the element waits; then the stall.
Change stall_due_at(ElementRun& run, GstClockTime due) {
  EXPECT_EQ(stalls(run.messages()), 0);
  advance_clock(run.harness(), due - GST_MSECOND);
  EXPECT_EQ(stalls(run.messages()), 0) << "early";
  EXPECT_EQ(next_clock_wait(run.harness()), due);
  advance_clock(run.harness(), due);
  return run.wait_for_stall();
}

// A live feed that stops without EOS: once the clock has run upstream's latency + latency +
// stall-margin past the last audio, the change that audio still held (28.48 s in sample.wav) is
// announced, then nobody, marked stalled; audio that comes back starts a new time line.
TEST(SpeakerChangeElement, LiveFeedThatStopsIsAnnouncedAsStalledAndResumes) {
  REQUIRE_SAMPLE();
  ElementRun run([](GstElement* e) { gst_util_set_object_arg(G_OBJECT(e), "mode", "auto"); }, true);
  const GstClockTime upstream = 100 * GST_MSECOND;
  gst_harness_set_upstream_latency(run.harness(), upstream);
  const GstClockTime wait = upstream + kLatency + GST_SECOND;  // stall-margin's default: 1 s

  // The recording from 18 s on (turns at 21.75 and 28.48 s), then nothing.
  const size_t from = samples(18);
  const GstClockTime end = gst_util_uint64_scale_int(sample.size() - from, GST_SECOND, kRate);
  push_live(run, sample, from, sample.size(), 0);
  EXPECT_EQ(next_clock_wait(run.harness()), end + wait);
  advance_clock(run.harness(), end + wait - GST_MSECOND);
  for (const auto& c : run.messages()) EXPECT_FALSE(c.stalled) << "early: " << c;
  advance_clock(run.harness(), end + wait);
  const Change stall = run.wait_for_stall();
  EXPECT_TRUE(run.errors().empty());

  EXPECT_EQ(stall.speaker, "");
  EXPECT_TRUE(stall.active.empty());
  EXPECT_EQ(stall.timestamp, end);
  EXPECT_EQ(stall.delay, wait);
  EXPECT_EQ(stall.confidence, 1.0);
  const auto events = run.events();
  EXPECT_EQ(run.messages(), events);
  ASSERT_GE(events.size(), 2u) << describe(events);
  EXPECT_EQ(events.back(), stall);
  EXPECT_EQ(std::count_if(events.begin(), events.end(), [](const Change& c) { return c.stalled; }),
            1);
  // The last turn change, 1.5 s before the audio stopped: too recent for `latency`, made final by
  // the stall; then the speaker who had the turn is no longer heard.
  const Change& last = events[events.size() - 2];
  EXPECT_LT(std::fabs(secs(last.timestamp) - (28.48 - 18)), 0.5) << describe(events);
  EXPECT_FALSE(last.previous.empty()) << last;
  EXPECT_FALSE(last.speaker.empty()) << last;
  EXPECT_LT(last.delay, kLatency) << last;
  EXPECT_EQ(stall.previous, last.speaker);
  EXPECT_EQ(next_clock_wait(run.harness()), GST_CLOCK_TIME_NONE);  // stalled: nothing to wait for

  // The feed comes back a second later with the recording's first 12 s (a turn at 6.66 s).
  const GstClockTime back = end + wait + GST_SECOND;
  push_live(run, sample, 0, samples(12), back);
  EXPECT_EQ(next_clock_wait(run.harness()), back + at(12) + wait);  // watching again
  run.eos();
  EXPECT_EQ(next_clock_wait(run.harness()), GST_CLOCK_TIME_NONE);  // an ended stream is not stalled
  EXPECT_TRUE(run.errors().empty());
  std::vector<Change> after;
  for (const auto& c : run.events())
    if (c.timestamp >= back) after.push_back(c);
  ASSERT_FALSE(after.empty()) << describe(run.events());
  EXPECT_EQ(after.front().previous, "") << describe(after);
  EXPECT_EQ(after.front().speaker, "speaker-0") << describe(after);
  EXPECT_LT(std::fabs(secs(after.front().timestamp - back) - 6.66), 0.5) << describe(after);
  for (const auto& c : after) EXPECT_FALSE(c.stalled) << c;
}

// The clock is watched for a live upstream only, not with stall-margin=-1, and only in PLAYING (a
// paused live pipeline delivers nothing and is not stalled): the wait is made again on PLAYING.
TEST(SpeakerChangeElement, StallClockIsWatchedOnlyForALivePlayingUpstream) {
  REQUIRE_SAMPLE();
  const GstClockTime wait = kLatency + GST_SECOND;
  {
    ElementRun run;  // not live
    run.push(sample, 0, samples(2), 0);
    EXPECT_EQ(next_clock_wait(run.harness()), GST_CLOCK_TIME_NONE);
  }
  {
    ElementRun run([](GstElement* e) { g_object_set(e, "stall-margin", -1.0, nullptr); }, true);
    run.push(sample, 0, samples(2), 0);
    EXPECT_EQ(next_clock_wait(run.harness()), GST_CLOCK_TIME_NONE);
  }
  ElementRun run({}, true);
  run.push(sample, 0, samples(2), 0);
  // Armed once, for the first buffer's end; moved on only when it fires.
  EXPECT_EQ(next_clock_wait(run.harness()), at(0.02) + wait);
  GstElement* e = run.harness()->element;
  ASSERT_EQ(gst_element_set_state(e, GST_STATE_PAUSED), GST_STATE_CHANGE_SUCCESS);
  EXPECT_EQ(next_clock_wait(run.harness()), GST_CLOCK_TIME_NONE);
  ASSERT_EQ(gst_element_set_state(e, GST_STATE_PLAYING), GST_STATE_CHANGE_SUCCESS);
  EXPECT_EQ(next_clock_wait(run.harness()), at(2) + wait);  // for the newest audio
  for (const auto& c : run.messages()) EXPECT_FALSE(c.stalled) << c;
}

// Time stamps that lag the clock by far more than the wait (an appsrc that stamps from 0 once
// the pipeline has played for a minute, a streaming thread held up downstream): judged by them
// alone every buffer would arrive overdue, a stall would be announced and the next buffer would
// resume, over and over. While audio keeps arriving the feed is alive and analysed; once it stops,
// the stall comes `wait` after the last arrival.
TEST(SpeakerChangeElement, LiveTimeStampsThatLagTheClockStallOnlyWhenAudioStopsArriving) {
  REQUIRE_SAMPLE();
  ElementRun run({}, true);  // throughput: nothing dropped, the same changes on every machine
  gst_harness_set_upstream_latency(run.harness(), 100 * GST_MSECOND);
  // After the last arrival: latency + stall-margin (1 s by default); upstream's latency is how
  // late audio arrives on time, not part of this wait.
  const GstClockTime wait = kLatency + GST_SECOND;
  const GstClockTime lag = 60 * GST_SECOND;
  advance_clock(run.harness(), lag);

  // The recording from 18 s on (turns at 21.75 and 28.48 s), a second at a time from buffer time 0.
  const size_t from = samples(18);
  const GstClockTime end = gst_util_uint64_scale_int(sample.size() - from, GST_SECOND, kRate);
  const GstClockTime last_arrival = lag + at((sample.size() - from - 1) / kRate);
  push_live(run, sample, from, sample.size(), 0, lag);
  const Change stall = stall_due_at(run, last_arrival + wait);
  EXPECT_EQ(stall.timestamp, end);
  EXPECT_EQ(stall.delay, last_arrival + wait - end);  // how far the clock is past the audio
  const auto events = run.events();
  EXPECT_EQ(stalls(events), 1) << describe(events);
  // One time line, analysed: both turn changes were found.
  for (const double turn : {21.75 - 18, 28.48 - 18})
    EXPECT_TRUE(std::any_of(events.begin(), events.end(),
                            [&](const Change& c) {
                              return !c.stalled && !c.previous.empty() &&
                                     std::fabs(secs(c.timestamp) - turn) < 0.5;
                            }))
        << "no turn change at " << turn << " s: " << describe(events);
  EXPECT_TRUE(run.errors().empty());
}

// GAP events keep a live feed alive: one with a duration is silence up to its end, one without
// adds no audio but shows that the feed still delivers. While either keeps coming no stall is
// announced; the stall comes `wait` after the last of them.
TEST(SpeakerChangeElement, GapEventsKeepALiveFeedFromStalling) {
  REQUIRE_SAMPLE();
  ElementRun run({}, true);
  const GstClockTime wait = kLatency + GST_SECOND;
  push_live(run, sample, 0, samples(2), 0);
  for (int k = 2; k < 22; ++k) {  // a GAP event a second, with a duration up to 12 s
    run.event(gst_event_new_gap(at(k), k < 12 ? GST_SECOND : GST_CLOCK_TIME_NONE));
    advance_clock(run.harness(), at(k + 1));
  }
  const GstClockTime last_arrival = at(21);
  const Change stall = stall_due_at(run, last_arrival + wait);
  EXPECT_EQ(stall.timestamp, at(12));  // the end of the last GAP with a duration
  EXPECT_EQ(stall.delay, last_arrival + wait - at(12));
  EXPECT_TRUE(run.errors().empty());
}

// A flush forgets the watch: FLUSH_STOP disarms it, and a stall the clock found due just before a
// flush is not announced after it. The announcement waits for the stream lock, which the test
// holds from before the clock fires until after the flush. The next audio watches afresh.
TEST(SpeakerChangeElement, FlushForgetsTheStallWatch) {
  REQUIRE_SAMPLE();
  ElementRun run({}, true);
  const GstClockTime wait = kLatency + GST_SECOND;
  push_live(run, sample, 0, samples(2), 0);
  ASSERT_NE(next_clock_wait(run.harness()), GST_CLOCK_TIME_NONE);
  run.flush();
  EXPECT_EQ(next_clock_wait(run.harness()), GST_CLOCK_TIME_NONE);
  advance_clock(run.harness(), at(10));
  EXPECT_EQ(stalls(run.messages()), 0);

  push_live(run, sample, samples(2), samples(4), at(10));  // audio up to 12 s, on time
  GstPad* sink = gst_element_get_static_pad(run.harness()->element, "sink");
  GST_PAD_STREAM_LOCK(sink);
  advance_clock(run.harness(), at(12) + wait);
  EXPECT_EQ(next_clock_wait(run.harness()), GST_CLOCK_TIME_NONE);  // fired: the stall is due
  run.flush();
  GST_PAD_STREAM_UNLOCK(sink);
  gst_object_unref(sink);

  push_live(run, sample, samples(4), samples(6), at(15));  // audio up to 17 s, on time
  const Change stall = stall_due_at(run, at(17) + wait);
  EXPECT_EQ(stall.timestamp, at(17));
  EXPECT_EQ(stalls(run.messages()), 1) << describe(run.messages());
  EXPECT_TRUE(run.errors().empty());
}

// A clock without asynchronous waits (GstClock's own class has none).
struct SyncOnlyClock {
  GstClock parent;
};
struct SyncOnlyClockClass {
  GstClockClass parent_class;
};
G_DEFINE_TYPE(SyncOnlyClock, sync_only_clock, GST_TYPE_CLOCK)
GstClockTime sync_only_clock_time(GstClock*) {
  return 0;
}
void sync_only_clock_class_init(SyncOnlyClockClass* klass) {
  GST_CLOCK_CLASS(klass)->get_internal_time = sync_only_clock_time;
}
void sync_only_clock_init(SyncOnlyClock*) {}

// Counts the element's warnings that say stalls will not be announced.
gint stall_warnings = 0;
void count_stall_warnings(GstDebugCategory* category, GstDebugLevel level, const gchar*,
                          const gchar*, gint, GObject*, GstDebugMessage* message, gpointer) {
  if (level == GST_LEVEL_WARNING &&
      std::strcmp(gst_debug_category_get_name(category), "speakerchange") == 0 &&
      std::strstr(gst_debug_message_get(message), "stalls will not be announced"))
    g_atomic_int_inc(&stall_warnings);
}

// A clock the element cannot wait on for the deadline (no asynchronous waits; a deadline beyond
// the clock's range): stalls go unannounced, which is said once, not on every buffer, and no wait
// that never registered keeps a reference to the element.
TEST(SpeakerChangeElement, StallWatchWithoutAClockWaitWarnsOnceAndLeaksNothing) {
  gst_debug_set_threshold_for_name("speakerchange", GST_LEVEL_WARNING);
  gst_debug_add_log_function(count_stall_warnings, nullptr, nullptr);
  {
    ElementRun run({}, true);
    GstElement* e = run.harness()->element;
    GstClock* clock = GST_CLOCK(g_object_new(sync_only_clock_get_type(), nullptr));
    gst_object_ref_sink(clock);
    gst_element_set_clock(e, clock);
    g_atomic_int_set(&stall_warnings, 0);
    run.push_silence(samples(0.1), 0);  // the stream starts: the element takes references
    const int refs = GST_OBJECT_REFCOUNT_VALUE(e);
    run.push_silence(samples(1), at(0.1));
    EXPECT_EQ(GST_OBJECT_REFCOUNT_VALUE(e), refs);
    EXPECT_EQ(g_atomic_int_get(&stall_warnings), 1);
    gst_object_unref(clock);
  }
  {
    ElementRun run({}, true);
    GstElement* e = run.harness()->element;
    gst_element_set_base_time(e, GST_CLOCK_TIME_NONE - GST_SECOND);
    g_atomic_int_set(&stall_warnings, 0);
    run.push_silence(samples(1), 0);
    EXPECT_EQ(next_clock_wait(run.harness()), GST_CLOCK_TIME_NONE);  // nothing armed, wrapped
    EXPECT_EQ(g_atomic_int_get(&stall_warnings), 1);
  }
  gst_debug_remove_log_function(count_stall_warnings);
  gst_debug_unset_threshold_for_name("speakerchange");
}

TEST(SpeakerChangeElement, MessagesAndEventsCanBeSwitchedOff) {
  REQUIRE_SAMPLE();
  {
    ElementRun run([](GstElement* e) { g_object_set(e, "post-messages", FALSE, nullptr); });
    run.push(sample, 0, samples(12), 0);
    run.eos();
    EXPECT_FALSE(run.events().empty());
    EXPECT_TRUE(run.messages().empty());
  }
  {
    ElementRun run([](GstElement* e) { g_object_set(e, "emit-events", FALSE, nullptr); });
    run.push(sample, 0, samples(12), 0);
    run.eos();
    EXPECT_TRUE(run.events().empty());
    EXPECT_FALSE(run.messages().empty());
  }
}

TEST(SpeakerChangeElement, CompatRstranscribeEvents) {
  REQUIRE_SAMPLE();
  ElementRun run([](GstElement* e) { g_object_set(e, "compat-rstranscribe", TRUE, nullptr); });
  run.push(sample, 0, sample.size(), 0);
  run.eos();
  const auto& items = run.items();
  int compat = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].kind != Item::kRstranscribe) continue;
    ++compat;
    EXPECT_TRUE(items[i].rs_has_speaker);
    // Each follows its speaker-change event and names the same speaker (NULL for nobody).
    ASSERT_GT(i, 0u);
    ASSERT_EQ(items[i - 1].kind, Item::kChange);
    const std::string& speaker = items[i - 1].change.speaker;
    EXPECT_EQ(items[i].rs_speaker_null, speaker.empty());
    EXPECT_EQ(items[i].rs_speaker, speaker);
  }
  EXPECT_EQ(compat, static_cast<int>(run.events().size()));
  EXPECT_GE(compat, 5);
}

// ---------------------------------------------------------------------------------------------
// The process-wide shared engine (shared-engine=true, the default).

void own_engine(GstElement* e) {
  g_object_set(e, "shared-engine", FALSE, nullptr);
}

// What one element with its own engine finds in the whole of sample.wav.
const std::vector<Change>& own_engine_reference(const std::vector<float>& audio) {
  static const std::vector<Change> changes = [&] {
    ElementRun run(own_engine);
    run.push(audio, 0, audio.size(), 0);
    run.eos();
    return run.events();
  }();
  return changes;
}

// The same changes, but for the rounding of batched inference in `confidence`.
void expect_identical(const std::vector<Change>& got, const std::vector<Change>& want) {
  ASSERT_EQ(got.size(), want.size()) << "got:" << describe(got) << "\nwant:" << describe(want);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].timestamp, want[i].timestamp) << i << ": " << got[i] << " vs " << want[i];
    EXPECT_EQ(got[i].running_time, want[i].running_time) << i;
    EXPECT_EQ(got[i].stream_time, want[i].stream_time) << i;
    EXPECT_EQ(got[i].delay, want[i].delay) << i;
    EXPECT_EQ(got[i].speaker, want[i].speaker) << i;
    EXPECT_EQ(got[i].previous, want[i].previous) << i;
    EXPECT_EQ(got[i].active, want[i].active) << i;
    EXPECT_NEAR(got[i].confidence, want[i].confidence, 1e-3) << i;
  }
}

// Feeds audio[from, to) to both runs, one second at a time, alternately.
void push_both(ElementRun& a, ElementRun& b, const std::vector<float>& audio, size_t from,
               size_t to) {
  for (size_t i = from; i < to; i += kRate) {
    const size_t end = std::min(to, i + kRate);
    const GstClockTime pts = gst_util_uint64_scale_int(i, GST_SECOND, kRate);
    a.push(audio, i, end, pts);
    b.push(audio, i, end, pts);
  }
}

TEST(SpeakerChangeElement, SharedEngineGivesWhatAnOwnEngineGives) {
  REQUIRE_SAMPLE();
  const auto& want = own_engine_reference(sample);
  ASSERT_FALSE(want.empty());
  const size_t pools = speakerseg::EnginePool::instance().size();
  {
    ElementRun a, b;
    gboolean shared = FALSE;
    g_object_get(a.harness()->element, "shared-engine", &shared, nullptr);
    EXPECT_TRUE(shared);
    // Both elements started on one engine.
    EXPECT_EQ(speakerseg::EnginePool::instance().size(), pools + 1);
    push_both(a, b, sample, 0, sample.size());
    a.eos();
    b.eos();
    EXPECT_EQ(a.messages(), a.events());  // before errors(), which discards other messages
    EXPECT_TRUE(a.errors().empty());
    EXPECT_TRUE(b.errors().empty());
    expect_identical(a.events(), want);
    expect_identical(b.events(), want);
  }
  // The last element to stop released the engine.
  EXPECT_EQ(speakerseg::EnginePool::instance().size(), pools);
}

// Two elements with `property` at `value` beside one with the default: theirs is a shared engine
// of its own (one key per value), each still gets what an own engine gives, and the last to stop
// releases it.
void expect_own_key_and_own_engine_results(const std::vector<float>& sample, const char* property,
                                           int value) {
  const auto& want = own_engine_reference(sample);
  const size_t pools = speakerseg::EnginePool::instance().size();
  {
    auto set = [&](GstElement* e) { g_object_set(e, property, value, nullptr); };
    ElementRun a(set), b(set), one;
    EXPECT_EQ(speakerseg::EnginePool::instance().size(), pools + 2)
        << property << "=" << value << " and the default must not share an engine";
    push_both(a, b, sample, 0, sample.size());
    a.eos();
    b.eos();
    EXPECT_TRUE(a.errors().empty());
    EXPECT_TRUE(b.errors().empty());
    expect_identical(a.events(), want);
    expect_identical(b.events(), want);
  }
  EXPECT_EQ(speakerseg::EnginePool::instance().size(), pools);
}

// Two batches in flight: the shared engine gets two engines and workers.
TEST(SpeakerChangeElement, BatchesInFlightGiveWhatAnOwnEngineGives) {
  REQUIRE_SAMPLE();
  expect_own_key_and_own_engine_results(sample, "batches-in-flight", 2);
}

// Helpers stitching the shared batches (with reidentify's default, identity by voice too): a key of
// its own, and each element still gets what an own engine gives. One more thread than the default
// gives here, so that the two cannot be the same count.
TEST(SpeakerChangeElement, StitchThreadsGiveWhatAnOwnEngineGives) {
  REQUIRE_SAMPLE();
  expect_own_key_and_own_engine_results(sample, "stitch-threads",
                                        speakerseg::SharedScheduler::stitch_threads_for(0) + 1);
}

TEST(SpeakerChangeElement, FlushingOneSharedElementLeavesTheOtherAlone) {
  REQUIRE_SAMPLE();
  const auto& want = own_engine_reference(sample);
  ElementRun a, b;
  const size_t middle = std::min(samples(20), sample.size() / 2);
  push_both(a, b, sample, 0, middle);
  a.flush();
  // `a` starts over from the beginning while `b` goes on.
  for (size_t i = 0; i < sample.size(); i += kRate) {
    const size_t end = std::min(sample.size(), i + kRate);
    a.push(sample, i, end, gst_util_uint64_scale_int(i, GST_SECOND, kRate));
    const size_t j = middle + i;
    if (j < sample.size())
      b.push(sample, j, std::min(sample.size(), j + kRate),
             gst_util_uint64_scale_int(j, GST_SECOND, kRate));
  }
  a.eos();
  b.eos();
  EXPECT_TRUE(a.errors().empty());
  EXPECT_TRUE(b.errors().empty());
  // `b`: every change, in order, as if it had been alone.
  expect_identical(b.events(), want);
  // `a`: after the flush, a fresh time line with every change.
  bool flushed = false;
  const std::vector<Change> after = changes_after_flush(a.items(), &flushed);
  ASSERT_TRUE(flushed);
  expect_identical(after, want);
}

// Elements on the shared engine that are started, fed a few seconds, flushed, ended and stopped
// at random, from threads of their own, while two others stream the whole recording: the two
// must announce every change exactly as an element alone does, none lost, none twice.
TEST(SpeakerChangeElement, SharedElementsComingAndGoingAtRandomDisturbNobody) {
  REQUIRE_SAMPLE();
  const auto& want = own_engine_reference(sample);
  ASSERT_FALSE(want.empty());
  ElementRun a, b;
  std::atomic<bool> steady_done{false};
  std::atomic<int> rounds{0};
  std::vector<std::thread> threads;
  for (ElementRun* run : {&a, &b})
    threads.emplace_back([&, run] {
      for (size_t i = 0; i < sample.size(); i += kRate)
        run->push(sample, i, std::min(sample.size(), i + kRate),
                  gst_util_uint64_scale_int(i, GST_SECOND, kRate));
      run->eos();
    });
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      speakerseg::test::Xorshift rng(2024u + 31u * t);
      auto next = [&](uint32_t n) { return rng.below(n); };
      for (int round = 0; round < 2 || !steady_done; ++round) {
        ElementRun run;
        const size_t seconds = 1 + next(14);
        size_t at = 0;
        for (size_t k = 0; k < seconds && at < sample.size(); ++k) {
          const size_t n =
              std::min(sample.size() - at, static_cast<size_t>(kRate / 4) * (1 + next(8)));
          run.push(sample, at, at + n, gst_util_uint64_scale_int(at, GST_SECOND, kRate));
          at += n;
          if (next(6) == 0) {
            run.flush();
            at = 0;
          }
        }
        if (next(2) == 0) run.eos();
        EXPECT_TRUE(run.errors().empty());
        ++rounds;
      }  // stopped and freed here, often with windows queued on the shared engine
    });
  threads[0].join();
  threads[1].join();
  steady_done = true;
  for (size_t i = 2; i < threads.size(); ++i) threads[i].join();
  EXPECT_TRUE(a.errors().empty());
  EXPECT_TRUE(b.errors().empty());
  expect_identical(a.events(), want);
  expect_identical(b.events(), want);
  EXPECT_GE(rounds.load(), 4);
  std::printf("[ chaos    ] %d elements came and went beside 2 steady ones\n", rounds.load());
}

TEST(SpeakerChangeElement, StatsIntervalPostsStatsMessages) {
  REQUIRE_SAMPLE();
  {
    ElementRun run;  // stats-interval=0 by default: no stats
    run.push(sample, 0, samples(12), 0);
    run.eos();
    EXPECT_TRUE(run.stats().empty());
  }
  for (const gboolean shared : {gboolean{TRUE}, gboolean{FALSE}}) {
    SCOPED_TRACE(shared ? "shared engine" : "own engine");
    ElementRun run([shared](GstElement* e) {
      g_object_set(e, "stats-interval", 5.0, "shared-engine", shared, nullptr);
    });
    run.push(sample, 0, sample.size(), 0);
    run.eos();
    const auto stats = run.stats();  // before errors(), which discards other messages
    EXPECT_TRUE(run.errors().empty());
    // One message per 5 s of stream time.
    const size_t expected = sample.size() / samples(5);
    ASSERT_EQ(stats.size(), expected);
    for (const auto& st : stats) {
      EXPECT_GE(st.delay, kLatency);
      EXPECT_EQ(st.dropped_windows, 0u);  // not live: back-pressure, nothing dropped
      EXPECT_GE(st.last_batch_size, 0);
      EXPECT_LE(st.last_batch_size, 32);
      EXPECT_LE(st.queue_depth, 64u);      // 2 x batch-size
      EXPECT_EQ(st.voice_embeddings, 0u);  // reidentify=false
      EXPECT_EQ(st.last_voice_batch_size, 0);
    }
    // By the last one windows have waited or run: inference is part of the delay.
    EXPECT_GT(stats.back().delay, kLatency);
  }
  // With identity by voice the voice encoder's work is counted too. How far the worker has got
  // when a message is posted depends on thread timing (SharedSegmenter's
  // VoicesOfOneBatchAreEmbeddedInOneCall checks the counts themselves): here the count only
  // grows, and a batch is at most the scheduler's 64 partials.
  ElementRun run([](GstElement* e) {
    g_object_set(e, "stats-interval", 5.0, "reidentify", TRUE, nullptr);
    gst_util_set_object_arg(G_OBJECT(e), "mode", "latency");
  });
  run.push(sample, 0, sample.size(), 0);
  run.eos();
  const auto stats = run.stats();
  EXPECT_TRUE(run.errors().empty());
  ASSERT_FALSE(stats.empty());
  for (size_t i = 1; i < stats.size(); ++i)
    EXPECT_GE(stats[i].voice_embeddings, stats[i - 1].voice_embeddings);
  for (const auto& st : stats) {
    EXPECT_GE(st.last_voice_batch_size, 0);
    EXPECT_LE(st.last_voice_batch_size, 64);
    EXPECT_EQ(st.voice_embeddings == 0, st.last_voice_batch_size == 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Errors: no harness (it insists that the element starts).

// Brings a configured element to PAUSED; returns the result and the error messages posted.
std::pair<GstStateChangeReturn, std::vector<std::string>> try_start(
    const std::function<void(GstElement*)>& configure) {
  GstElement* e = gst_element_factory_make("speakerchange", nullptr);
  g_object_set(e, "model", env("SPEAKERSEG_MODEL").c_str(), nullptr);
  configure(e);
  GstBus* bus = gst_bus_new();
  gst_element_set_bus(e, bus);
  // The model is loaded on READY to PAUSED: NULL to READY always works.
  EXPECT_EQ(gst_element_set_state(e, GST_STATE_READY), GST_STATE_CHANGE_SUCCESS);
  const GstStateChangeReturn ret = gst_element_set_state(e, GST_STATE_PAUSED);
  std::vector<std::string> errors;
  while (GstMessage* m = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR)) {
    GError* err = nullptr;
    gchar* debug = nullptr;
    gst_message_parse_error(m, &err, &debug);
    errors.push_back(std::string(err->message) + " | " + (debug ? debug : ""));
    g_clear_error(&err);
    g_free(debug);
    gst_message_unref(m);
  }
  EXPECT_EQ(gst_element_set_state(e, GST_STATE_NULL), GST_STATE_CHANGE_SUCCESS);
  gst_element_set_bus(e, nullptr);
  gst_object_unref(bus);
  gst_object_unref(e);
  return {ret, errors};
}

// The element's errors say how to fix them in its own terms: the property and the environment
// variable behind its default, not the flags of the command-line tool.
void expect_element_terms(const std::string& error, const std::string& property,
                          const std::string& variable) {
  EXPECT_NE(error.find("element's " + property + " property"), std::string::npos) << error;
  EXPECT_NE(error.find(variable), std::string::npos) << error;
  EXPECT_EQ(error.find("--"), std::string::npos) << error;
}

TEST(SpeakerChangeElement, MissingModelFailsTheStartNamingThePath) {
  const std::string path = "/nonexistent/models/segmentation-3.0.onnx";
  auto [ret, errors] =
      try_start([&](GstElement* e) { g_object_set(e, "model", path.c_str(), nullptr); });
  EXPECT_EQ(ret, GST_STATE_CHANGE_FAILURE);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find(path), std::string::npos) << errors[0];
  expect_element_terms(errors[0], "model", "SPEAKERCHANGE_MODEL");
}

TEST(SpeakerChangeElement, InvalidModelFileFailsTheStart) {
  const std::string path = env("SPEAKERCHANGE_SAMPLE_RTTM");  // exists, but is no model
  auto [ret, errors] =
      try_start([&](GstElement* e) { g_object_set(e, "model", path.c_str(), nullptr); });
  EXPECT_EQ(ret, GST_STATE_CHANGE_FAILURE);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find(path), std::string::npos) << errors[0];
  expect_element_terms(errors[0], "model", "SPEAKERCHANGE_MODEL");
}

TEST(SpeakerChangeElement, CudaSettingsAreRefusedInACpuOnlyBuild) {
#ifdef SPEAKERSEG_HAVE_CUDA
  GTEST_SKIP() << "this build has the CUDA engine (CudaEngineWithoutADeviceFailsClearly covers it)";
#endif
  const std::vector<std::pair<const char*, const char*>> settings = {
      {"engine", "cuda"}, {"device", "1"}, {"lstm-algorithm", "standard"}};
  for (const auto& [name, value] : settings) {
    SCOPED_TRACE(std::string(name) + "=" + value);
    auto [ret, errors] =
        try_start([&](GstElement* e) { gst_util_set_object_arg(G_OBJECT(e), name, value); });
    EXPECT_EQ(ret, GST_STATE_CHANGE_FAILURE);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0].find("CUDA"), std::string::npos) << errors[0];
    EXPECT_NE(errors[0].find("-Dcuda=enabled"), std::string::npos) << errors[0];
  }
}

#ifdef SPEAKERSEG_HAVE_CUDA
TEST(SpeakerChangeElement, CudaEngineWithoutADeviceFailsClearly) {
  std::string why;
  if (speakerseg::cuda_device_count(&why) > 0) GTEST_SKIP() << "a CUDA device is present";
  auto [ret, errors] =
      try_start([](GstElement* e) { gst_util_set_object_arg(G_OBJECT(e), "engine", "cuda"); });
  EXPECT_EQ(ret, GST_STATE_CHANGE_FAILURE);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("no CUDA device"), std::string::npos) << errors[0];
  // engine=auto falls back to the CPU engine and starts.
  auto [auto_ret, auto_errors] =
      try_start([](GstElement* e) { gst_util_set_object_arg(G_OBJECT(e), "engine", "auto"); });
  EXPECT_EQ(auto_ret, GST_STATE_CHANGE_SUCCESS);
  EXPECT_TRUE(auto_errors.empty());
}

// A host without the CUDA libraries (or without the engine module): engine=cuda says so and how to
// fix it, engine=auto runs on the CPU.
TEST(SpeakerChangeElement, MissingCudaLibrariesFailClearlyAndAutoUsesTheCpu) {
  ASSERT_EQ(setenv("SPEAKERSEG_CUDA_MODULE", "/nonexistent/libspeakerseg-cuda.so", 1), 0);
  auto [ret, errors] =
      try_start([](GstElement* e) { gst_util_set_object_arg(G_OBJECT(e), "engine", "cuda"); });
  EXPECT_EQ(ret, GST_STATE_CHANGE_FAILURE);
  ASSERT_EQ(errors.size(), 1u);
  // Without a driver that comes first; with one, the module that cannot be loaded.
  EXPECT_TRUE(errors[0].find("no NVIDIA driver") != std::string::npos ||
              (errors[0].find("cannot load the CUDA engine module") != std::string::npos &&
               errors[0].find("CPU engine") != std::string::npos))
      << errors[0];
  auto [auto_ret, auto_errors] =
      try_start([](GstElement* e) { gst_util_set_object_arg(G_OBJECT(e), "engine", "auto"); });
  EXPECT_EQ(auto_ret, GST_STATE_CHANGE_SUCCESS);
  EXPECT_TRUE(auto_errors.empty());
  unsetenv("SPEAKERSEG_CUDA_MODULE");
}
#endif

// ---------------------------------------------------------------------------------------------
// Identity by voice

TEST(SpeakerChangeElement, ReidentifyIsOnWhereTheVoiceModelIs) {
  GstElement* e = gst_element_factory_make("speakerchange", nullptr);
  gboolean reidentify = FALSE;
  gchar* voice_model = nullptr;
  g_object_get(e, "reidentify", &reidentify, "voice-model", &voice_model, nullptr);
  EXPECT_EQ(std::string(voice_model), env("SPEAKERSEG_VOICE_MODEL"));
  EXPECT_EQ(reidentify, g_file_test(voice_model, G_FILE_TEST_IS_REGULAR));
  g_free(voice_model);
  gst_object_unref(e);
}

// Two turns of sample.wav, one per speaker, alone (sample.rttm), enrolled as Alice and Bob with the
// CPU voice encoder: the voiceprints file's path. Needs sample.wav (REQUIRE_SAMPLE).
std::string alice_and_bob_voiceprints() {
  const std::vector<float>& sample = *sample_audio();
  auto voice = speakerseg::make_cpu_voice_encoder(
      speakerseg::VoiceModel::load_onnx(env("SPEAKERSEG_VOICE_MODEL")), {1});
  const speakerseg::MelSpectrogram mel;
  speakerseg::Voiceprints prints;
  for (const auto& [name, from, to] :
       {std::tuple<const char*, double, double>{"Alice", 10.6, 14.4}, {"Bob", 22.0, 27.8}})
    prints.enroll(name,
                  speakerseg::utterance_embedding(*voice, mel, &sample[samples(from)],
                                                  static_cast<int64_t>(samples(to - from))),
                  to - from);
  const std::string path = speakerseg::test::scratch().path() + "/sample-voiceprints.json";
  prints.save(path);
  return path;
}

// A label the window stitching carries from one person onto the next is split by voice, and the
// change already announced under the old name is revised: sample.wav, then the AMI meeting trn05
// (other people), then sample.wav again. Each revision parses (GstSpeakerChangeResult, revision
// TRUE), comes after the change it names, and renames it: same timestamp, announced under
// `previous-speaker`, now someone else.
TEST(SpeakerChangeElement, RevisionsRenameAnnouncedChanges) {
  REQUIRE_SAMPLE();
  const std::string sample_path = env("SPEAKERCHANGE_SAMPLE_WAV");
  const std::string other = sample_path.substr(0, sample_path.rfind('/')) + "/trn05.wav";
  if (!g_file_test(other.c_str(), G_FILE_TEST_EXISTS)) GTEST_SKIP() << other << " is missing";
  std::vector<float> joined(sample);
  const std::vector<float> trn05 = speakerseg::read_mono_16k(other);
  joined.insert(joined.end(), trn05.begin(), trn05.end());
  joined.insert(joined.end(), sample.begin(), sample.end());

  ElementRun run([&](GstElement* e) { g_object_set(e, "reidentify", TRUE, nullptr); });
  run.push(joined, 0, joined.size(), 0);
  run.eos();
  EXPECT_TRUE(run.errors().empty());
  int revisions = 0;
  const auto& items = run.items();
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].kind != Item::kRevision) continue;
    ++revisions;
    const Change& r = items[i].change;
    EXPECT_TRUE(r.revision);
    EXPECT_NE(r.speaker, r.previous) << secs(r.timestamp) << " s";
    EXPECT_FALSE(r.speaker.empty());
    bool named = false;
    for (size_t j = 0; j < i; ++j)
      named =
          named || (items[j].kind == Item::kChange && items[j].change.timestamp == r.timestamp &&
                    items[j].change.speaker == r.previous);
    EXPECT_TRUE(named) << "the revision at " << secs(r.timestamp) << " s (" << r.previous << " -> "
                       << r.speaker << ") names no change announced before it"
                       << describe(run.events());
    std::printf("[ revision ] %.3f s: %s -> %s, %.2f s after, voice %.3f\n", secs(r.timestamp),
                r.previous.c_str(), r.speaker.c_str(), secs(r.delay), r.voice_score);
  }
  EXPECT_GE(revisions, 1) << describe(run.events());
}

TEST(SpeakerChangeElement, EnrolledSpeakersAreAnnouncedByName) {
  REQUIRE_SAMPLE();
  const std::string path = alice_and_bob_voiceprints();

  ElementRun run([&](GstElement* e) {
    g_object_set(e, "reidentify", TRUE, "voiceprints", path.c_str(), nullptr);
  });
  run.push(sample, 0, sample.size(), 0);
  run.eos();
  const auto changes = run.events();
  // The bus carries the same changes as the events (read before errors(), which discards the
  // other messages).
  expect_identical(run.messages(), changes);
  EXPECT_TRUE(run.errors().empty());
  std::set<std::string> late;
  for (const auto& c : changes) {
    if (secs(c.timestamp) > 18 && !c.speaker.empty()) {
      late.insert(c.speaker);
      EXPECT_GT(c.voice_score, 0.75) << c;
    }
  }
  EXPECT_EQ(late, (std::set<std::string>{"Alice", "Bob"})) << describe(changes);
  // No name on screen is somebody else's: every change announced as Alice or Bob is followed by
  // that person's speech in sample.rttm (speaker90 was enrolled as Alice, speaker91 as Bob).
  // (The README's own enrolment, cut to speech by `speakerseg enroll`, is checked by
  // check_pipeline_script.py.)
  const std::string rttm = env("SPEAKERCHANGE_SAMPLE_WAV");
  const auto turns = speakerseg::test::read_rttm(rttm.substr(0, rttm.rfind('.')) + ".rttm");
  ASSERT_FALSE(turns.empty());
  const std::map<std::string, std::string> enrolled_as = {{"Alice", "speaker90"},
                                                          {"Bob", "speaker91"}};
  int named = 0;
  for (const auto& c : changes) {
    const auto person = enrolled_as.find(c.speaker);
    if (person == enrolled_as.end()) continue;
    ++named;
    const double at = secs(c.timestamp) + 0.3;  // past the boundary's own uncertainty
    bool speaks = false;
    for (const auto& t : turns)
      speaks = speaks || (t.speaker == person->second && t.start <= at && at < t.end);
    EXPECT_TRUE(speaks) << c.speaker << " announced at " << secs(c.timestamp) << " s, but "
                        << person->second << " does not speak then" << describe(changes);
  }
  EXPECT_GE(named, 4) << describe(changes);
}

// ---------------------------------------------------------------------------------------------
// engine=remote: the networks on a real Open Inference Protocol server on loopback
// (scripts/servers/oip_server.py: KServe's model server, ONNX Runtime).

#ifdef SPEAKERSEG_HAVE_REMOTE
// One server for every test of the program, started on first use.
const std::string& oip_server() {
  static speakerseg::test::OipServer server;
  EXPECT_TRUE(server.started()) << server.why();
  return server.address();
}

void remote(GstElement* e) {
  gst_util_set_object_arg(G_OBJECT(e), "engine", "remote");
  g_object_set(e, "server", oip_server().c_str(), nullptr);
}

// The server runs ONNX Runtime, which the CPU engine is held to within 1e-3 per log-probability:
// the same changes, give or take a frame.
TEST(SpeakerChangeElement, RemoteEngineFindsWhatTheCpuEngineFinds) {
  REQUIRE_SAMPLE();
  ElementRun run(remote);
  run.push(sample, 0, sample.size(), 0);
  run.eos();
  EXPECT_TRUE(run.errors().empty());
  expect_same_changes(run.events(), reference(sample), 0, 2 * kFrame);
}

// Two elements on one server at once, a second of audio each in turn, through one shared engine:
// each finds what the CPU engine finds alone.
TEST(SpeakerChangeElement, TwoElementsShareOneServer) {
  REQUIRE_SAMPLE();
  ElementRun a(remote), b(remote);
  push_both(a, b, sample, 0, sample.size());
  a.eos();
  b.eos();
  for (ElementRun* run : {&a, &b}) {
    EXPECT_TRUE(run->errors().empty());
    expect_same_changes(run->events(), reference(sample), 0, 2 * kFrame);
  }
}

// The model file is not needed where the server runs it; the voices go to the server too.
TEST(SpeakerChangeElement, RemoteEngineNeedsNoLocalModelAndNamesEnrolledSpeakers) {
  REQUIRE_SAMPLE();
  const std::string path = alice_and_bob_voiceprints();
  ElementRun run([&](GstElement* e) {
    remote(e);
    g_object_set(e, "model", "/nonexistent/segmentation-3.0.onnx", "voice-model",
                 "/nonexistent/voice-encoder-ge2e.onnx", "reidentify", TRUE, "voiceprints",
                 path.c_str(), nullptr);
  });
  run.push(sample, 0, sample.size(), 0);
  run.eos();
  EXPECT_TRUE(run.errors().empty());
  EXPECT_EQ(speakers_after_18_s(run.events()), (std::set<std::string>{"Alice", "Bob"}))
      << describe(run.events());
}

// A server that declares no tensors (a KServe custom predictor's default): the element starts,
// finds what the CPU engine finds, and names the enrolled speakers through its voice model.
TEST(SpeakerChangeElement, RemoteServerWithoutTensorMetadataServesBothNetworks) {
  REQUIRE_SAMPLE();
  speakerseg::test::OipServer bare({"--no-metadata"});
  ASSERT_TRUE(bare.started()) << bare.why();
  const std::string path = alice_and_bob_voiceprints();
  ElementRun run([&](GstElement* e) {
    gst_util_set_object_arg(G_OBJECT(e), "engine", "remote");
    g_object_set(e, "server", bare.address().c_str(), "reidentify", TRUE, "voiceprints",
                 path.c_str(), nullptr);
  });
  run.push(sample, 0, sample.size(), 0);
  run.eos();
  EXPECT_TRUE(run.errors().empty());
  EXPECT_EQ(speakers_after_18_s(run.events()), (std::set<std::string>{"Alice", "Bob"}))
      << describe(run.events());
  // The changes are the CPU engine's (identity renames speakers, not times).
  ElementRun plain([&](GstElement* e) {
    gst_util_set_object_arg(G_OBJECT(e), "engine", "remote");
    g_object_set(e, "server", bare.address().c_str(), nullptr);
  });
  plain.push(sample, 0, sample.size(), 0);
  plain.eos();
  EXPECT_TRUE(plain.errors().empty());
  expect_same_changes(plain.events(), reference(sample), 0, 2 * kFrame);

  // The wrong model starts (nothing to check it against) and fails the stream on its first
  // request, saying so: an error, not an outage waited out.
  ElementRun wrong([&](GstElement* e) {
    gst_util_set_object_arg(G_OBJECT(e), "engine", "remote");
    g_object_set(e, "server", bare.address().c_str(), "remote-model", "voice-encoder-ge2e",
                 nullptr);
  });
  if (wrong.try_push(sample, 0, sample.size(), 0) == GST_FLOW_OK) wrong.eos();
  const auto errors = wrong.errors();
  ASSERT_EQ(errors.size(), 1u);
  std::printf("[ refused  ] %s\n", errors[0].c_str());
  for (const std::string& says :
       {bare.address(), std::string("'voice-encoder-ge2e'"),
        std::string("the server refused the request"),
        std::string("Is 'voice-encoder-ge2e' the right model"), std::string("declares no tensors")})
    EXPECT_NE(errors[0].find(says), std::string::npos) << "lacks \"" << says << "\": " << errors[0];
  EXPECT_TRUE(wrong.warnings().empty()) << wrong.warnings()[0];
}

// The server lost mid-stream costs stream time, not the stream: the audio passes, a warning says
// why, the windows that waited longer than the outage bound go unanalysed and the element says
// how much stream time that was; with the server back (same port) analysis resumes by itself.
// Each step waits for what the element says, not for a time: under load a server start takes
// many seconds, and so may a request.
TEST(SpeakerChangeElement, RemoteServerLostMidStreamCostsStreamTimeNotTheStream) {
  REQUIRE_SAMPLE();
  auto server = std::make_unique<speakerseg::test::OipServer>();
  ASSERT_TRUE(server->started()) << server->why();
  const std::string address = server->address(), server_port = server->port();
  ElementRun run([&](GstElement* e) {
    gst_util_set_object_arg(G_OBJECT(e), "engine", "remote");
    // Only the outage may cost windows, not a slow answer: batches of 4 windows and a deadline
    // many times what one takes on a loaded machine (batches of 32 took over 2 s under the
    // sanitizers beside other builds, and the windows that then missed the deadline went
    // unanalysed too). The outage outlasts the windows' wait: some go unanalysed.
    g_object_set(e, "server", address.c_str(), "batch-size", 4, "remote-deadline", 3000,
                 "outage-wait", 1.0, nullptr);
  });
  size_t pos = sample.size() / 3;
  run.push(sample, 0, pos, 0);
  server.reset();

  // Feeds the recording on, a second at a time and from its start again at its end, as a live
  // feed would, until `done` (the three minutes only guard against a hang).
  const auto feed_until = [&](const std::function<bool()>& done) {
    const auto guard = std::chrono::steady_clock::now() + std::chrono::minutes(3);
    while (!done() && std::chrono::steady_clock::now() < guard) {
      const size_t from = pos % sample.size(), to = std::min(from + samples(1), sample.size());
      run.push(sample, from, to, at(static_cast<double>(pos) / kRate));
      pos += to - from;
    }
    return done();
  };
  // The element's last word on the engine: away (with at least `windows` dropped) or back.
  const auto said = [&](bool available, guint64 windows = 0) {
    const auto u = run.unanalysed();
    return !u.empty() && u.back().engine_available == available && u.back().windows >= windows;
  };
  const auto reasons = [&] {
    std::string all;
    for (const auto& u : run.unanalysed())
      all += "\n  " + std::string(u.engine_available ? "back" : "away") + ", " +
             std::to_string(u.seconds) + " s: " + u.reason;
    return all;
  };
  // More windows dropped than one window's length in steps (10 s, 1 s): stream time that no
  // analysed window covers, whatever comes after.
  ASSERT_TRUE(feed_until([&] { return said(false, 15); }))
      << "the element never said 15 windows went unanalysed:" << reasons();
  server = speakerseg::test::OipServer::on_port(server_port);
  ASSERT_TRUE(server->started()) << server->why();
  ASSERT_TRUE(feed_until([&] { return said(true); }))
      << "the element never said the server answers again:" << reasons();
  // Then the whole recording again, which must be analysed.
  const double repeat = static_cast<double>(pos) / kRate;
  run.push(sample, 0, sample.size(), at(repeat));
  run.eos();

  for (const auto& e : run.errors()) ADD_FAILURE() << e;
  const auto warnings = run.warnings();
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings[0].find("inference engine is unavailable"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find(address), std::string::npos) << warnings[0];
  EXPECT_EQ(run.output(), run.input());  // every sample passed, untouched
  const auto unanalysed = run.unanalysed();
  ASSERT_GE(unanalysed.size(), 2u);
  EXPECT_FALSE(unanalysed.front().engine_available);
  EXPECT_GT(unanalysed.front().seconds, 0);
  EXPECT_NE(unanalysed.front().reason.find(address), std::string::npos);
  // Gone, not slow.
  EXPECT_NE(unanalysed.front().reason.find("cannot be reached"), std::string::npos)
      << unanalysed.front().reason;
  EXPECT_TRUE(unanalysed.back().engine_available) << reasons();  // no outage in the repeat
  EXPECT_GT(unanalysed.back().seconds, 0) << reasons();
  std::printf("[ outage   ] %.2f s of stream time unanalysed (%llu windows), %zu messages\n",
              unanalysed.back().seconds, static_cast<unsigned long long>(unanalysed.back().windows),
              unanalysed.size());
  int after = 0;
  for (const auto& c : run.events())
    if (secs(c.timestamp) > repeat + 5) ++after;
  EXPECT_GE(after, 3) << describe(run.events()) << reasons();  // the repeat is analysed
}

TEST(SpeakerChangeElement, RemoteEngineProblemsFailTheStartNamingThem) {
  const auto start = [](const char* server, const char* model) {
    return try_start([&](GstElement* e) {
      gst_util_set_object_arg(G_OBJECT(e), "engine", "remote");
      g_object_set(e, "server", server, "remote-model", model, "remote-deadline", 3000, nullptr);
    });
  };
  struct Case {
    std::string server, model, says;
  };
  for (const Case& c : {Case{"", "segmentation-3.0", "needs server=HOST:PORT"},
                        Case{"127.0.0.1:1", "segmentation-3.0", "cannot be reached"},
                        Case{oip_server(), "no-such-model", "no ready model 'no-such-model'"},
                        Case{oip_server(), "voice-encoder-ge2e", "has no input 'input'"}}) {
    auto [ret, errors] = start(c.server.c_str(), c.model.c_str());
    EXPECT_EQ(ret, GST_STATE_CHANGE_FAILURE) << c.server << " " << c.model;
    ASSERT_EQ(errors.size(), 1u) << c.server << " " << c.model;
    EXPECT_NE(errors[0].find(c.says), std::string::npos) << errors[0];
    EXPECT_NE(errors[0].find(c.server), std::string::npos) << errors[0];
  }
}
#else
TEST(SpeakerChangeElement, RemoteEngineIsRefusedInABuildWithoutIt) {
  auto [ret, errors] = try_start([](GstElement* e) {
    gst_util_set_object_arg(G_OBJECT(e), "engine", "remote");
    g_object_set(e, "server", "127.0.0.1:8001", nullptr);
  });
  EXPECT_EQ(ret, GST_STATE_CHANGE_FAILURE);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("libgrpc++-dev"), std::string::npos) << errors[0];
}
#endif

TEST(SpeakerChangeElement, BadVoiceprintsFailTheStart) {
  const std::string missing = "/nonexistent/voiceprints.json";
  const std::string broken = speakerseg::test::scratch().file("broken.json", "{\"format\":");
  const std::string other = speakerseg::test::scratch().file(
      "other-encoder.json",
      "{\"format\": \"speakerchange-voiceprints\", \"version\": 1, \"encoder\": \"ecapa\", "
      "\"dimension\": 192, \"speakers\": []}");
  for (const auto& [path, what] : {std::pair<std::string, std::string>{missing, "cannot be opened"},
                                   {broken, "is not valid JSON"},
                                   {other, "was made with encoder 'ecapa'"}}) {
    SCOPED_TRACE(path);
    auto [ret, errors] = try_start([&](GstElement* e) {
      g_object_set(e, "reidentify", TRUE, "voiceprints", path.c_str(), nullptr);
    });
    EXPECT_EQ(ret, GST_STATE_CHANGE_FAILURE);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0].find(path), std::string::npos) << errors[0];
    EXPECT_NE(errors[0].find(what), std::string::npos) << errors[0];
  }
}

TEST(SpeakerChangeElement, ReidentifyWithoutTheVoiceModelSaysHowToGetIt) {
  const std::string path = "/nonexistent/voice-encoder-ge2e.onnx";
  auto [ret, errors] = try_start([&](GstElement* e) {
    g_object_set(e, "reidentify", TRUE, "voice-model", path.c_str(), nullptr);
  });
  EXPECT_EQ(ret, GST_STATE_CHANGE_FAILURE);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find(path), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("scripts/setup.sh"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("reidentify=false"), std::string::npos) << errors[0];
  expect_element_terms(errors[0], "voice-model", "SPEAKERCHANGE_VOICE_MODEL");
  // The segmentation model as the voice model: loads as ONNX, refused as the wrong network.
  auto [ret2, errors2] = try_start([&](GstElement* e) {
    g_object_set(e, "reidentify", TRUE, "voice-model", env("SPEAKERSEG_MODEL").c_str(), nullptr);
  });
  EXPECT_EQ(ret2, GST_STATE_CHANGE_FAILURE);
  ASSERT_EQ(errors2.size(), 1u);
  EXPECT_NE(errors2[0].find("metadata has no 'encoder'"), std::string::npos) << errors2[0];
  expect_element_terms(errors2[0], "voice-model", "SPEAKERCHANGE_VOICE_MODEL");
}

TEST(SpeakerChangeElement, VoiceprintsWithoutReidentifyIsRefused) {
  auto [ret, errors] = try_start([&](GstElement* e) {
    g_object_set(e, "reidentify", FALSE, "voiceprints", "/tmp/any.json", nullptr);
  });
  EXPECT_EQ(ret, GST_STATE_CHANGE_FAILURE);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("reidentify"), std::string::npos) << errors[0];
}

TEST(SpeakerChangeElement, StartsAndStopsWithoutData) {
  for (int i = 0; i < 3; ++i) {
    auto [ret, errors] = try_start([](GstElement* e) { g_object_set(e, "threads", 1, nullptr); });
    EXPECT_EQ(ret, GST_STATE_CHANGE_SUCCESS);
    EXPECT_TRUE(errors.empty());
  }
}

// precision=bf16 runs where the CPU has AVX512_BF16 (turn changes still where the annotation has
// them) and fails the start with the reason everywhere else.
TEST(SpeakerChangeElement, Bf16PrecisionRunsOrIsRefusedWithTheReason) {
  const auto bf16 = [](GstElement* e) {
    gst_util_set_object_arg(G_OBJECT(e), "engine", "cpu");
    gst_util_set_object_arg(G_OBJECT(e), "precision", "bf16");
  };
  if (!speakerseg::cpu::lstm_isa_supported(speakerseg::cpu::LstmIsa::kAvx512Bf16)) {
    auto [ret, errors] = try_start(bf16);
    EXPECT_EQ(ret, GST_STATE_CHANGE_FAILURE);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0].find("AVX512_BF16"), std::string::npos) << errors[0];
    EXPECT_NE(errors[0].find("precision fp32"), std::string::npos) << errors[0];
    return;
  }
  REQUIRE_SAMPLE();
  ElementRun run(bf16);
  run.push(sample, 0, sample.size(), 0);
  run.eos();
  EXPECT_TRUE(run.errors().empty());
  const auto events = run.events();
  EXPECT_GE(changes_near_turns(events, turn_boundaries()), 4) << describe(events);
}

TEST(SpeakerChangeElement, PropertiesKeepTheirValues) {
  GstElement* e = gst_element_factory_make("speakerchange", nullptr);
  g_object_set(e, "step", 0.5, "latency", 3.0, "min-speech", 0.2, "min-silence", 1.0, "batch-size",
               8, "threads", 2, "stall-margin", 0.5, "batches-in-flight", 3, "stitch-threads", 4,
               nullptr);
  gst_util_set_object_arg(G_OBJECT(e), "mode", "latency");
  gst_util_set_object_arg(G_OBJECT(e), "precision", "bf16");
  gst_util_set_object_arg(G_OBJECT(e), "engine", "cpu");
  double step = 0, latency = 0, min_speech = 0, min_silence = 0, stall_margin = 0;
  int batch = 0, threads = 0, mode = 0, engine = 0, precision = 0, in_flight = 0, stitchers = 0;
  gboolean graphs = FALSE, messages = FALSE, events = FALSE, compat = TRUE;
  g_object_get(e, "step", &step, "latency", &latency, "min-speech", &min_speech, "min-silence",
               &min_silence, "batch-size", &batch, "threads", &threads, "mode", &mode, "engine",
               &engine, "cuda-graphs", &graphs, "post-messages", &messages, "emit-events", &events,
               "compat-rstranscribe", &compat, "precision", &precision, "stall-margin",
               &stall_margin, "batches-in-flight", &in_flight, "stitch-threads", &stitchers,
               nullptr);
  EXPECT_EQ(step, 0.5);
  EXPECT_EQ(in_flight, 3);
  EXPECT_EQ(stitchers, 4);
  EXPECT_EQ(latency, 3.0);
  EXPECT_EQ(min_speech, 0.2);
  EXPECT_EQ(min_silence, 1.0);
  EXPECT_EQ(stall_margin, 0.5);
  EXPECT_EQ(batch, 8);
  EXPECT_EQ(threads, 2);
  EXPECT_EQ(mode, GST_SPEAKER_CHANGE_MODE_LATENCY);
  EXPECT_EQ(engine, GST_SPEAKER_CHANGE_ENGINE_CPU);
  EXPECT_EQ(precision, GST_SPEAKER_CHANGE_PRECISION_BF16);
  EXPECT_TRUE(graphs);
  EXPECT_TRUE(messages);
  EXPECT_TRUE(events);
  EXPECT_FALSE(compat);
  gst_object_unref(e);
}

}  // namespace

int main(int argc, char** argv) {
  gst_init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (!gst_element_register(nullptr, "speakerchange", GST_RANK_NONE, GST_TYPE_SPEAKER_CHANGE))
    return 1;
  const int result = RUN_ALL_TESTS();
  gst_deinit();
  return result;
}
