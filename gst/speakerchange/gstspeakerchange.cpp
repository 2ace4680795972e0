// SPDX-License-Identifier: MIT
//
// The speakerchange element: its documentation, its GObject and GstBaseTransform glue (states,
// caps, buffers, events). No signal processing here, and no state of its own beyond what these
// files hold: gstspeakerchange-settings (properties), gstspeakerchange-engine (the engine it
// starts with), gstspeakerchange-stream (buffers and events onto core/, changes onto messages and
// events). Windows, inference and turn decisions are core/'s.

/**
 * SECTION:element-speakerchange
 * @title: speakerchange
 * @short_description: announces who is speaking now and when that changes
 *
 * speakerchange analyses 16 kHz mono audio with the pyannote segmentation-3.0 network and
 * announces every change of the current speaker. It is a passthrough analyser like `level`: audio
 * leaves the element exactly as it came in (same buffers, same bytes, same timestamps, no added
 * latency); only messages and events are added.
 *
 * The network runs over 10 s windows that end every #GstSpeakerChange:step seconds, on a worker
 * thread, so the streaming thread never waits for inference unless the worker falls behind a
 * non-live stream (back-pressure). The per-window speaker labels are stitched into one timeline
 * for the whole stream (`speaker-0`, `speaker-1`, ... in order of appearance). A frame becomes
 * final once #GstSpeakerChange:latency seconds of newer audio have arrived; a new current speaker
 * counts once it has held for #GstSpeakerChange:min-speech seconds, "nobody" once silence has
 * lasted #GstSpeakerChange:min-silence seconds (a shorter pause stays in the speaker's turn,
 * unless somebody else speaks after it). A change is dated where the new turn began, so it is
 * always announced after the fact: `delay` says by how much.
 *
 * Every change is reported as a #GstStructure named `speaker-change`:
 *
 * * #guint64 `timestamp`: buffer time (PTS) where the new turn begins (the centre of its first
 *   16.875 ms network frame), in nanoseconds.
 * * #guint64 `running-time`: `timestamp` as running time in the current segment
 *   (#GST_CLOCK_TIME_NONE when it lies outside the segment).
 * * #guint64 `stream-time`: `timestamp` as stream time in the current segment
 *   (#GST_CLOCK_TIME_NONE when it lies outside the segment).
 * * #gchararray `speaker`: the new current speaker, "" when nobody speaks.
 * * #gchararray `previous-speaker`: the current speaker before the change, "" for nobody.
 * * #GstValueArray of #gchararray `active-speakers` (a #GST_TYPE_ARRAY, not a #GStrv): everyone
 *   active when the new turn began; during overlapped speech it holds more than `speaker`.
 * * #gdouble `confidence`: mean network activity of the new state (0..1) over the frames that
 *   confirmed it.
 * * #guint64 `delay`: nanoseconds between the change and the newest audio when it became final
 *   (the end of the window that decided it): at least #GstSpeakerChange:latency (plus about the
 *   min-speech or min-silence that confirmed the turn; for a silence before the next speaker, its
 *   length plus min-speech), except for changes made final by the end
 *   of a stretch of stream (EOS, discontinuity, long gap), which are announced with the audio
 *   there is. It does not depend on how fast inference runs: in a live pipeline the time the
 *   window waited and ran comes on top (`speaker-change-stats` reports it).
 * * #gdouble `voice-score`: with #GstSpeakerChange:reidentify, the cosine similarity between the
 *   new speaker's latest voice evidence and the voiceprint it was matched to (the same person is
 *   typically above 0.75); 0 for a voice heard here for the first time, one not yet heard alone
 *   long enough to embed (1.6 s), nobody, or reidentify off.
 * * #gboolean `stalled`: %TRUE for the one change that announces a stalled live feed (see "Live
 *   feeds that stall" below): `speaker` is "", `timestamp` the end of the last audio, `delay` how
 *   long the clock had run past it, `confidence` 1, `active-speakers` empty. %FALSE otherwise.
 * * #guint `timeline`: the time line the change is on (0, 1, ...; see "Time line" below): on one
 *   line no change's `timestamp` is earlier than the one before it.
 * * #gchararray `new-timeline`: on the first change of a new time line, why it began (upstream's
 *   timestamps went back, and by how much; a flush); "" on every other change.
 *
 * ## Identity by voice
 *
 * With #GstSpeakerChange:reidentify (on where the voice model is installed), `speaker` names a
 * voice rather than a window-to-window overlap: each speaker's clean speech (where they alone are
 * active) runs through the GE2E voice encoder, so that a speaker who comes back after other
 * people or after silence gets their label back, a label the window stitching carried from one
 * person onto the next is split, people heard talking at once never share a label, and the people
 * of the #GstSpeakerChange:voiceprints file (made with `speakerseg enroll`) are announced by name.
 * The voice decides, turn by turn: a turn's first decision, when its first frame is final, reads
 * the clean speech the element holds by then (at most #GstSpeakerChange:latency of it past that
 * frame), and the turn is decided again every 1.6 s of clean speech on all of it so far. When
 * later evidence shows that a change was announced under the wrong name, the element sends a
 * revision: a #GstStructure named `speaker-change-revision`, the same ways and with the same
 * fields as `speaker-change`: `timestamp` (and `running-time`, `stream-time`) of the change it
 * revises, `speaker` the right name, `previous-speaker` the name announced, `delay` how long after
 * `timestamp` the revision was made, `voice-score` the new speaker's, `active-speakers` empty,
 * `confidence` 0, `stalled` %FALSE. Times of changes are never revised. An application that keeps
 * a timeline renames the turn begun at `timestamp`; one that shows only the current speaker
 * shows the new name if that turn is still current. #GstSpeakerChange:max-speakers caps how many
 * people a stream is told apart into. The voice encoder runs on the CPU, next to the segmentation
 * engine.
 *
 * The structure is sent
 *
 * * as an element message on the bus when #GstSpeakerChange:post-messages is %TRUE;
 * * as a serialized custom downstream event (%GST_EVENT_CUSTOM_DOWNSTREAM) on the source pad when
 *   #GstSpeakerChange:emit-events is %TRUE. The event travels in order with the audio: it is pushed
 *   as soon as the worker has the change, before the buffer being analysed goes on downstream.
 *   As a change is at least #GstSpeakerChange:latency old when it is announced, `timestamp` lies
 *   before the PTS of the buffer that follows the event (for any latency longer than a buffer);
 * * when #GstSpeakerChange:compat-rstranscribe is %TRUE, also as a custom downstream event named
 *   `rstranscribe/speaker-change` with a single #gchararray field `speaker` (%NULL when nobody
 *   speaks), which the caption and translation elements of gst-plugins-rs (textaccumulate,
 *   awstranslate, ...) react to.
 *
 * Changes are emitted from the streaming thread, in order, while it handles the first buffer (or
 * serialized event) after the worker has them ready. At EOS the element runs the last, partial
 * window, makes every remaining frame final and sends the remaining changes before it forwards EOS;
 * a stalled live feed is finished the same way (below).
 *
 * ## Resources and states
 *
 * The model is loaded and the inference engine created on the READY to PAUSED transition (so that
 * properties set in READY take effect). If that fails (model file missing or invalid, an engine
 * this build lacks), the element posts an error message that says what is wrong and how to fix it
 * and the state change fails; NULL to READY never loads anything. The worker thread starts with the
 * first buffer and stops, like everything else, on PAUSED to READY. Properties flagged
 * "changeable only in NULL or READY state" that are set later take effect at the next READY to
 * PAUSED transition; #GstSpeakerChange:post-messages, #GstSpeakerChange:emit-events and
 * #GstSpeakerChange:compat-rstranscribe apply at once.
 *
 * With #GstSpeakerChange:mode `auto` the element asks upstream with a LATENCY query when the first
 * buffer arrives. A live upstream selects the `latency` mode (one window per inference) and lets
 * the worker drop the oldest waiting window when inference cannot keep up with real time (at most
 * 4 windows wait), so the announcement delay stays bounded. The live streams of one process get
 * different window phases (the n-th one's windows end a golden-ratio fraction of a step off the
 * first one's), so that channels started together do not all need inference at the same instant;
 * the first window still comes within one step. A non-live upstream (files) selects
 * the `throughput` mode (batches of #GstSpeakerChange:batch-size windows) and back-pressure: up to
 * 2 x batch-size windows wait, then the streaming thread waits for the worker, and nothing is
 * lost. Without an answer to the query upstream counts as not live.
 *
 * ## Shared engine
 *
 * With #GstSpeakerChange:shared-engine %TRUE (the default) every speakerchange of the process
 * with the same model path, engine kind (cpu or cuda), device, threads, precision,
 * lstm-algorithm, cuda-graphs and engine batch size (#GstSpeakerChange:batch-size, or 1 with
 * mode `latency`) shares one loaded model, one engine and one inference worker. The worker runs the
 * waiting windows of all those streams together, the oldest first, up to the batch size per
 * inference; each stream keeps its own time line, speaker labels, queue and results, and a flush or
 * error of one stream does not disturb the others. By default a window runs as soon as the worker
 * is free, with every window waiting then; the windows that arrive while it runs make the next
 * batch, so batches grow with the load by themselves and an idle worker adds no delay.
 * #GstSpeakerChange:max-batch-wait above 0 makes a window wait up to that many seconds for other
 * streams' windows to fill a batch (fewer, larger inferences at the cost of delay); a streaming
 * thread waiting on its results (EOS, back-pressure) makes the worker run at once.
 * Queue sizes, dropping and back-pressure follow the element's mode as with an own engine. The
 * engine is created when the first such element starts and freed when the last one stops. With
 * %FALSE each element loads its own model and runs its own worker.
 * #GstSpeakerChange:batches-in-flight above 1 (also part of the key) gives the shared engine that
 * many engines and workers, so that one batch is assembled, stitched and handed back while
 * another runs (on a GPU, on its own CUDA stream); a stream's windows are in one batch at a time,
 * so each stream's results stay in order. #GstSpeakerChange:stitch-threads (also part of the key)
 * is how many threads stitch a batch's streams into their time lines once its inference is done.
 *
 * ## Statistics
 *
 * When #GstSpeakerChange:stats-interval is above 0, the element posts an element message named
 * `speaker-change-stats` every that many seconds of stream time, with fields
 *
 * * #guint `queue-depth`: windows of this stream waiting for inference.
 * * #gint `last-batch-size`: windows in the last inference that ran any of this stream's windows
 *   (with a shared engine, counting every stream's windows in that batch).
 * * #guint64 `dropped-windows`: windows dropped so far because inference fell behind a live
 *   stream.
 * * #guint64 `delay`: the current announcement delay in nanoseconds: #GstSpeakerChange:latency
 *   plus what inference adds now (with a shared engine: the time from submission to results of
 *   the last window run, or the age of the oldest waiting window if longer; an own engine does
 *   not measure it).
 * * #guint64 `voice-embeddings`: with #GstSpeakerChange:reidentify, utterance embeddings the
 *   voice encoder has made of this stream's clean speech so far (0 without).
 * * #gint `last-voice-batch-size`: the voice encoder batch that embedded this stream's latest
 *   utterance, in partials of 1.6 s (at most 64; with a shared engine every stream's partials
 *   count); 0 before the first or without #GstSpeakerChange:reidentify.
 * * #gdouble `unanalysed-seconds`: seconds of stream time no analysed window covered (windows
 *   dropped by a live stream's inference falling behind, or by an engine outage).
 *
 * ## Time line
 *
 * Sample positions count from the first sample of a stretch of stream; the PTS of that sample
 * anchors them to buffer time, and from there the samples are the clock, as in audiobasesink.
 * Each buffer's PTS is compared with the time its first sample has on that clock: within 40 ms it
 * counts as continuous (jitter); a forward gap shorter than 1 s is filled with silence; a longer
 * one ends the stretch (its remaining changes are sent, as at EOS) and a new stretch, with new
 * speaker labels unless #GstSpeakerChange:reidentify carries them, begins at that buffer.
 * Timestamps that fall behind the samples are taken as jitter until they have stayed behind for
 * 1 s of audio; then the audio whose time was already analysed is dropped, with a warning, until
 * its timestamps catch up (a frozen source that sends what it owes at once, stamped as it
 * arrives), unless they went back for good by more than 1 s (they keep pace with the audio from
 * further back: a source whose clock restarted), which begins a new stretch there, as a buffer
 * flagged %GST_BUFFER_FLAG_DISCONT with an earlier time does at once. Buffers flagged
 * %GST_BUFFER_FLAG_GAP count as silence. A GAP event shorter than 5 s is filled with
 * silence; a longer one ends the stretch, and the next stretch begins where it ends, even for a
 * buffer without a timestamp (a GAP event without duration adds no audio; it only shows a live
 * feed alive, below). FLUSH_STOP forgets everything that was pending. A caps change between F32LE
 * and S16LE continues the stretch.
 *
 * Changes are ordered on a time line: on one line no change has an earlier `timestamp` than the
 * change before it. A stretch that begins before the end of the audio the line already carried
 * (more than 40 ms back), and the first stretch after a flush, begin a new time line: `timeline`
 * counts up and the first change on it says why in `new-timeline`. An application that orders or
 * aligns changes by time starts afresh there.
 *
 * ## Live feeds that stall
 *
 * A live source that stops delivering (a dropped feed, a network stream whose end never comes)
 * sends no EOS. With a live upstream the element watches the pipeline clock: once it has run
 * upstream's latency (its answer to the LATENCY query) + #GstSpeakerChange:latency +
 * #GstSpeakerChange:stall-margin past the end of the newest audio (buffers, GAP events with a
 * duration), and #GstSpeakerChange:latency + #GstSpeakerChange:stall-margin past the moment
 * anything last arrived (a GAP event without a duration too), the feed counts as stalled. The
 * arrival counts because a source's time stamps may lag the clock by more than that (an appsrc that
 * stamps from 0 after the pipeline has played a while), and such a feed is not stalled while it
 * delivers; upstream's latency is left out there, as audio that arrives that long after its end is
 * on time. The element then ends the stretch as at EOS (the last, partial window runs, every
 * remaining frame becomes final and the changes the audio still decides go out, the last turn
 * change included), but without ending the stream, and announces nobody: a `speaker-change` with
 * `speaker` "" and `stalled` %TRUE, also when nobody was speaking. A lost feed thus never reads as
 * the last speaker still talking. The announcement is made from a thread of GStreamer's pool under
 * the stream lock, in order with the events around it: the messages of a stall are posted from that
 * thread while it holds the stream lock, so a bus sync handler must not change the pipeline's state
 * in reaction to them (that waits for the same lock); react from an asynchronous bus watch. When
 * audio comes back, analysis resumes in a new stretch, as after a long gap (the first change from
 * ""), on the same time line unless the audio comes back at an earlier time. The clock counts only
 * in PLAYING; flushes, EOS and stopping disarm it, and #GstSpeakerChange:stall-margin -1 (any
 * negative value) switches the watch off.
 *
 * The element adds no latency to the audio and answers the LATENCY query with upstream's answer.
 * Consumers of the events that need the changes in time should plan for `delay`.
 *
 * ## An inference server that goes away
 *
 * With #GstSpeakerChange:engine `remote` the networks run on an Open Inference Protocol server
 * (#GstSpeakerChange:server; docs/scale-out.md). Mid-stream, a server that is lost, overloaded or
 * slower than #GstSpeakerChange:remote-deadline costs stream time, not the stream: the audio
 * passes untouched, a warning says why, windows wait for the server (retried with backoff) up to
 * #GstSpeakerChange:outage-wait and are then dropped unanalysed, and analysis resumes by itself
 * when the server answers again. Whenever the stream time no analysed window covered grows, and
 * once when the engine is back, the element posts an element message `speaker-change-unanalysed`:
 *
 * * #gdouble `unanalysed-seconds`: seconds of this stream's time, since its first window, that no
 *   analysed window covered, whatever the cause.
 * * #guint64 `unanalysed-windows`: windows dropped because the engine was unavailable.
 * * #gboolean `engine-available`: %FALSE while the engine is away, %TRUE once it is back.
 * * #gchararray `reason`: why the engine was unavailable; without an outage, "inference fell
 *   behind the live stream (windows dropped)" when that is the cause.
 *
 * A dropped window's audio counts as unanalysed until a later analysed window covers it, so the
 * figure can shrink; the message is posted when it grows, and once when the engine is back.
 *
 * ## Example launch lines
 * |[
 * gst-launch-1.0 -m filesrc location=meeting.wav ! wavparse ! audioconvert ! audioresample ! \
 *     speakerchange ! fakesink
 * ]| prints every `speaker-change` message of a recording.
 * |[
 * gst-launch-1.0 -m pulsesrc ! audioconvert ! audioresample ! speakerchange latency=1.5 ! \
 *     fakesink sync=true
 * ]| follows a microphone live.
 */

