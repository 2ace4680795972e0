/* SPDX-License-Identifier: MIT */
/*
 * print-changes: the speaker changes of a media file, read the two ways speakerchange sends them.
 *
 *   print-changes FILE-OR-URI [PROPERTY=VALUE ...]
 *
 * Runs  uridecodebin ! audioconvert ! audioresample ! speakerchange ! appsink  and prints every
 * change twice:
 *
 *   bus     from the element message on the bus: what a user interface or a logger reads, in the
 *           application's own thread;
 *   stream  from the serialized custom event that reaches appsink in order with the audio: what a
 *           recorder, captioner or encoder downstream reads. "after audio to" is the end of the
 *           last audio buffer appsink had delivered before the event: the change lies `delay`
 *           before the newest audio, so it is announced after the fact.
 *
 * PROPERTY=VALUE pairs are set on speakerchange (latency=1.5, threads=1, model=/path/to.onnx).
 * The model comes from the `model` property or the SPEAKERCHANGE_MODEL environment variable; the
 * plugin from an installed GStreamer or GST_PLUGIN_PATH.
 *
 * Build: cc print-changes.c $(pkg-config --cflags --libs speakerchange-1.0 gstreamer-app-1.0)
 */
#include <gst/app/gstappsink.h>
#include <gst/gst.h>
#include <gst/speakerchange/speakerchange-result.h>

typedef struct {
  guint from_bus;
  gint from_stream;       /* counted by the streaming thread, read after EOS */
  GstClockTime audio_end; /* streaming thread only */
} State;

static const gchar* who(const gchar* speaker) {
  return *speaker ? speaker : "nobody";
}

static void print_change(const gchar* source, const GstSpeakerChangeResult* r,
                         GstClockTime audio_end) {
  gchar* active = g_strjoinv(",", r->active_speakers);
  GString* line = g_string_new(NULL);
  if (r->revision) /* the change at that time was somebody else (identity by voice) */
    g_string_append_printf(line, "%-6s %8.3f s  revised: %s was %s  voice %.3f  delay %.3f s",
                           source, (gdouble)r->timestamp / GST_SECOND, who(r->previous_speaker),
                           who(r->speaker), r->voice_score, (gdouble)r->delay / GST_SECOND);
  else
    g_string_append_printf(line,
                           "%-6s %8.3f s  %s -> %s  active [%s]  confidence %.3f  delay %.3f s",
                           source, (gdouble)r->timestamp / GST_SECOND, who(r->previous_speaker),
                           who(r->speaker), active, r->confidence, (gdouble)r->delay / GST_SECOND);
  if (r->stalled) /* nobody, because the live feed stopped delivering audio */
    g_string_append(line, "  STALLED: no audio arrives");
  if (GST_CLOCK_TIME_IS_VALID(audio_end))
    g_string_append_printf(line, "  (after audio to %.3f s)", (gdouble)audio_end / GST_SECOND);
  /* One g_print per line: it is called from two threads and keeps lines whole. */
  g_print("%s\n", line->str);
  g_string_free(line, TRUE);
  g_free(active);
}

/* appsink queues samples and serialized events in stream order; pulling everything that is there
 * from both signals keeps the queue short and sees each event right after the audio before it. */
static void drain(GstAppSink* sink, State* state) {
  GstMiniObject* obj;
  while ((obj = gst_app_sink_try_pull_object(sink, 0)) != NULL) {
    if (GST_IS_SAMPLE(obj)) {
      GstBuffer* buf = gst_sample_get_buffer(GST_SAMPLE(obj));
      if (buf != NULL && GST_BUFFER_PTS_IS_VALID(buf) && GST_BUFFER_DURATION_IS_VALID(buf))
        state->audio_end = GST_BUFFER_PTS(buf) + GST_BUFFER_DURATION(buf);
    } else if (GST_IS_EVENT(obj)) {
      GstSpeakerChangeResult r;
      if (gst_speaker_change_result_parse_event(GST_EVENT(obj), &r)) {
        print_change("stream", &r, state->audio_end);
        g_atomic_int_inc(&state->from_stream);
        gst_speaker_change_result_clear(&r);
      }
    }
    gst_mini_object_unref(obj);
  }
}

