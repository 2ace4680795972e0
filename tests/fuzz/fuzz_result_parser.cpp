// The public result API (gst/speakerchange/speakerchange-result.h): any serialised GstStructure
// string either parses as a speaker-change or is refused, and a parsed result survives the round
// trip through the structure the element builds.
#include <gst/gst.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <gst/speakerchange/speakerchange-result.h>

static guint count(gchar** v) {
  return v ? g_strv_length(v) : 0;
}
static bool same(const char* a, const char* b) {
  return g_strcmp0(a ? a : "", b ? b : "") == 0;
}

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  gst_init(argc, argv);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // GStreamer's own parser leaks what it was filling on malformed lists and arrays (see
  // tests/fuzz/lsan.supp); nested deeper than this, its recursion pushes the call that names it
  // out of the recorded stack and the suppression cannot see it. No speaker-change nests lists.
  int depth = 0, deepest = 0;
  for (char c : text) {
    if (c == '{' || c == '<' || c == '[') deepest = std::max(deepest, ++depth);
    if (c == '}' || c == '>' || c == ']') depth = std::max(0, depth - 1);
  }
  if (deepest > 8) return 0;
  GstStructure* s = gst_structure_from_string(text.c_str(), nullptr);
  if (!s) return 0;
  GstSpeakerChangeResult r;
  if (gst_speaker_change_result_parse_structure(s, &r)) {
    GstStructure* again = gst_speaker_change_result_new_structure(&r);
    GstSpeakerChangeResult back;
    if (!gst_speaker_change_result_parse_structure(again, &back)) std::abort();
    const bool equal = back.timestamp == r.timestamp && back.running_time == r.running_time &&
                       back.stream_time == r.stream_time && back.delay == r.delay &&
                       same(back.speaker, r.speaker) &&
                       same(back.previous_speaker, r.previous_speaker) &&
                       count(back.active_speakers) == count(r.active_speakers) &&
                       (back.confidence == r.confidence ||
                        (back.confidence != back.confidence && r.confidence != r.confidence));
    if (!equal) std::abort();
    gst_speaker_change_result_clear(&back);
    gst_structure_free(again);
    gst_speaker_change_result_clear(&r);
  }
  gst_structure_free(s);
  return 0;
}