#include "gstspeakerchange.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>

#include "gstspeakerchange-engine.h"
#include "gstspeakerchange-private.h"
#include "io/pcm.h"
#include "model/model_location.h"
#include "model/model_spec.h"

GST_DEBUG_CATEGORY(gst_speaker_change_debug);

using namespace gstspeakerchange;

#define gst_speaker_change_parent_class parent_class
G_DEFINE_TYPE(GstSpeakerChange, gst_speaker_change, GST_TYPE_AUDIO_FILTER)
GST_ELEMENT_REGISTER_DEFINE(speakerchange, "speakerchange", GST_RANK_NONE, GST_TYPE_SPEAKER_CHANGE)

namespace {

// ---------------------------------------------------------------------------------------------
// GstBaseTransform / GstAudioFilter vfuncs

gboolean speaker_change_start(GstBaseTransform* trans) {
  auto* self = GST_SPEAKER_CHANGE(trans);
  GST_OBJECT_LOCK(self);
  const Settings p = *self->settings;
  GST_OBJECT_UNLOCK(self);
  Stream* s = self->stream;
  if (!acquire_engine(self, p, s)) return FALSE;

  s->settings = speakerseg::StreamSettings{};
  s->settings.step = p.step;
  s->settings.latency = p.latency;
  s->settings.min_speech = p.min_speech;
  s->settings.min_silence = p.min_silence;
  s->mode = p.mode;
  s->batch_size = p.batch_size;
  s->max_batch_wait = p.max_batch_wait;
  s->stats_interval = static_cast<GstClockTime>(std::llround(p.stats_interval * GST_SECOND));
  s->stall_margin = p.stall_margin;
  s->outage_wait = p.outage_wait;
  s->settings.identity.enabled = p.reidentify;
  s->settings.identity.match_threshold = p.voice_threshold;
  s->settings.identity.enrolled_threshold = p.enrolled_threshold;
  s->settings.identity.max_speakers = p.max_speakers;
  try {
    s->windows = std::make_unique<speakerseg::WindowBuffer>(speakerseg::kWindowSamples,
                                                            speakerseg::step_samples(s->settings));
  } catch (const std::exception& e) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("Invalid step: %s", e.what()), (nullptr));
    s->engine.reset();
    s->voice.reset();
    s->scheduler.reset();
    return FALSE;
  }
  forget_stretch(s);
  return TRUE;
}

