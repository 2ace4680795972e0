// The public result API (gst/speakerchange/speakerchange-result.h): structure, message and event
// round trips, the element's own serialisation, and everything that is not a speaker change.
#include <gst/gst.h>
#include <gst/speakerchange/speakerchange-result.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

// Owns a parsed or hand-built result for the duration of a test.
struct Result : GstSpeakerChangeResult {
  Result() : GstSpeakerChangeResult{} { gst_speaker_change_result_clear(this); }
  ~Result() { gst_speaker_change_result_clear(this); }
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;
};

std::vector<std::string> strv(gchar** v) {
  std::vector<std::string> out;
  for (; v && *v; v++) out.emplace_back(*v);
  return out;
}

void fill(Result& r, std::vector<const char*> active) {
  r.timestamp = 6662812500;
  r.running_time = 5662812500;
  r.stream_time = 16662812500;
  r.delay = 2337187500;
  r.speaker = g_strdup("speaker-1");
  r.previous_speaker = g_strdup("speaker-0");
  active.push_back(nullptr);
  r.active_speakers = g_strdupv(const_cast<gchar**>(active.data()));
  r.confidence = 0.84703655044237769;
  r.voice_score = 0.8125;
  r.stalled = TRUE;
  r.timeline = 2;
  r.new_timeline = g_strdup("the timestamps went back 13.204 s");
}

void expect_equal(const GstSpeakerChangeResult& a, const GstSpeakerChangeResult& b) {
  EXPECT_EQ(a.timestamp, b.timestamp);
  EXPECT_EQ(a.running_time, b.running_time);
  EXPECT_EQ(a.stream_time, b.stream_time);
  EXPECT_EQ(a.delay, b.delay);
  EXPECT_STREQ(a.speaker, b.speaker);
  EXPECT_STREQ(a.previous_speaker, b.previous_speaker);
  EXPECT_EQ(strv(a.active_speakers), strv(b.active_speakers));
  EXPECT_EQ(a.confidence, b.confidence);
  EXPECT_EQ(a.voice_score, b.voice_score);
  EXPECT_EQ(a.stalled, b.stalled);
  EXPECT_EQ(a.revision, b.revision);
  EXPECT_EQ(a.timeline, b.timeline);
  EXPECT_STREQ(a.new_timeline, b.new_timeline);
}

GstStructure* parse_string(const char* text) {
  GstStructure* s = gst_structure_from_string(text, nullptr);
  EXPECT_NE(s, nullptr) << text;
  return s;
}

TEST(SpeakerChangeResult, StructureRoundTrip) {
  for (const auto& active : std::vector<std::vector<const char*>>{
           {}, {"speaker-1"}, {"speaker-1", "speaker-0", "speaker-2"}}) {
    Result in;
    fill(in, active);
    GstStructure* s = gst_speaker_change_result_new_structure(&in);
    Result out;
    ASSERT_TRUE(gst_speaker_change_result_parse_structure(s, &out));
    expect_equal(in, out);
    ASSERT_NE(out.active_speakers, nullptr);  // empty, not NULL
    gst_structure_free(s);
  }
}

// A revision (identity by voice renames an announced change) travels as its own structure name,
// with the change's fields: it round-trips with `revision` set, and a change never parses as one.
TEST(SpeakerChangeResult, RevisionRoundTrip) {
  Result in;
  fill(in, {});
  in.revision = TRUE;
  GstStructure* s = gst_speaker_change_result_new_structure(&in);
  EXPECT_TRUE(gst_structure_has_name(s, "speaker-change-revision"));
  EXPECT_TRUE(gst_structure_has_name(s, GST_SPEAKER_CHANGE_REVISION_NAME));
  Result out;
  ASSERT_TRUE(gst_speaker_change_result_parse_structure(s, &out));
  expect_equal(in, out);
  EXPECT_TRUE(out.revision);
  gst_structure_free(s);
  in.revision = FALSE;
  s = gst_speaker_change_result_new_structure(&in);
  Result change;
  ASSERT_TRUE(gst_speaker_change_result_parse_structure(s, &change));
  EXPECT_FALSE(change.revision);
  gst_structure_free(s);
}

