// The speakerchange element through GstHarness, driven by a byte stream: each input is a script of
// buffers (sizes, formats, timestamps, DISCONT), jumps, GAP, FLUSH, SEGMENT, EOS, caps the element
// takes and caps it refuses, property changes while running and restarts through READY, over
// the real model on real speech (the sample recording). Findings: a crash, a leak, undefined
// behaviour, a hang (libFuzzer's -timeout), a speaker-change that does not parse, and a change
// whose timestamp lies outside the audio pushed since the last flush or before the previous one.
//
// The engine is the shared one (shared-engine=true), kept alive between inputs by elements held
// in PAUSED with the same engine key, so each input costs its windows, not a model load; the
// properties that choose the engine (model, threads, batch size) are therefore not fuzzed.
#include <gst/check/gstharness.h>
#include <gst/gst.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <gst/speakerchange/speakerchange-result.h>

#include "gstspeakerchange.h"
#include "io/audio_file.h"

namespace {

constexpr int kRate = 16000;
// Audio pushed per input at most: a few windows, so that an input runs in about a second.
constexpr size_t kMaxSamplesPerInput = 25 * kRate;

const char* env_or_die(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) {
    std::fprintf(stderr, "fuzz_element: set %s (scripts/fuzz.sh does)\n", name);
    std::exit(2);
  }
  return v;
}

std::vector<float>& speech() {
  static std::vector<float> audio =
      speakerseg::read_mono_16k(env_or_die("SPEAKERCHANGE_SAMPLE_WAV"));
  return audio;
}

GstElement* make_element(bool reidentify) {
  GstElement* e = gst_element_factory_make("speakerchange", nullptr);
  g_object_set(e, "model", env_or_die("SPEAKERSEG_MODEL"), "threads", 1, "shared-engine", TRUE,
               "reidentify", reidentify, nullptr);
  if (reidentify) g_object_set(e, "voice-model", env_or_die("SPEAKERSEG_VOICE_MODEL"), nullptr);
  gst_util_set_object_arg(G_OBJECT(e), "mode", "throughput");
  // One stream at a time here: a window waiting for others to fill a batch would only wait.
  g_object_set(e, "max-batch-wait", 0.0, nullptr);
  return e;
}

// Reads the script; past its end every read is 0.
struct Script {
  const uint8_t* data;
  size_t size, at = 0;
  bool done() const { return at >= size; }
  uint8_t byte() { return at < size ? data[at++] : 0; }
};

struct Checker {
  GstClockTime first = GST_CLOCK_TIME_NONE, end = 0, last_change = 0;
  bool bad = false;
  std::string why;

  void reset() { first = GST_CLOCK_TIME_NONE, end = 0, last_change = 0; }
  void pushed(GstClockTime pts, GstClockTime duration) {
    if (!GST_CLOCK_TIME_IS_VALID(pts)) return;
    if (!GST_CLOCK_TIME_IS_VALID(first)) first = pts;
    first = std::min(first, pts);
    end = std::max(end, pts + duration);
  }
  void fail(const std::string& what) {
    if (!bad) why = what;
    bad = true;
  }
};

GstPadProbeReturn probe(GstPad*, GstPadProbeInfo* info, gpointer data) {
  auto* c = static_cast<Checker*>(data);
  GstEvent* e = GST_PAD_PROBE_INFO_EVENT(info);
  if (GST_EVENT_TYPE(e) == GST_EVENT_FLUSH_STOP) c->reset();
  const GstStructure* s = gst_event_get_structure(e);
  if (GST_EVENT_TYPE(e) != GST_EVENT_CUSTOM_DOWNSTREAM || !s ||
      !gst_structure_has_name(s, "speaker-change"))
    return GST_PAD_PROBE_OK;
  GstSpeakerChangeResult r;
  if (!gst_speaker_change_result_parse_event(e, &r)) {
    c->fail("a speaker-change event that does not parse");
    return GST_PAD_PROBE_OK;
  }
  // Inside the time line pushed since the last flush (a GAP counts as pushed), and in order.
  const GstClockTime t = r.timestamp;
  if (!GST_CLOCK_TIME_IS_VALID(t) || !GST_CLOCK_TIME_IS_VALID(c->first) || t < c->first ||
      t > c->end)
    c->fail("change at " + std::to_string(t) + " outside the pushed [" + std::to_string(c->first) +
            ", " + std::to_string(c->end) + "]");
  else if (t < c->last_change)
    c->fail("change at " + std::to_string(t) + " before the previous one at " +
            std::to_string(c->last_change));
  c->last_change = std::max(c->last_change, t);
  gst_speaker_change_result_clear(&r);
  return GST_PAD_PROBE_OK;
}