gboolean speaker_change_stop(GstBaseTransform* trans) {
  auto* self = GST_SPEAKER_CHANGE(trans);
  Stream* s = self->stream;
  stall_start(self, -1);  // disarmed, and off until the next live first buffer
  s->live = false;
  s->segmenter.reset();  // stops and joins the worker, or leaves the shared one
  s->engine.reset();
  s->voice.reset();
  s->enrolled.reset();
  s->scheduler.reset();  // the pool frees the shared engine when its last element stops
  s->windows.reset();
  s->scratch = {};
  s->s16_scratch = {};
  s->time_line = {};
  gst_audio_info_init(&s->info);
  return TRUE;
}

gboolean speaker_change_setup(GstAudioFilter* filter, const GstAudioInfo* info) {
  auto* self = GST_SPEAKER_CHANGE(filter);
  const GstAudioFormat format = GST_AUDIO_INFO_FORMAT(info);
  if (format != GST_AUDIO_FORMAT_F32LE && format != GST_AUDIO_FORMAT_S16LE) {
    GST_ERROR_OBJECT(self, "unsupported format %s", GST_AUDIO_INFO_NAME(info));
    return FALSE;
  }
  GST_DEBUG_OBJECT(self, "format %s", GST_AUDIO_INFO_NAME(info));
  self->stream->info = *info;  // a format change keeps the time line going
  return TRUE;
}