// The layout is the element's documented one: names, types and field order.
TEST(SpeakerChangeResult, StructureLayout) {
  Result in;
  fill(in, {"speaker-1", "speaker-0"});
  GstStructure* s = gst_speaker_change_result_new_structure(&in);
  EXPECT_TRUE(gst_structure_has_name(s, "speaker-change"));
  const std::vector<std::pair<std::string, GType>> fields = {
      {"timestamp", G_TYPE_UINT64},        {"running-time", G_TYPE_UINT64},
      {"stream-time", G_TYPE_UINT64},      {"speaker", G_TYPE_STRING},
      {"previous-speaker", G_TYPE_STRING}, {"active-speakers", GST_TYPE_ARRAY},
      {"confidence", G_TYPE_DOUBLE},       {"delay", G_TYPE_UINT64},
      {"voice-score", G_TYPE_DOUBLE},      {"stalled", G_TYPE_BOOLEAN},
      {"timeline", G_TYPE_UINT},           {"new-timeline", G_TYPE_STRING}};
  ASSERT_EQ(gst_structure_n_fields(s), static_cast<gint>(fields.size()));
  for (size_t i = 0; i < fields.size(); i++) {
    EXPECT_EQ(gst_structure_nth_field_name(s, static_cast<guint>(i)), fields[i].first);
    EXPECT_EQ(gst_structure_get_field_type(s, fields[i].first.c_str()), fields[i].second)
        << fields[i].first;
  }
  gst_structure_free(s);
}

// A structure of an element before identity by voice has no voice-score, nor one before stall
// detection a `stalled`, nor one before time lines a `timeline`: it parses, with 0, FALSE, 0, "".
TEST(SpeakerChangeResult, ParsesAStructureWithoutVoiceScoreOrStalled) {
  GstStructure* s = parse_string(
      "speaker-change, timestamp=(guint64)1, running-time=(guint64)1, stream-time=(guint64)1, "
      "speaker=(string)a, previous-speaker=(string)b, active-speakers=(string)< a >, "
      "confidence=(double)0.5, delay=(guint64)2");
  Result out;
  ASSERT_TRUE(gst_speaker_change_result_parse_structure(s, &out));
  EXPECT_EQ(out.voice_score, 0.0);
  EXPECT_FALSE(out.stalled);
  EXPECT_EQ(out.timeline, 0u);
  EXPECT_STREQ(out.new_timeline, "");
  gst_structure_free(s);
}

TEST(SpeakerChangeResult, MessageRoundTrip) {
  Result in;
  fill(in, {"speaker-1"});
  GstObject* src = GST_OBJECT(gst_bin_new("channel-a"));
  GstMessage* m = gst_speaker_change_result_new_message(src, &in);
  EXPECT_EQ(GST_MESSAGE_TYPE(m), GST_MESSAGE_ELEMENT);
  EXPECT_EQ(GST_MESSAGE_SRC(m), src);
  Result out;
  ASSERT_TRUE(gst_speaker_change_result_parse_message(m, &out));
  expect_equal(in, out);
  gst_message_unref(m);
  gst_object_unref(src);
}

TEST(SpeakerChangeResult, EventRoundTrip) {
  Result in;
  fill(in, {"speaker-1", "speaker-0"});
  GstEvent* e = gst_speaker_change_result_new_event(&in);
  EXPECT_EQ(GST_EVENT_TYPE(e), GST_EVENT_CUSTOM_DOWNSTREAM);
  EXPECT_TRUE(GST_EVENT_IS_SERIALIZED(e));
  Result out;
  ASSERT_TRUE(gst_speaker_change_result_parse_event(e, &out));
  expect_equal(in, out);
  gst_event_unref(e);
}

// Through the text form (gst-launch-1.0 -m prints it, logs keep it) and back.
TEST(SpeakerChangeResult, SerialisedRoundTrip) {
  for (const auto& active : std::vector<std::vector<const char*>>{{}, {"speaker-1", "speaker-0"}}) {
    Result in;
    fill(in, active);
    GstStructure* s = gst_speaker_change_result_new_structure(&in);
    gchar* text = gst_structure_to_string(s);
    GstStructure* back = parse_string(text);
    Result out;
    ASSERT_TRUE(back && gst_speaker_change_result_parse_structure(back, &out)) << text;
    expect_equal(in, out);
    g_free(text);
    gst_structure_free(back);
    gst_structure_free(s);
  }
}

