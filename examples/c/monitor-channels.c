/* SPDX-License-Identifier: MIT */
/*
 * monitor-channels: who is speaking on each of several channels, in one pipeline, as a broadcast
 * operator watches a set of feeds.
 *
 *   monitor-channels [--live] NAME=FILE-OR-URI [NAME=FILE-OR-URI ...]
 *
 * Each channel gets its own branch,  uridecodebin ! audioconvert ! audioresample !
 * speakerchange name=NAME ! fakesink , and every change is printed tagged with its channel:
 *
 *   [studio-a]    6.663 s  nobody -> speaker-0  active [speaker-0]  confidence 0.847  delay 2.337 s
 *
 * The tag is the name of the speakerchange element that posted the message, so nothing but the
 * element name needs to be tracked per channel. Each channel has its own speaker labels:
 * `speaker-0` on two channels are not the same person. Lines of one channel come in that channel's
 * order; channels interleave as their analysis progresses. --live plays the inputs at real time
 * (sinks synchronised to the clock), as live feeds arrive; without it files run as fast as the CPU
 * allows. At the end every channel's change count and current speaker are printed.
 *
 * Build: cc monitor-channels.c $(pkg-config --cflags --libs speakerchange-1.0)
 */
#include <gst/gst.h>
#include <gst/speakerchange/speakerchange-result.h>
#include <string.h>

typedef struct {
  gchar* name;
  gchar* uri;
  guint changes;
  gchar* current;             /* speaker now, "" for nobody */
  GstClockTime current_since; /* where the current speaker's change was dated */
} Channel;

static const gchar* who(const gchar* speaker) {
  return *speaker ? speaker : "nobody";
}

static Channel* find_channel(GPtrArray* channels, const gchar* name) {
  for (guint i = 0; i < channels->len; i++) {
    Channel* c = g_ptr_array_index(channels, i);
    if (strcmp(c->name, name) == 0) return c;
  }
  return NULL;
}

static void channel_free(gpointer data) {
  Channel* c = data;
  g_free(c->name);
  g_free(c->uri);
  g_free(c->current);
  g_free(c);
}

/* NAME=FILE-OR-URI; NAME becomes an element name, so it is kept to what gst_parse_launch reads
 * unquoted. */
static Channel* parse_channel(const gchar* arg, GPtrArray* channels) {
  const gchar* eq = strchr(arg, '=');
  if (eq == NULL || eq == arg || eq[1] == '\0') return NULL;
  gchar* name = g_strndup(arg, (gsize)(eq - arg));
  gboolean ok = g_ascii_isalpha(name[0]) && find_channel(channels, name) == NULL;
  for (const gchar* p = name; ok && *p; p++) ok = g_ascii_isalnum(*p) || *p == '-' || *p == '_';
  if (!ok) {
    g_free(name);
    return NULL;
  }
  Channel* c = g_new0(Channel, 1);
  c->name = name;
  c->uri = gst_uri_is_valid(eq + 1) ? g_strdup(eq + 1) : gst_filename_to_uri(eq + 1, NULL);
  c->current = g_strdup("");
  c->current_since = GST_CLOCK_TIME_NONE;
  return c;
}