GstFlowReturn speaker_change_transform_ip(GstBaseTransform* trans, GstBuffer* buf) {
  auto* self = GST_SPEAKER_CHANGE(trans);
  Stream* s = self->stream;
  const int bpf = GST_AUDIO_INFO_BPF(&s->info);
  if (bpf <= 0) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, (nullptr), ("buffer before caps"));
    return GST_FLOW_NOT_NEGOTIATED;
  }
  GstMapInfo map;
  if (!gst_buffer_map(buf, &map, GST_MAP_READ)) {
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Could not map the buffer for reading"), (nullptr));
    return GST_FLOW_ERROR;
  }
  const size_t n = map.size / static_cast<size_t>(bpf);
  const float* samples = nullptr;  // silence
  if (n > 0 && !GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_GAP)) {
    if (GST_AUDIO_INFO_FORMAT(&s->info) == GST_AUDIO_FORMAT_F32LE) {
      if (reinterpret_cast<uintptr_t>(map.data) % alignof(float) == 0) {
        samples = reinterpret_cast<const float*>(map.data);
      } else {
        s->scratch.resize(n);
        std::memcpy(s->scratch.data(), map.data, n * sizeof(float));
        samples = s->scratch.data();
      }
    } else {
      const int16_t* in = reinterpret_cast<const int16_t*>(map.data);
      if (reinterpret_cast<uintptr_t>(map.data) % alignof(int16_t) != 0) {
        s->s16_scratch.resize(n);
        std::memcpy(s->s16_scratch.data(), map.data, n * sizeof(int16_t));
        in = s->s16_scratch.data();
      }
      s->scratch.resize(n);
      speakerseg::s16_to_float(in, n, s->scratch.data());
      samples = s->scratch.data();
    }
  }
  const GstFlowReturn ret =
      process(self, GST_BUFFER_PTS(buf), samples, n, GST_BUFFER_IS_DISCONT(buf));
  gst_buffer_unmap(buf, &map);
  return ret;
}