// What the element printed for the first change of sample.wav (README).
TEST(SpeakerChangeResult, ParsesTheElementsMessage) {
  GstStructure* s = parse_string(
      "speaker-change, timestamp=(guint64)6662812500, running-time=(guint64)6662812500, "
      "stream-time=(guint64)6662812500, speaker=(string)speaker-0, previous-speaker=(string)\"\", "
      "active-speakers=(string)< speaker-0 >, confidence=(double)0.84703655044237769, "
      "delay=(guint64)2337187500;");
  Result r;
  ASSERT_TRUE(gst_speaker_change_result_parse_structure(s, &r));
  EXPECT_EQ(r.timestamp, 6662812500u);
  EXPECT_EQ(r.running_time, 6662812500u);
  EXPECT_EQ(r.stream_time, 6662812500u);
  EXPECT_EQ(r.delay, 2337187500u);
  EXPECT_STREQ(r.speaker, "speaker-0");
  EXPECT_STREQ(r.previous_speaker, "");
  EXPECT_EQ(strv(r.active_speakers), std::vector<std::string>{"speaker-0"});
  EXPECT_DOUBLE_EQ(r.confidence, 0.84703655044237769);
  gst_structure_free(s);
}

TEST(SpeakerChangeResult, NobodyAndUnknownTimes) {
  Result in;  // cleared: NONE times, NULL strings
  GstStructure* s = gst_speaker_change_result_new_structure(&in);
  EXPECT_STREQ(gst_structure_get_string(s, "speaker"), "");
  EXPECT_STREQ(gst_structure_get_string(s, "previous-speaker"), "");
  Result out;
  ASSERT_TRUE(gst_speaker_change_result_parse_structure(s, &out));
  EXPECT_EQ(out.timestamp, GST_CLOCK_TIME_NONE);
  EXPECT_EQ(out.running_time, GST_CLOCK_TIME_NONE);
  EXPECT_EQ(out.stream_time, GST_CLOCK_TIME_NONE);
  EXPECT_EQ(out.delay, GST_CLOCK_TIME_NONE);
  EXPECT_STREQ(out.speaker, "");
  EXPECT_STREQ(out.previous_speaker, "");
  ASSERT_NE(out.active_speakers, nullptr);
  EXPECT_EQ(out.active_speakers[0], nullptr);
  gst_structure_free(s);

  // A NULL string (as the rstranscribe event carries) also reads as nobody.
  gst_speaker_change_result_clear(&out);  // parse overwrites, it does not free
  s = gst_speaker_change_result_new_structure(&in);
  gst_structure_set(s, "speaker", G_TYPE_STRING, nullptr, nullptr);
  ASSERT_TRUE(gst_speaker_change_result_parse_structure(s, &out));
  EXPECT_STREQ(out.speaker, "");
  gst_structure_free(s);
}

TEST(SpeakerChangeResult, TakesAStrvForActiveSpeakers) {
  Result in;
  fill(in, {"speaker-1", "speaker-0"});
  GstStructure* s = gst_speaker_change_result_new_structure(&in);
  const gchar* active[] = {"speaker-1", "speaker-0", nullptr};
  gst_structure_set(s, "active-speakers", G_TYPE_STRV, active, nullptr);
  Result out;
  ASSERT_TRUE(gst_speaker_change_result_parse_structure(s, &out));
  expect_equal(in, out);
  gst_structure_free(s);
}

