/* SPDX-License-Identifier: MIT */
/**
 * SECTION:speakerchange-result
 * @title: GstSpeakerChangeResult
 * @short_description: the `speaker-change` message and event of the speakerchange element as a
 *   plain C struct
 *
 * The speakerchange element reports every change of the current speaker as a #GstStructure named
 * `speaker-change`, posted as an element message on the bus and pushed downstream as a serialized
 * %GST_EVENT_CUSTOM_DOWNSTREAM event. This header turns such a message, event or structure into a
 * #GstSpeakerChangeResult and back, so that applications need not know the field names and types:
 *
 * |[<!-- language="C" -->
 * GstSpeakerChangeResult r;
 * if (gst_speaker_change_result_parse_message (msg, &r)) {
 *   g_print ("%" GST_TIME_FORMAT ": %s\n", GST_TIME_ARGS (r.timestamp), r.speaker);
 *   gst_speaker_change_result_clear (&r);
 * }
 * ]|
 *
 * Build against it with `pkg-config --cflags --libs speakerchange-1.0`. The library needs only
 * GStreamer core; it does not load the plugin.
 */
#ifndef GST_SPEAKER_CHANGE_RESULT_H
#define GST_SPEAKER_CHANGE_RESULT_H

#include <gst/gst.h>

G_BEGIN_DECLS

/**
 * GST_SPEAKER_CHANGE_RESULT_NAME:
 *
 * The name of the structure (and so of the message and the event): `"speaker-change"`.
 */
#define GST_SPEAKER_CHANGE_RESULT_NAME "speaker-change"

/**
 * GST_SPEAKER_CHANGE_REVISION_NAME:
 *
 * The name of the structure of a revision (see #GstSpeakerChangeResult's @revision):
 * `"speaker-change-revision"`, sent the same ways as `speaker-change`.
 */
#define GST_SPEAKER_CHANGE_REVISION_NAME "speaker-change-revision"

/**
 * GstSpeakerChangeResult:
 * @timestamp: buffer time (PTS) where the new turn begins, in nanoseconds: the centre of the
 *   first 16.875 ms network frame of the new state. Field `timestamp` (#guint64).
 * @running_time: @timestamp as running time in the element's current segment, or
 *   #GST_CLOCK_TIME_NONE when it lies outside the segment. Compare it with the pipeline clock
 *   (running time = clock time - base time). Field `running-time` (#guint64).
 * @stream_time: @timestamp as stream time (position in the media, what a seek bar shows), or
 *   #GST_CLOCK_TIME_NONE when it lies outside the segment. Field `stream-time` (#guint64).
 * @delay: nanoseconds between the change and the newest audio when it became final (the end of
 *   the window that decided it): at least the element's `latency` property plus the min-speech
 *   or min-silence that confirmed the turn, less at the end of a stream or stretch. In a live
 *   pipeline the inference time comes on top. Field `delay` (#guint64).
 * @speaker: the new current speaker, `speaker-0`, `speaker-1`, ... in order of appearance in the
 *   element's stream; "" when nobody speaks. Labels are per element and per stretch of stream:
 *   `speaker-0` of two elements are not the same person. Never %NULL after a successful parse.
 *   Field `speaker` (#gchararray).
 * @previous_speaker: the current speaker before the change, "" for nobody; in a revision, the
 *   name the revised change was announced with. Never %NULL after a successful parse. Field
 *   `previous-speaker` (#gchararray).
 * @active_speakers: %NULL-terminated array of everyone active when the new turn began; during
 *   overlapped speech it holds more than @speaker; empty (but not %NULL) when nobody speaks.
 *   Field `active-speakers` (#GstValueArray of #gchararray; a #GST_TYPE_ARRAY, not a #GStrv).
 * @confidence: mean network activity (0..1) of the new state over the frames that confirmed it.
 *   Field `confidence` (#gdouble).
 * @voice_score: with the element's `reidentify` on, the cosine similarity (about -1..1; the same
 *   person is typically above 0.75) between the new speaker's latest voice evidence and the
 *   voiceprint it was matched to; 0 for a voice heard here for the first time, one not yet
 *   heard alone long enough to embed (1.6 s), nobody, or `reidentify` off. Field `voice-score`
 *   (#gdouble); structures without it (older elements) parse with 0.
 * @stalled: %TRUE when a live feed stopped delivering audio (no data for the element's `latency`
 *   plus its `stall-margin` past upstream's latency): @speaker is "" (nobody is heard), @timestamp
 *   the end of the last audio and @delay how long the clock had run past it. Sent once per stall,
 *   also when nobody was speaking (then @previous_speaker is "" too); the next change, once audio
 *   returns, starts a new stretch (on the same time line, unless the audio returns at an earlier
 *   time: see @timeline). %FALSE for every other change. Field `stalled` (#gboolean);
 *   structures without it (older elements) parse with %FALSE.
 * @revision: %TRUE for a `speaker-change-revision`: with `reidentify` on, later evidence of the
 *   voice showed that the change announced at @timestamp (same @timestamp, @running_time and
 *   @stream_time) was @speaker, not @previous_speaker as announced. The time of the change stays;
 *   only its speaker is corrected, and so the speaker of the turn it began (up to the next
 *   change). @delay is how long after @timestamp the revision was made (the newest audio then);
 *   @active_speakers is empty, @confidence 0, @voice_score the new speaker's. A revision names
 *   a change sent earlier; one that names none this application saw (it joined later) can be
 *   ignored. %FALSE for a change (structure `speaker-change`).
 * @timeline: which time line the change is on: 0, then 1, 2, ... On one time line every
 *   change's @timestamp is no earlier than the one before it (a revision keeps the time of the
 *   change it names). A new line begins when upstream's timestamps go back for good (a source
 *   whose clock restarted, a feed that returns at an earlier time after a stall) and after a
 *   flush (a seek): its times may repeat earlier ones. Short disagreements are absorbed: jitter,
 *   lost audio up to 1 s (taken as silence), and audio stamped behind the time already analysed
 *   (a frozen source sending what it owes at once), which is dropped, with a warning, until its
 *   timestamps catch up. Field `timeline` (#guint); structures without it parse with 0.
 * @new_timeline: on the first change of a new time line, why it began (e.g. "the timestamps went
 *   back 13.204 s, to 14.550 s, before the end of the audio already analysed (27.754 s) after
 *   the feed stalled"); "" on every other change. Never %NULL after a successful parse. Field
 *   `new-timeline` (#gchararray); structures without it parse with "".
 *
 * One speaker change. After a successful parse the struct owns its strings: release them with
 * gst_speaker_change_result_clear(). To build one for gst_speaker_change_result_new_structure()
 * and friends, fill the fields (the functions only read them; %NULL strings count as "", a %NULL
 * @active_speakers as nobody).
 */
