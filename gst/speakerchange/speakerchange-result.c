/* SPDX-License-Identifier: MIT */
/* The `speaker-change` (and `speaker-change-revision`) structure <-> GstSpeakerChangeResult. The
 * structure's layout is defined here once; the element builds its structure with
 * gst_speaker_change_result_new_structure(), so the two cannot drift apart. */
#include "speakerchange-result.h"

#include <string.h>

static const gchar* const kTimeFields[] = {"timestamp", "running-time", "stream-time", "delay"};

static void reset(GstSpeakerChangeResult* result) {
  memset(result, 0, sizeof *result);
  result->timestamp = result->running_time = result->stream_time = result->delay =
      GST_CLOCK_TIME_NONE;
}

void gst_speaker_change_result_clear(GstSpeakerChangeResult* result) {
  g_return_if_fail(result != NULL);
  g_free(result->speaker);
  g_free(result->previous_speaker);
  g_strfreev(result->active_speakers);
  g_free(result->new_timeline);
  reset(result);
}

static gboolean get_time(const GstStructure* s, const gchar* field, GstClockTime* out) {
  const GValue* v = gst_structure_get_value(s, field);
  if (v == NULL || !G_VALUE_HOLDS(v, G_TYPE_UINT64)) return FALSE;
  *out = g_value_get_uint64(v);
  return TRUE;
}

/* A string field; a NULL string reads as "" (nobody) so that callers never test for NULL. */
static gboolean get_string(const GstStructure* s, const gchar* field, gchar** out) {
  const GValue* v = gst_structure_get_value(s, field);
  if (v == NULL || !G_VALUE_HOLDS_STRING(v)) return FALSE;
  const gchar* str = g_value_get_string(v);
  *out = g_strdup(str != NULL ? str : "");
  return TRUE;
}

/* The element sends a GstValueArray; a GStrv is taken too, as bindings build that more easily. */
static gboolean get_strv(const GstStructure* s, const gchar* field, gchar*** out) {
  const GValue* v = gst_structure_get_value(s, field);
  if (v == NULL) return FALSE;
  if (G_VALUE_HOLDS(v, G_TYPE_STRV)) {
    const gchar* const* strv = g_value_get_boxed(v);
    *out = strv != NULL ? g_strdupv((gchar**)strv) : g_new0(gchar*, 1);
    return TRUE;
  }
  if (!GST_VALUE_HOLDS_ARRAY(v)) return FALSE;
  const guint n = gst_value_array_get_size(v);
  for (guint i = 0; i < n; i++)
    if (!G_VALUE_HOLDS_STRING(gst_value_array_get_value(v, i))) return FALSE;
  gchar** strv = g_new0(gchar*, n + 1);
  for (guint i = 0; i < n; i++) {
    const gchar* str = g_value_get_string(gst_value_array_get_value(v, i));
    strv[i] = g_strdup(str != NULL ? str : "");
  }
  *out = strv;
  return TRUE;
}

gboolean gst_speaker_change_result_parse_structure(const GstStructure* structure,
                                                   GstSpeakerChangeResult* result) {
  g_return_val_if_fail(result != NULL, FALSE);
  reset(result);
  g_return_val_if_fail(structure != NULL, FALSE);
  result->revision = gst_structure_has_name(structure, GST_SPEAKER_CHANGE_REVISION_NAME);
  if (!result->revision && !gst_structure_has_name(structure, GST_SPEAKER_CHANGE_RESULT_NAME))
    return FALSE;

  GstClockTime* times[] = {&result->timestamp, &result->running_time, &result->stream_time,
                           &result->delay};
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < G_N_ELEMENTS(kTimeFields); i++)
    ok = get_time(structure, kTimeFields[i], times[i]);
  ok = ok && gst_structure_get_double(structure, "confidence", &result->confidence);
  ok = ok && get_string(structure, "speaker", &result->speaker);
  ok = ok && get_string(structure, "previous-speaker", &result->previous_speaker);
  ok = ok && get_strv(structure, "active-speakers", &result->active_speakers);
  if (ok && !gst_structure_get_double(structure, "voice-score", &result->voice_score))
    result->voice_score = 0; /* an element before identity by voice */
  if (ok && !gst_structure_get_boolean(structure, "stalled", &result->stalled))
    result->stalled = FALSE; /* an element before stall detection */
  /* An element before time lines: one line. */
  if (ok && !gst_structure_get_uint(structure, "timeline", &result->timeline)) result->timeline = 0;
  if (ok && !get_string(structure, "new-timeline", &result->new_timeline))
    result->new_timeline = g_strdup("");
  if (!ok) gst_speaker_change_result_clear(result);
  return ok;
}