gboolean speaker_change_sink_event(GstBaseTransform* trans, GstEvent* event) {
  auto* self = GST_SPEAKER_CHANGE(trans);
  Stream* s = self->stream;
  GstFlowReturn ret = GST_FLOW_OK;
  switch (GST_EVENT_TYPE(event)) {
    case GST_EVENT_FLUSH_STOP:
      restart_time_line(s);
      stall_reset(self);
      break;
    case GST_EVENT_EOS:
      // Results first, then EOS. A worker failure is posted as an error; EOS still goes on.
      ret = end_stretch(self);
      stall_reset(self);  // an ended stream is not a stalled one
      break;
    case GST_EVENT_GAP: {
      GstClockTime timestamp, duration;
      gst_event_parse_gap(event, &timestamp, &duration);
      if (!GST_CLOCK_TIME_IS_VALID(duration)) {
        // No time to fill, but proof that the live feed still delivers.
        if (s->live) stall_audio(self, GST_CLOCK_TIME_NONE);
        break;
      }
      if (duration < kMaxFilledGap) {
        const guint64 n =
            gst_util_uint64_scale_round(duration, speakerseg::kSampleRate, GST_SECOND);
        ret = process(self, timestamp, nullptr, static_cast<size_t>(n));
      } else {
        GST_INFO_OBJECT(self, "gap of %" GST_TIME_FORMAT ": ending the stretch",
                        GST_TIME_ARGS(duration));
        // The next stretch begins where the gap ends (not at the segment start, before it).
        ret = end_stretch(
            self, GST_CLOCK_TIME_IS_VALID(timestamp) ? timestamp + duration : GST_CLOCK_TIME_NONE);
      }
      if (ret != GST_FLOW_OK) {
        gst_event_unref(event);
        return FALSE;
      }
      break;
    }
    default:
      break;
  }
  return GST_BASE_TRANSFORM_CLASS(parent_class)->sink_event(trans, event);
}

