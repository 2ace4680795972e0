#include "gstspeakerchange-stream.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <string>

#include "gstspeakerchange-private.h"
#include "gstspeakerchange-stall.h"
#include "model/model_spec.h"
#include "scheduling/async_segmenter.h"
#include "speakerchange-result.h"
#include "streaming/speaker_change.h"
#include "streaming/speaker_change_detector.h"

namespace gstspeakerchange {
namespace {

constexpr int kLiveMaxQueue = 4;

// A time of the time line as buffer time: a stretch anchored near 0 may reach before it.
GstClockTime buffer_time(int64_t t) {
  return static_cast<GstClockTime>(std::max<int64_t>(t, 0));
}

GstClockTime sample_time(const Stream* s, int64_t sample) {
  return buffer_time(s->time_line.time_of(sample));
}

GstClockTime samples_to_duration(int64_t samples) {
  return gst_util_uint64_scale_int(static_cast<guint64>(std::max<int64_t>(samples, 0)), GST_SECOND,
                                   speakerseg::kSampleRate);
}

// `stall_delay`: for the change that announces a stall, how long the clock ran past the audio.
void emit_change(GstSpeakerChange* self, const speakerseg::SpeakerChange& c,
                 GstClockTime stall_delay) {
  GstBaseTransform* trans = GST_BASE_TRANSFORM(self);
  Stream* s = self->stream;
  // A revision names a change already sent, at its time; a change is ordered on its time line.
  speakerseg::TimeLine::Stamp stamp;
  if (c.revision) {
    stamp.time = s->time_line.time_of(c.sample);
    stamp.line = s->time_line.line();
  } else {
    stamp = s->time_line.stamp(s->time_line.time_of(c.sample));
  }
  const GstClockTime timestamp = buffer_time(stamp.time);
  GstClockTime running_time = GST_CLOCK_TIME_NONE, stream_time = GST_CLOCK_TIME_NONE;
  if (trans->segment.format == GST_FORMAT_TIME) {
    running_time = gst_segment_to_running_time(&trans->segment, GST_FORMAT_TIME, timestamp);
    stream_time = gst_segment_to_stream_time(&trans->segment, GST_FORMAT_TIME, timestamp);
  }

  GstSpeakerChangeResult r{};
  r.timestamp = timestamp;
  r.running_time = running_time;
  r.stream_time = stream_time;
  r.delay = c.stalled ? stall_delay : samples_to_duration(c.announced_sample - c.sample);
  r.speaker = g_strdup(c.speaker.c_str());
  r.previous_speaker = g_strdup((c.revision ? c.was : c.previous).c_str());
  r.active_speakers = g_new0(gchar*, c.active.size() + 1);
  for (size_t i = 0; i < c.active.size(); i++) r.active_speakers[i] = g_strdup(c.active[i].c_str());
  r.confidence = c.confidence;
  r.voice_score = c.voice_score;
  r.stalled = c.stalled;
  r.revision = c.revision;
  r.timeline = stamp.line;
  r.new_timeline = stamp.new_line.empty() ? nullptr : g_strdup(stamp.new_line.c_str());
  if (r.new_timeline) GST_INFO_OBJECT(self, "time line %u begins: %s", r.timeline, r.new_timeline);
  GstStructure* st = gst_speaker_change_result_new_structure(&r);
  gst_speaker_change_result_clear(&r);

  GST_OBJECT_LOCK(self);
  const bool post = self->settings->post_messages;
  const bool events = self->settings->emit_events;
  const bool compat = self->settings->compat_rstranscribe;
  GST_OBJECT_UNLOCK(self);

  GST_INFO_OBJECT(self, "%" GST_PTR_FORMAT, st);
  if (post)
    gst_element_post_message(GST_ELEMENT(self),
                             gst_message_new_element(GST_OBJECT(self), gst_structure_copy(st)));
  GstPad* srcpad = GST_BASE_TRANSFORM_SRC_PAD(trans);
  if (events && !gst_pad_push_event(srcpad, gst_event_new_custom(GST_EVENT_CUSTOM_DOWNSTREAM,
                                                                 gst_structure_copy(st))))
    GST_DEBUG_OBJECT(self, "downstream did not take the speaker-change event");
  // A transcriber's speaker-change event marks where a speaker starts; a revision starts nothing.
  if (compat && !c.revision) {
    GstStructure* r = gst_structure_new("rstranscribe/speaker-change", "speaker", G_TYPE_STRING,
                                        c.speaker.empty() ? nullptr : c.speaker.c_str(), nullptr);
    if (!gst_pad_push_event(srcpad, gst_event_new_custom(GST_EVENT_CUSTOM_DOWNSTREAM, r)))
      GST_DEBUG_OBJECT(self, "downstream did not take the rstranscribe/speaker-change event");
  }
  gst_structure_free(st);
}

// An engine that is away (engine=remote: the server lost or too slow) costs windows, not the
// stream: a warning when it goes, a speaker-change-unanalysed message whenever the stream time no
// analysed window covered grows, and one when the engine answers again.
void report_outage(GstSpeakerChange* self) {
  Stream* s = self->stream;
  const std::string outage = s->segmenter->outage();
  const double unanalysed = s->segmenter->unanalysed_seconds();
  const bool began = !outage.empty() && s->outage_reported.empty();
  const bool ended = outage.empty() && !s->outage_reported.empty();
  if (began)
    GST_ELEMENT_WARNING(self, RESOURCE, READ,
                        ("The inference engine is unavailable: %s", outage.c_str()),
                        ("audio passes on; windows wait for the engine up to outage-wait=%g s, "
                         "then go unanalysed (speaker-change-unanalysed messages say how much)",
                         s->outage_wait));
  if (ended) GST_INFO_OBJECT(self, "the inference engine answers again");
  if (!outage.empty()) s->outage_reported = outage;
  // A dropped window's audio counts until a later analysed window covers it, so the figure may
  // shrink: it is posted when it grows (and when the engine is back), not at every wobble.
  if (unanalysed <= s->unanalysed_reported && !ended) return;
  s->unanalysed_reported = unanalysed;
  const char* reason = !s->outage_reported.empty() ? s->outage_reported.c_str()
                       : s->segmenter->dropped_windows() > 0
                           ? "inference fell behind the live stream (windows dropped)"
                           : "";
  GstStructure* st = gst_structure_new(
      "speaker-change-unanalysed", "unanalysed-seconds", G_TYPE_DOUBLE, unanalysed,
      "unanalysed-windows", G_TYPE_UINT64, static_cast<guint64>(s->segmenter->unanalysed_windows()),
      "engine-available", G_TYPE_BOOLEAN, outage.empty(), "reason", G_TYPE_STRING, reason, nullptr);
  if (ended) s->outage_reported.clear();
  GST_DEBUG_OBJECT(self, "%" GST_PTR_FORMAT, st);
  gst_element_post_message(GST_ELEMENT(self), gst_message_new_element(GST_OBJECT(self), st));
}

// Sends every change the worker has ready; reports a failed worker.
GstFlowReturn emit_ready(GstSpeakerChange* self, GstClockTime stall_delay = 0) {
  Stream* s = self->stream;
  if (!s->segmenter) return GST_FLOW_OK;
  for (const auto& c : s->segmenter->take_changes()) emit_change(self, c, stall_delay);
  // Windows dropped because the engine was away are the outage's, reported below.
  const uint64_t dropped = s->segmenter->dropped_windows();
  if (dropped != s->dropped_reported) {
    GST_WARNING_OBJECT(self,
                       "inference is slower than real time: %" G_GUINT64_FORMAT
                       " windows dropped so far (raise step or threads, or use a faster engine)",
                       dropped);
    s->dropped_reported = dropped;
  }
  report_outage(self);
  const std::string error = s->segmenter->error();
  if (!error.empty()) {
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Speaker segmentation failed: %s", error.c_str()),
                      (nullptr));
    return GST_FLOW_ERROR;
  }
  return GST_FLOW_OK;
}

speakerseg::WindowBuffer::WindowFn submitter(Stream* s) {
  return [s](speakerseg::WindowJob&& window) { s->segmenter->submit(std::move(window)); };
}

// Posts a speaker-change-stats element message when stats-interval seconds of stream time have
// passed since the last one (or since the stretch began).
void post_stats_if_due(GstSpeakerChange* self) {
  Stream* s = self->stream;
  if (s->stats_interval == 0 || !s->segmenter || !s->time_line.in_stretch()) return;
  const GstClockTime now = sample_time(s, s->windows->total());
  if (!GST_CLOCK_TIME_IS_VALID(s->next_stats))
    s->next_stats = sample_time(s, 0) + s->stats_interval;
  if (now < s->next_stats) return;
  s->next_stats += s->stats_interval * ((now - s->next_stats) / s->stats_interval + 1);

  const speakerseg::WindowSegmenter& w = *s->segmenter;
  const int batch = w.last_shared_batch_size();
  const double inference = w.current_delay_seconds();
  const GstClockTime delay =
      static_cast<GstClockTime>(std::llround((s->settings.latency + inference) * GST_SECOND));
  GstStructure* st =
      gst_structure_new("speaker-change-stats", "queue-depth", G_TYPE_UINT,
                        static_cast<guint>(w.queue_depth()), "last-batch-size", G_TYPE_INT, batch,
                        "dropped-windows", G_TYPE_UINT64, static_cast<guint64>(w.dropped_windows()),
                        "delay", G_TYPE_UINT64, static_cast<guint64>(delay), "voice-embeddings",
                        G_TYPE_UINT64, static_cast<guint64>(w.voice_embeddings()),
                        "last-voice-batch-size", G_TYPE_INT, w.last_voice_batch_size(),
                        "unanalysed-seconds", G_TYPE_DOUBLE, w.unanalysed_seconds(), nullptr);
  GST_DEBUG_OBJECT(self, "%" GST_PTR_FORMAT, st);
  gst_element_post_message(GST_ELEMENT(self), gst_message_new_element(GST_OBJECT(self), st));
}

// Creates the worker on the first data: the mode depends on whether upstream is live.
bool ensure_segmenter(GstSpeakerChange* self) {
  Stream* s = self->stream;
  if (s->segmenter) return true;
  if (!s->engine && !s->scheduler) {
    GST_ELEMENT_ERROR(self, CORE, STATE_CHANGE, ("Data arrived before the element was started"),
                      (nullptr));
    return false;
  }
  gboolean live = FALSE;
  GstClockTime upstream_latency = 0;
  GstQuery* query = gst_query_new_latency();
  if (gst_pad_peer_query(GST_BASE_TRANSFORM_SINK_PAD(self), query))
    gst_query_parse_latency(query, &live, &upstream_latency, nullptr);
  else
    GST_DEBUG_OBJECT(self, "upstream did not answer the latency query: taken as not live");
  gst_query_unref(query);

  GstSpeakerChangeMode mode = s->mode;
  if (mode == GST_SPEAKER_CHANGE_MODE_AUTO)
    mode = live ? GST_SPEAKER_CHANGE_MODE_LATENCY : GST_SPEAKER_CHANGE_MODE_THROUGHPUT;
  speakerseg::AsyncSegmenterOptions options;
  options.batch_size = mode == GST_SPEAKER_CHANGE_MODE_LATENCY ? 1 : s->batch_size;
  options.max_queue = live ? kLiveMaxQueue : 2 * options.batch_size;
  options.drop_when_late = live;
  options.outage_wait = s->outage_wait;
  if (live) {
    // Live channels of one process are usually started together; give each its own window phase
    // so that their windows do not all come due, and queue for inference, at the same instant.
    static std::atomic<uint64_t> live_streams{0};
    s->windows->reset(
        speakerseg::staggered_first_end(s->windows->step_samples(), live_streams.fetch_add(1)));
  }
  GST_INFO_OBJECT(self, "upstream is %s: %s mode, batch %d, queue %d, %s, %s",
                  live ? "live" : "not live", enum_nick(GST_TYPE_SPEAKER_CHANGE_MODE, mode),
                  s->scheduler ? s->scheduler->batch_size() : options.batch_size, options.max_queue,
                  live ? "dropping late windows" : "back-pressure",
                  s->scheduler ? "shared engine" : "own engine");
  try {
    if (s->scheduler) {
      speakerseg::SharedChannelOptions shared;
      shared.max_queue = options.max_queue;
      shared.drop_when_late = options.drop_when_late;
      shared.max_batch_wait = s->max_batch_wait;
      s->segmenter = std::make_unique<speakerseg::SharedSegmenterChannel>(s->scheduler, s->settings,
                                                                          shared, s->enrolled);
    } else {
      s->segmenter = speakerseg::make_async_segmenter(std::move(s->engine), s->settings, options,
                                                      std::move(s->voice), s->enrolled);
    }
  } catch (const std::exception& e) {
    GST_ELEMENT_ERROR(self, LIBRARY, INIT, ("Could not start the inference worker: %s", e.what()),
                      (nullptr));
    return false;
  }
  s->dropped_reported = 0;
  s->live = live;
  if (live) {
    // Audio reaches the element upstream's latency after its running time: only lateness
    // beyond that and `latency` (and the margin) means nothing more is coming.
    const int64_t upstream =
        GST_CLOCK_TIME_IS_VALID(upstream_latency) ? static_cast<int64_t>(upstream_latency) : 0;
    const int64_t wait = speakerseg::stall_wait(s->settings.latency, s->stall_margin, upstream);
    GST_INFO_OBJECT(self,
                    "a stall is declared %" GST_STIME_FORMAT
                    " after the newest audio and %" GST_STIME_FORMAT " after it arrived",
                    GST_STIME_ARGS(wait), GST_STIME_ARGS(std::max<int64_t>(wait - upstream, 0)));
    stall_start(self, wait, upstream);
  }
  return true;
}

// Live streams: the stall watch learns that audio (or a gap) reaches buffer time `end`.
void audio_until(GstSpeakerChange* self, GstClockTime end) {
  const GstSegment& seg = GST_BASE_TRANSFORM(self)->segment;
  if (!self->stream->live || !GST_CLOCK_TIME_IS_VALID(end) || seg.format != GST_FORMAT_TIME) return;
  // Also past the segment's stop: a server's announced range can end before its last audio.
  guint64 running = 0;
  if (gst_segment_to_running_time_full(&seg, GST_FORMAT_TIME, end, &running) > 0)
    stall_audio(self, running);
}

// end_stretch() and stall_stretch(): the one way a stretch ends.
GstFlowReturn finish_stretch(GstSpeakerChange* self, speakerseg::StretchEnd how,
                             GstClockTime next_start, GstClockTime stall_delay) {
  Stream* s = self->stream;
  GstFlowReturn ret = GST_FLOW_OK;
  // A stall is announced even without audio in the stretch (one that a long gap began).
  if (s->segmenter && (s->windows->total() > 0 || how == speakerseg::StretchEnd::kStalled)) {
    s->windows->flush_tail(submitter(s));
    s->segmenter->finish(s->windows->total(), how);
    ret = emit_ready(self, stall_delay);
  }
  forget_stretch(s);
  if (how == speakerseg::StretchEnd::kStalled) s->time_line.end_stretch("after the feed stalled");
  if (ret == GST_FLOW_OK && GST_CLOCK_TIME_IS_VALID(next_start)) {
    s->time_line.begin_stretch(static_cast<int64_t>(next_start));
    audio_until(self, next_start);  // the gap: time went on
  }
  return ret;
}

}  // namespace