// Not a speaker change: FALSE, and a result that is cleared (nothing to free, no stale strings).
TEST(SpeakerChangeResult, RejectsOtherStructures) {
  Result good;
  fill(good, {"speaker-1"});
  GstStructure* base = gst_speaker_change_result_new_structure(&good);
  std::vector<GstStructure*> bad;
  auto variant = [&](auto change) {
    GstStructure* s = gst_structure_copy(base);
    change(s);
    bad.push_back(s);
  };
  variant([](GstStructure* s) { gst_structure_set_name(s, "rstranscribe/speaker-change"); });
  for (const char* field : {"timestamp", "running-time", "stream-time", "speaker",
                            "previous-speaker", "active-speakers", "confidence", "delay"})
    variant([field](GstStructure* s) { gst_structure_remove_field(s, field); });
  variant([](GstStructure* s) {
    gst_structure_set(s, "timestamp", G_TYPE_INT64, G_GINT64_CONSTANT(1), nullptr);
  });
  variant([](GstStructure* s) { gst_structure_set(s, "delay", G_TYPE_DOUBLE, 2.3, nullptr); });
  variant([](GstStructure* s) { gst_structure_set(s, "confidence", G_TYPE_FLOAT, 0.5f, nullptr); });
  variant([](GstStructure* s) { gst_structure_set(s, "speaker", G_TYPE_INT, 0, nullptr); });
  variant([](GstStructure* s) {
    gst_structure_set(s, "active-speakers", G_TYPE_STRING, "speaker-1", nullptr);
  });
  variant([](GstStructure* s) {
    GValue array = G_VALUE_INIT, v = G_VALUE_INIT;
    g_value_init(&array, GST_TYPE_ARRAY);
    g_value_init(&v, G_TYPE_INT);
    gst_value_array_append_and_take_value(&array, &v);
    gst_structure_take_value(s, "active-speakers", &array);
  });
  for (GstStructure* s : bad) {
    Result r;
    r.speaker = g_strdup("stale");
    g_free(r.speaker);  // parse overwrites without freeing: it must not read this pointer
    EXPECT_FALSE(gst_speaker_change_result_parse_structure(s, &r)) << gst_structure_to_string(s);
    EXPECT_EQ(r.speaker, nullptr);
    EXPECT_EQ(r.previous_speaker, nullptr);
    EXPECT_EQ(r.active_speakers, nullptr);
    EXPECT_EQ(r.timestamp, GST_CLOCK_TIME_NONE);
    gst_structure_free(s);
  }
  gst_structure_free(base);
}

TEST(SpeakerChangeResult, RejectsOtherMessagesAndEvents) {
  Result good;
  fill(good, {"speaker-1"});
  Result r;

  // The right structure in the wrong carrier.
  GstMessage* app =
      gst_message_new_application(nullptr, gst_speaker_change_result_new_structure(&good));
  EXPECT_FALSE(gst_speaker_change_result_parse_message(app, &r));
  gst_message_unref(app);
  GstEvent* up = gst_event_new_custom(GST_EVENT_CUSTOM_UPSTREAM,
                                      gst_speaker_change_result_new_structure(&good));
  EXPECT_FALSE(gst_speaker_change_result_parse_event(up, &r));
  gst_event_unref(up);

  // Other messages and events, with and without a structure.
  GstMessage* eos = gst_message_new_eos(nullptr);
  EXPECT_FALSE(gst_speaker_change_result_parse_message(eos, &r));
  gst_message_unref(eos);
  GstMessage* level = gst_message_new_element(nullptr, gst_structure_new_empty("level"));
  EXPECT_FALSE(gst_speaker_change_result_parse_message(level, &r));
  gst_message_unref(level);
  GstEvent* flush = gst_event_new_flush_start();
  EXPECT_FALSE(gst_speaker_change_result_parse_event(flush, &r));
  gst_event_unref(flush);
  GstEvent* compat = gst_event_new_custom(
      GST_EVENT_CUSTOM_DOWNSTREAM, gst_structure_new("rstranscribe/speaker-change", "speaker",
                                                     G_TYPE_STRING, "speaker-1", nullptr));
  EXPECT_FALSE(gst_speaker_change_result_parse_event(compat, &r));
  gst_event_unref(compat);
  EXPECT_EQ(r.speaker, nullptr);
}

TEST(SpeakerChangeResult, ClearTwice) {
  Result r;
  fill(r, {"speaker-1"});
  gst_speaker_change_result_clear(&r);
  gst_speaker_change_result_clear(&r);
  EXPECT_EQ(r.speaker, nullptr);
  EXPECT_EQ(r.active_speakers, nullptr);
  EXPECT_EQ(r.timestamp, GST_CLOCK_TIME_NONE);
  EXPECT_EQ(r.confidence, 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  gst_init(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  const int ret = RUN_ALL_TESTS();
  gst_deinit();
  return ret;
}