static GstFlowReturn on_new_sample(GstAppSink* sink, gpointer user_data) {
  drain(sink, user_data);
  return GST_FLOW_OK;
}

static gboolean on_new_serialized_event(GstAppSink* sink, gpointer user_data) {
  drain(sink, user_data);
  return FALSE; /* not consumed: appsink still handles the event as usual */
}

static gboolean set_properties(GstElement* element, gchar** assignments) {
  for (gchar** a = assignments; *a != NULL; a++) {
    gchar** kv = g_strsplit(*a, "=", 2);
    const gboolean ok = kv[0] != NULL && kv[1] != NULL &&
                        g_object_class_find_property(G_OBJECT_GET_CLASS(element), kv[0]) != NULL;
    if (ok)
      gst_util_set_object_arg(G_OBJECT(element), kv[0], kv[1]);
    else
      g_printerr("print-changes: '%s' is not PROPERTY=VALUE of speakerchange\n", *a);
    g_strfreev(kv);
    if (!ok) return FALSE;
  }
  return TRUE;
}

int main(int argc, char** argv) {
  gst_init(&argc, &argv);
  if (argc < 2) {
    g_printerr("usage: %s FILE-OR-URI [PROPERTY=VALUE ...]\n", argv[0]);
    return 2;
  }

  GError* error = NULL;
  GstElement* pipeline = gst_parse_launch(
      "uridecodebin name=src ! audioconvert ! audioresample ! speakerchange name=sc ! "
      "appsink name=sink sync=false emit-signals=true",
      &error);
  if (pipeline == NULL || error != NULL) {
    g_printerr("print-changes: %s\n(is the plugin installed, or GST_PLUGIN_PATH set?)\n",
               error ? error->message : "could not build the pipeline");
    g_clear_error(&error);
    if (pipeline) gst_object_unref(pipeline);
    return 1;
  }
  GstElement* src = gst_bin_get_by_name(GST_BIN(pipeline), "src");
  GstElement* sc = gst_bin_get_by_name(GST_BIN(pipeline), "sc");
  GstElement* sink = gst_bin_get_by_name(GST_BIN(pipeline), "sink");
  gchar* uri = gst_uri_is_valid(argv[1]) ? g_strdup(argv[1]) : gst_filename_to_uri(argv[1], NULL);
  g_object_set(src, "uri", uri, NULL);

  State state = {0, 0, GST_CLOCK_TIME_NONE};
  g_signal_connect(sink, "new-sample", G_CALLBACK(on_new_sample), &state);
  g_signal_connect(sink, "new-serialized-event", G_CALLBACK(on_new_serialized_event), &state);

  int status = set_properties(sc, argv + 2) ? 0 : 2;
  if (status == 0) gst_element_set_state(pipeline, GST_STATE_PLAYING);

  GstBus* bus = gst_element_get_bus(pipeline);
  while (status == 0) {
    GstMessage* msg = gst_bus_timed_pop_filtered(
        bus, GST_CLOCK_TIME_NONE, GST_MESSAGE_ELEMENT | GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
    GstSpeakerChangeResult r;
    if (gst_speaker_change_result_parse_message(msg, &r)) {
      print_change("bus", &r, GST_CLOCK_TIME_NONE);
      state.from_bus++;
      gst_speaker_change_result_clear(&r);
    } else if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR) {
      gchar* debug = NULL;
      gst_message_parse_error(msg, &error, &debug);
      g_printerr("print-changes: %s: %s\n%s\n", GST_OBJECT_NAME(GST_MESSAGE_SRC(msg)),
                 error->message, debug ? debug : "");
      g_clear_error(&error);
      g_free(debug);
      status = 1;
    } else if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_EOS) {
      gst_message_unref(msg);
      break;
    }
    gst_message_unref(msg);
  }
  gst_element_set_state(pipeline, GST_STATE_NULL);
  if (status == 0)
    g_print("%u changes from the bus, %u from the stream\n", state.from_bus,
            (guint)g_atomic_int_get(&state.from_stream));

  gst_object_unref(bus);
  gst_object_unref(sink);
  gst_object_unref(sc);
  gst_object_unref(src);
  gst_object_unref(pipeline);
  g_free(uri);
  gst_deinit();
  return status;
}