void forget_stretch(Stream* s) {
  if (s->segmenter) s->segmenter->reset();
  if (s->windows) s->windows->reset();
  s->time_line.end_stretch();
  s->next_stats = GST_CLOCK_TIME_NONE;
}

void restart_time_line(Stream* s) {
  forget_stretch(s);
  s->time_line.restart("the stream was flushed (a seek, or upstream restarted it)");
}

GstFlowReturn end_stretch(GstSpeakerChange* self, GstClockTime next_start) {
  return finish_stretch(self, speakerseg::StretchEnd::kEnded, next_start, 0);
}

GstFlowReturn stall_stretch(GstSpeakerChange* self, GstClockTime waited) {
  GST_INFO_OBJECT(self, "no audio for %" GST_TIME_FORMAT ": the feed stalled",
                  GST_TIME_ARGS(waited));
  return finish_stretch(self, speakerseg::StretchEnd::kStalled, GST_CLOCK_TIME_NONE, waited);
}

GstFlowReturn process(GstSpeakerChange* self, GstClockTime pts, const float* samples, size_t n,
                      bool discont) {
  Stream* s = self->stream;
  if (!ensure_segmenter(self)) return GST_FLOW_ERROR;
  GstFlowReturn ret = GST_FLOW_OK;
  if (GST_CLOCK_TIME_IS_VALID(pts)) {
    const int64_t t = static_cast<int64_t>(pts);
    speakerseg::Placement p;
    if (s->time_line.in_stretch())
      p = s->time_line.place(t, s->windows->total(), static_cast<int64_t>(n), discont);
    if (p.action == speakerseg::Placement::Action::kNewStretch) {
      GST_INFO_OBJECT(self, "%s: ending the stretch, starting a new one at %" GST_TIME_FORMAT,
                      p.why.c_str(), GST_TIME_ARGS(pts));
      ret = end_stretch(self);
      if (ret != GST_FLOW_OK) return ret;
      p = {};
    }
    if (!s->time_line.in_stretch()) s->time_line.begin_stretch(t);
    if (p.silence > 0) {
      GST_DEBUG_OBJECT(self, "filling a gap of %" G_GINT64_FORMAT " samples with silence",
                       p.silence);
      s->windows->push(nullptr, static_cast<size_t>(p.silence), submitter(s));
    }
    if (p.skip > 0) {
      if (!p.why.empty())
        GST_ELEMENT_WARNING(self, STREAM, FORMAT,
                            ("Audio stamped with times already analysed is dropped"),
                            ("%s", p.why.c_str()));
      samples = samples ? samples + p.skip : nullptr;
      n -= static_cast<size_t>(p.skip);
    }
  } else if (!s->time_line.in_stretch()) {
    const GstSegment& seg = GST_BASE_TRANSFORM(self)->segment;
    s->time_line.begin_stretch(seg.format == GST_FORMAT_TIME ? static_cast<int64_t>(seg.start) : 0);
  }
  if (n > 0) s->windows->push(samples, n, submitter(s));
  s->time_line.reached(s->windows->total());
  audio_until(self, sample_time(s, s->windows->total()));
  post_stats_if_due(self);
  return emit_ready(self);
}

}  // namespace gstspeakerchange