typedef struct {
  GstClockTime timestamp;
  GstClockTime running_time;
  GstClockTime stream_time;
  GstClockTime delay;
  gchar* speaker;
  gchar* previous_speaker;
  gchar** active_speakers;
  gdouble confidence;
  gdouble voice_score;
  gboolean stalled;
  gboolean revision;
  guint timeline;
  gchar* new_timeline;
  /* The GST_PADDING slots the first release reserved are used up: voice_score, stalled and
   * revision, timeline and new_timeline take their room, and the struct keeps its size. */
} GstSpeakerChangeResult;

/**
 * gst_speaker_change_result_parse_structure:
 * @structure: any #GstStructure
 * @result: (out caller-allocates): where the change goes; its previous contents are overwritten,
 *   not freed
 *
 * Reads a `speaker-change` structure. Fields the structure has beyond those of
 * #GstSpeakerChangeResult are ignored; `active-speakers` may also be a #GStrv, as bindings build
 * that more easily than a #GstValueArray.
 *
 * Returns: %TRUE and a filled @result (free it with gst_speaker_change_result_clear()) if
 *   @structure is named `speaker-change` (or `speaker-change-revision`: @revision is then %TRUE)
 *   and has every field with its type; %FALSE otherwise, with
 *   @result cleared (nothing to free).
 */
gboolean gst_speaker_change_result_parse_structure(const GstStructure* structure,
                                                   GstSpeakerChangeResult* result);

/**
 * gst_speaker_change_result_parse_message:
 * @message: any #GstMessage from the bus
 * @result: (out caller-allocates): as for gst_speaker_change_result_parse_structure()
 *
 * Returns: %TRUE if @message is an element message (%GST_MESSAGE_ELEMENT) whose structure
 *   gst_speaker_change_result_parse_structure() accepts; the message's source is the element that
 *   found the change (GST_MESSAGE_SRC()).
 */
gboolean gst_speaker_change_result_parse_message(GstMessage* message,
                                                 GstSpeakerChangeResult* result);

/**
 * gst_speaker_change_result_parse_event:
 * @event: any #GstEvent, e.g. from a pad probe or appsink
 * @result: (out caller-allocates): as for gst_speaker_change_result_parse_structure()
 *
 * Returns: %TRUE if @event is a custom downstream event (%GST_EVENT_CUSTOM_DOWNSTREAM) whose
 *   structure gst_speaker_change_result_parse_structure() accepts.
 */
gboolean gst_speaker_change_result_parse_event(GstEvent* event, GstSpeakerChangeResult* result);

/**
 * gst_speaker_change_result_new_structure:
 * @result: the change
 *
 * Builds the `speaker-change` structure the element sends (`speaker-change-revision` where
 * @result's @revision is set), with its fields in the element's order.
 *
 * Returns: (transfer full): a new structure
 */
GstStructure* gst_speaker_change_result_new_structure(const GstSpeakerChangeResult* result);

/**
 * gst_speaker_change_result_new_message:
 * @src: (nullable): the message's source, normally the element that found the change
 * @result: the change
 *
 * Returns: (transfer full): a new %GST_MESSAGE_ELEMENT carrying the `speaker-change` structure
 */
GstMessage* gst_speaker_change_result_new_message(GstObject* src,
                                                  const GstSpeakerChangeResult* result);

/**
 * gst_speaker_change_result_new_event:
 * @result: the change
 *
 * Returns: (transfer full): a new serialized %GST_EVENT_CUSTOM_DOWNSTREAM carrying the
 *   `speaker-change` structure
 */
GstEvent* gst_speaker_change_result_new_event(const GstSpeakerChangeResult* result);

/**
 * gst_speaker_change_result_clear:
 * @result: a result filled by a parse function (or zero-filled)
 *
 * Frees the strings of @result and resets it: times to #GST_CLOCK_TIME_NONE, strings to %NULL,
 * @confidence to 0. Safe to call more than once.
 */
void gst_speaker_change_result_clear(GstSpeakerChangeResult* result);

G_END_DECLS

#endif /* GST_SPEAKER_CHANGE_RESULT_H */