GstStateChangeReturn speaker_change_change_state(GstElement* element, GstStateChange transition) {
  auto* self = GST_SPEAKER_CHANGE(element);
  if (transition == GST_STATE_CHANGE_PLAYING_TO_PAUSED) stall_set_playing(self, false);
  const GstStateChangeReturn ret =
      GST_ELEMENT_CLASS(parent_class)->change_state(element, transition);
  // After the parent: the pipeline has set the new base time by now.
  if (transition == GST_STATE_CHANGE_PAUSED_TO_PLAYING && ret != GST_STATE_CHANGE_FAILURE)
    stall_set_playing(self, true);
  return ret;
}

// ---------------------------------------------------------------------------------------------
// GObject

void speaker_change_set_property(GObject* object, guint prop_id, const GValue* value,
                                 GParamSpec* pspec) {
  auto* self = GST_SPEAKER_CHANGE(object);
  GST_OBJECT_LOCK(self);
  const bool running = GST_STATE(self) > GST_STATE_READY;
  const bool known = set_property(*self->settings, prop_id, value);
  GST_OBJECT_UNLOCK(self);
  if (!known) {
    G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    return;
  }
  // Not under the object lock: logging an object takes its lock.
  if (running && (pspec->flags & GST_PARAM_MUTABLE_READY))
    GST_WARNING_OBJECT(self, "%s changes only take effect at the next READY to PAUSED transition",
                       pspec->name);
}