gboolean gst_speaker_change_result_parse_message(GstMessage* message,
                                                 GstSpeakerChangeResult* result) {
  g_return_val_if_fail(result != NULL, FALSE);
  reset(result);
  g_return_val_if_fail(GST_IS_MESSAGE(message), FALSE);
  if (GST_MESSAGE_TYPE(message) != GST_MESSAGE_ELEMENT) return FALSE;
  const GstStructure* s = gst_message_get_structure(message);
  return s != NULL && gst_speaker_change_result_parse_structure(s, result);
}

gboolean gst_speaker_change_result_parse_event(GstEvent* event, GstSpeakerChangeResult* result) {
  g_return_val_if_fail(result != NULL, FALSE);
  reset(result);
  g_return_val_if_fail(GST_IS_EVENT(event), FALSE);
  if (GST_EVENT_TYPE(event) != GST_EVENT_CUSTOM_DOWNSTREAM) return FALSE;
  const GstStructure* s = gst_event_get_structure(event);
  return s != NULL && gst_speaker_change_result_parse_structure(s, result);
}

GstStructure* gst_speaker_change_result_new_structure(const GstSpeakerChangeResult* result) {
  g_return_val_if_fail(result != NULL, NULL);
  GValue active = G_VALUE_INIT;
  g_value_init(&active, GST_TYPE_ARRAY);
  for (gchar** name = result->active_speakers; name != NULL && *name != NULL; name++) {
    GValue v = G_VALUE_INIT;
    g_value_init(&v, G_TYPE_STRING);
    g_value_set_string(&v, *name);
    gst_value_array_append_and_take_value(&active, &v);
  }
  GstStructure* s = gst_structure_new(
      result->revision ? GST_SPEAKER_CHANGE_REVISION_NAME : GST_SPEAKER_CHANGE_RESULT_NAME,
      "timestamp", G_TYPE_UINT64, result->timestamp, "running-time", G_TYPE_UINT64,
      result->running_time, "stream-time", G_TYPE_UINT64, result->stream_time, "speaker",
      G_TYPE_STRING, result->speaker != NULL ? result->speaker : "", "previous-speaker",
      G_TYPE_STRING, result->previous_speaker != NULL ? result->previous_speaker : "", NULL);
  gst_structure_take_value(s, "active-speakers", &active);
  gst_structure_set(s, "confidence", G_TYPE_DOUBLE, result->confidence, "delay", G_TYPE_UINT64,
                    result->delay, "voice-score", G_TYPE_DOUBLE, result->voice_score, "stalled",
                    G_TYPE_BOOLEAN, result->stalled, "timeline", G_TYPE_UINT, result->timeline,
                    "new-timeline", G_TYPE_STRING,
                    result->new_timeline != NULL ? result->new_timeline : "", NULL);
  return s;
}

GstMessage* gst_speaker_change_result_new_message(GstObject* src,
                                                  const GstSpeakerChangeResult* result) {
  g_return_val_if_fail(result != NULL, NULL);
  return gst_message_new_element(src, gst_speaker_change_result_new_structure(result));
}

GstEvent* gst_speaker_change_result_new_event(const GstSpeakerChangeResult* result) {
  g_return_val_if_fail(result != NULL, NULL);
  return gst_event_new_custom(GST_EVENT_CUSTOM_DOWNSTREAM,
                              gst_speaker_change_result_new_structure(result));
}