int main(int argc, char** argv) {
  gst_init(&argc, &argv);
  gboolean live = FALSE;
  GPtrArray* channels = g_ptr_array_new_with_free_func(channel_free);
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--live") == 0) {
      live = TRUE;
      continue;
    }
    Channel* c = parse_channel(argv[i], channels);
    if (c == NULL) {
      g_printerr(
          "monitor-channels: '%s' is not NAME=FILE-OR-URI with a new NAME of letters, "
          "digits, - and _\n",
          argv[i]);
      g_ptr_array_unref(channels);
      return 2;
    }
    g_ptr_array_add(channels, c);
  }
  if (channels->len == 0) {
    g_printerr("usage: %s [--live] NAME=FILE-OR-URI [NAME=FILE-OR-URI ...]\n", argv[0]);
    g_ptr_array_unref(channels);
    return 2;
  }

  /* Every element runs its own inference thread; splitting the cores between them avoids
   * oversubscription, which costs more than it gains with OpenMP's spinning threads. */
  const guint threads = MAX(1u, g_get_num_processors() / channels->len);
  GString* desc = g_string_new(NULL);
  for (guint i = 0; i < channels->len; i++) {
    Channel* c = g_ptr_array_index(channels, i);
    /* A file played at clock speed is still not live to the element's LATENCY query, so --live
     * asks for the latency mode itself: the default for files batches 32 windows (32 s). */
    g_string_append_printf(desc,
                           "uridecodebin name=src-%s ! audioconvert ! audioresample ! "
                           "speakerchange name=%s threads=%u mode=%s ! fakesink sync=%s  ",
                           c->name, c->name, threads, live ? "latency" : "auto",
                           live ? "true" : "false");
  }
  GError* error = NULL;
  GstElement* pipeline = gst_parse_launch(desc->str, &error);
  g_string_free(desc, TRUE);
  if (pipeline == NULL || error != NULL) {
    g_printerr("monitor-channels: %s\n(is the plugin installed, or GST_PLUGIN_PATH set?)\n",
               error ? error->message : "could not build the pipeline");
    g_clear_error(&error);
    if (pipeline) gst_object_unref(pipeline);
    g_ptr_array_unref(channels);
    return 1;
  }
  for (guint i = 0; i < channels->len; i++) {
    Channel* c = g_ptr_array_index(channels, i);
    gchar* name = g_strdup_printf("src-%s", c->name);
    GstElement* src = gst_bin_get_by_name(GST_BIN(pipeline), name);
    g_object_set(src, "uri", c->uri, NULL);
    gst_object_unref(src);
    g_free(name);
  }

  int status = 0;
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  GstBus* bus = gst_element_get_bus(pipeline);
  for (gboolean done = FALSE; !done;) {
    GstMessage* msg = gst_bus_timed_pop_filtered(
        bus, GST_CLOCK_TIME_NONE, GST_MESSAGE_ELEMENT | GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
    GstSpeakerChangeResult r;
    Channel* c = NULL;
    if (gst_speaker_change_result_parse_message(msg, &r)) {
      c = find_channel(channels, GST_MESSAGE_SRC_NAME(msg));
      if (c != NULL && r.revision) {
        /* Identity by voice found later that the change at that time was somebody else. */
        g_print("[%s] %8.3f s  revised: %s was %s\n", c->name, (gdouble)r.timestamp / GST_SECOND,
                who(r.previous_speaker), who(r.speaker));
        if (r.timestamp == c->current_since) {
          g_free(c->current);
          c->current = g_strdup(r.speaker);
        }
      } else if (c != NULL) {
        gchar* active = g_strjoinv(",", r.active_speakers);
        gchar* tag = g_strdup_printf("[%s]", c->name);
        /* A stalled feed reads as nobody speaking; say that it is the feed, not the room. */
        g_print("%-12s %8.3f s  %s -> %s  active [%s]  confidence %.3f  delay %.3f s%s\n", tag,
                (gdouble)r.timestamp / GST_SECOND, who(r.previous_speaker), who(r.speaker), active,
                r.confidence, (gdouble)r.delay / GST_SECOND,
                r.stalled ? "  STALLED: no audio arrives" : "");
        g_free(tag);
        g_free(active);
        c->changes++;
        g_free(c->current);
        c->current = g_strdup(r.speaker);
        c->current_since = r.timestamp;
      }
      gst_speaker_change_result_clear(&r);
    } else if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR) {
      /* One failing feed stops them all here; a real monitor would run one pipeline per feed, or
       * take the failing branch out and restart it, to keep the others going. */
      gchar* debug = NULL;
      gst_message_parse_error(msg, &error, &debug);
      g_printerr("monitor-channels: %s: %s\n%s\n", GST_MESSAGE_SRC_NAME(msg), error->message,
                 debug ? debug : "");
      g_clear_error(&error);
      g_free(debug);
      status = 1;
      done = TRUE;
    } else if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_EOS) {
      done = TRUE; /* the pipeline posts EOS once every channel has ended */
    }
    gst_message_unref(msg);
  }
  gst_element_set_state(pipeline, GST_STATE_NULL);

  if (status == 0)
    for (guint i = 0; i < channels->len; i++) {
      Channel* c = g_ptr_array_index(channels, i);
      g_print("%s: %u changes, speaking at the end: %s\n", c->name, c->changes, who(c->current));
    }
  gst_object_unref(bus);
  gst_object_unref(pipeline);
  g_ptr_array_unref(channels);
  gst_deinit();
  return status;
}