const char* const kCaps[] = {
    "audio/x-raw, format=F32LE, rate=16000, channels=1, layout=interleaved",
    "audio/x-raw, format=S16LE, rate=16000, channels=1, layout=interleaved",
    // refused: the element takes 16 kHz mono only
    "audio/x-raw, format=F32LE, rate=8000, channels=1, layout=interleaved",
    "audio/x-raw, format=S16LE, rate=16000, channels=2, layout=interleaved",
};

// As a caps event, not gst_harness_set_src_caps(), which asserts that the element accepts them.
void push_caps(GstHarness* h, int which) {
  GstCaps* caps = gst_caps_from_string(kCaps[which]);
  gst_harness_push_event(h, gst_event_new_caps(caps));
  gst_caps_unref(caps);
}

bool element_takes_s16(GstElement* element) {
  GstPad* sinkpad = gst_element_get_static_pad(element, "sink");
  GstCaps* current = gst_pad_get_current_caps(sinkpad);
  gst_object_unref(sinkpad);
  if (!current) return false;
  const gchar* format = gst_structure_get_string(gst_caps_get_structure(current, 0), "format");
  const bool s16 = format && std::string(format) == "S16LE";
  gst_caps_unref(current);
  return s16;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  gst_init(argc, argv);
  if (!gst_element_register(nullptr, "speakerchange", GST_RANK_NONE, GST_TYPE_SPEAKER_CHANGE))
    std::abort();
  speech();
  // Keepers: the shared engines, with and without the voice encoder, outlive every input.
  for (bool reidentify : {false, true}) {
    GstElement* keeper = make_element(reidentify);
    if (gst_element_set_state(keeper, GST_STATE_PAUSED) == GST_STATE_CHANGE_FAILURE) {
      std::fprintf(stderr, "fuzz_element: the element does not start with the model given\n");
      std::exit(2);
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Script in{data, size};
  const bool reidentify = in.byte() & 1;
  GstElement* element = make_element(reidentify);
  const double steps[] = {1.0, 2.5, 5.0, 10.0};
  g_object_set(element, "step", steps[in.byte() % 4], "latency", (in.byte() % 50) / 10.0, nullptr);
  GstBus* bus = gst_bus_new();
  gst_element_set_bus(element, bus);
  GstHarness* h = gst_harness_new_with_element(element, "sink", "src");
  gst_harness_set_drop_buffers(h, TRUE);
  Checker checker;
  gst_pad_add_probe(h->sinkpad,
                    static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM |
                                                 GST_PAD_PROBE_TYPE_EVENT_FLUSH),
                    probe, &checker, nullptr);
  int caps = 0;
  gst_harness_set_src_caps_str(h, kCaps[caps]);

  const std::vector<float>& audio = speech();
  size_t cursor = 0, pushed = 0;
  GstClockTime pts = 0;  // what the next buffer with a timestamp carries
  // Where the element puts a buffer without one: after the audio or gap before it, or at the
  // segment's start when nothing came since the stream began or was flushed (a jump of `pts`
  // alone does not move it).
  GstClockTime segment_start = 0, untimestamped_at = 0;
  bool placed = false;
  while (!in.done() && pushed < kMaxSamplesPerInput) {
    const uint8_t op = in.byte();
    switch (op % 10) {
      case 0:
      case 1:
      case 2: {  // a buffer of 10 ms .. 2.56 s, maybe DISCONT, maybe without timestamps
        const size_t n = std::min<size_t>((in.byte() + 1) * 160, kMaxSamplesPerInput - pushed);
        const uint8_t flags = in.byte();
        // In the format the element holds, not the last one offered: after refused caps a real
        // upstream stops (not-negotiated); bytes of another format would be other audio, longer
        // or shorter than the time line the checker counts.
        const bool s16 = element_takes_s16(element);
        GstBuffer* buf = gst_buffer_new_allocate(nullptr, n * (s16 ? 2 : 4), nullptr);
        GstMapInfo map;
        gst_buffer_map(buf, &map, GST_MAP_WRITE);
        for (size_t k = 0; k < n; ++k) {
          const float v = audio[(cursor + k) % audio.size()];
          if (s16)
            reinterpret_cast<int16_t*>(map.data)[k] = static_cast<int16_t>(v * 32767.0f);
          else
            reinterpret_cast<float*>(map.data)[k] = v;
        }
        gst_buffer_unmap(buf, &map);
        const GstClockTime duration = gst_util_uint64_scale_int(n, GST_SECOND, kRate);
        if (!(flags & 4)) {
          GST_BUFFER_PTS(buf) = pts;
          GST_BUFFER_DURATION(buf) = duration;
        }
        if (flags & 1) GST_BUFFER_FLAG_SET(buf, GST_BUFFER_FLAG_DISCONT);
        const GstClockTime at = !(flags & 4) ? pts : placed ? untimestamped_at : segment_start;
        checker.pushed(at, duration);
        // Refused caps, EOS or flushing: any flow return is allowed; a refused buffer places
        // nothing.
        if (gst_harness_push(h, buf) == GST_FLOW_OK) {
          untimestamped_at = at + duration;
          placed = true;
        }
        pts += duration;
        cursor += n;
        pushed += n;
        break;
      }
      case 3:  // a jump forward of up to 25.5 s, with DISCONT on the next buffer by the caller
        pts += in.byte() * (GST_SECOND / 10);
        break;
      case 4: {  // a GAP of up to 25.5 s
        const GstClockTime d = in.byte() * (GST_SECOND / 10);
        checker.pushed(pts, d);
        const bool taken = gst_harness_push_event(h, gst_event_new_gap(pts, d));
        pts += d;
        if (taken) {
          untimestamped_at = pts;
          placed = true;
        }
        break;
      }
      case 5: {  // FLUSH, then a segment that starts anywhere in the first 255 s
        gst_harness_push_event(h, gst_event_new_flush_start());
        gst_harness_push_event(h, gst_event_new_flush_stop(TRUE));
        checker.reset();
        GstSegment segment;
        gst_segment_init(&segment, GST_FORMAT_TIME);
        pts = segment_start = segment.start = segment.time = in.byte() * GST_SECOND;
        placed = false;
        gst_harness_push_event(h, gst_event_new_segment(&segment));
        break;
      }
      case 6: {  // a new segment without a flush, at the current time
        GstSegment segment;
        gst_segment_init(&segment, GST_FORMAT_TIME);
        segment.start = segment.time = segment_start = pts;
        gst_harness_push_event(h, gst_event_new_segment(&segment));
        break;
      }
      case 7:  // caps: the two formats the element takes, or ones it refuses
        caps = in.byte() % 4;
        push_caps(h, caps);
        break;
      case 8: {  // a property set while running (READY-only ones are refused with a warning)
        const uint8_t v = in.byte();
        switch (in.byte() % 6) {
          case 0:
            g_object_set(element, "latency", v / 10.0, nullptr);
            break;
          case 1:
            g_object_set(element, "min-speech", (v % 100) / 10.0, nullptr);
            break;
          case 2:
            g_object_set(element, "post-messages", v & 1, nullptr);
            break;
          case 3:
            g_object_set(element, "emit-events", v & 1, nullptr);
            break;
          case 4:
            g_object_set(element, "stats-interval", double(v % 20), nullptr);
            break;
          case 5:
            g_object_set(element, "compat-rstranscribe", v & 1, nullptr);
            break;
        }
        break;
      }
      case 9:
        if (in.byte() & 1) {  // EOS: the element drains; later buffers are refused until a flush
          gst_harness_push_event(h, gst_event_new_eos());
        } else {  // a restart through READY with another step: a new stream
          gst_element_set_state(element, GST_STATE_READY);
          g_object_set(element, "step", steps[in.byte() % 4], nullptr);
          gst_harness_play(h);
          checker.reset();
          pts = segment_start = 0;
          placed = false;
          // Stopping cleared the pad's sticky events: a new stream begins.
          gst_harness_push_event(h, gst_event_new_stream_start("fuzz-restart"));
          push_caps(h, caps);
          GstSegment segment;
          gst_segment_init(&segment, GST_FORMAT_TIME);
          gst_harness_push_event(h, gst_event_new_segment(&segment));
        }
        break;
    }
  }
  gst_harness_push_event(h, gst_event_new_eos());
  gst_harness_teardown(h);
  gst_element_set_bus(element, nullptr);
  gst_object_unref(element);
  // Errors on the bus (refused caps, a buffer before caps) are answers, not findings.
  gst_bus_set_flushing(bus, TRUE);
  gst_object_unref(bus);
  if (checker.bad) {
    std::fprintf(stderr, "fuzz_element: %s\n", checker.why.c_str());
    std::abort();
  }
  return 0;
}