void speaker_change_get_property(GObject* object, guint prop_id, GValue* value, GParamSpec* pspec) {
  auto* self = GST_SPEAKER_CHANGE(object);
  GST_OBJECT_LOCK(self);
  const bool known = get_property(*self->settings, prop_id, value);
  GST_OBJECT_UNLOCK(self);
  if (!known) G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
}

void speaker_change_finalize(GObject* object) {
  auto* self = GST_SPEAKER_CHANGE(object);
  delete self->stream;  // stops the worker if stop() never ran
  delete self->settings;
  delete self->stall;  // nothing armed: an armed clock id holds a reference to the element
  self->stream = nullptr;
  self->settings = nullptr;
  self->stall = nullptr;
  G_OBJECT_CLASS(parent_class)->finalize(object);
}

}  // namespace

static void gst_speaker_change_class_init(GstSpeakerChangeClass* klass) {
  GObjectClass* gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass* element_class = GST_ELEMENT_CLASS(klass);
  GstBaseTransformClass* trans_class = GST_BASE_TRANSFORM_CLASS(klass);
  GstAudioFilterClass* filter_class = GST_AUDIO_FILTER_CLASS(klass);

  GST_DEBUG_CATEGORY_INIT(gst_speaker_change_debug, "speakerchange", 0, "speaker change detection");

  gobject_class->set_property = speaker_change_set_property;
  gobject_class->get_property = speaker_change_get_property;
  gobject_class->finalize = speaker_change_finalize;
  install_properties(gobject_class);

  GstCaps* caps = gst_caps_from_string(
      "audio/x-raw, format = (string) { F32LE, S16LE }, rate = (int) 16000, channels = (int) 1, "
      "layout = (string) interleaved");
  gst_audio_filter_class_add_pad_templates(filter_class, caps);
  gst_caps_unref(caps);

  gst_element_class_set_static_metadata(
      element_class, "Speaker change detector", "Filter/Analyzer/Audio",
      "Announces who is speaking and when that changes (pyannote segmentation-3.0), as "
      "'speaker-change' element messages and custom downstream events (optionally also "
      "'rstranscribe/speaker-change' events); audio passes through untouched",
      "speakerchange developers");

  element_class->change_state = speaker_change_change_state;
  trans_class->start = speaker_change_start;
  trans_class->stop = speaker_change_stop;
  trans_class->transform_ip = speaker_change_transform_ip;
  trans_class->sink_event = speaker_change_sink_event;
  trans_class->transform_ip_on_passthrough = TRUE;
  filter_class->setup = speaker_change_setup;
}

static void gst_speaker_change_init(GstSpeakerChange* self) {
  self->settings = new Settings();
  self->settings->model = speakerseg::default_model_path();
  self->settings->voice_model = speakerseg::default_voice_model_path();
  self->settings->reidentify = default_reidentify();
  self->stream = new Stream();
  self->stall = new StallTimer();
  gst_audio_info_init(&self->stream->info);
  GstBaseTransform* trans = GST_BASE_TRANSFORM(self);
  gst_base_transform_set_passthrough(trans, TRUE);
  gst_base_transform_set_gap_aware(trans, TRUE);
}
