// Many streams, one engine: a SharedScheduler owns one engine and one worker thread, and every
// SharedSegmenterChannel registered with it (one per stream) hands it windows. The worker runs the
// windows of all channels together, up to `batch_size` per forward call, so that N live channels
// cost one model and one batched inference instead of N.
//
// Batches in flight: given several engines (one per lane: a CUDA engine each with its own stream,
// staging buffers and graphs, a remote engine each with its own requests), each lane has a worker
// of its own, and one lane assembles, stitches and hands back a batch while another's runs. While
// a batch is in flight another starts only when a full batch waits (or a host waits): under light
// load one lane runs what there is at once, under heavy load the lanes run full batches side by
// side. A channel's windows are in one lane at a time, so each timeline still takes its windows
// in order and from one thread at a time; the voice encoder, one for all lanes, runs one call at
// a time.
//
// Each channel keeps its own SpeakerTimeline: the engine's outputs go back to the channel whose
// window they came from, in that channel's submission order, so channels never see each other's
// speakers. After a forward pass the batch's channels are stitched by the lane's worker and the
// scheduler's helpers (`stitch_threads`), each channel by one thread at a time: with identity by
// voice that is most of the host's work, too much for the one thread that also feeds the engine.
// make_async_segmenter() (async_segmenter.h) is the one-channel case with a private scheduler and
// engine.
//
// Batching versus latency: the worker waits for a fuller batch only while every waiting window is
// younger than its channel's `max_batch_wait`; a window is never held longer than that for the
// sake of batching. A host waiting on its channel (drain, finish, a submit blocked by
// back-pressure) makes the worker run at once, since waiting longer could only slow it down.
//
// Fairness: a batch takes the oldest waiting windows across all channels, so a busy channel cannot
// starve a quiet one; back-pressure and dropping (`drop_when_late`) are per channel.
//
// An engine that is unavailable for a while (EngineUnavailable: a remote server lost, a deadline
// missed) does not fail the channels: the batch is retried with backoff (0.1 s, doubling to 2 s)
// while its oldest window is younger than `outage_wait`; past that its windows are dropped and
// counted per channel as unanalysed, and the next batch tries again. outage() says why while it
// lasts; the first batch the engine answers ends it. A voice encoder that is unavailable is
// retried the same way for up to `outage_wait`; past that its channels fail.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engines/segmentation_engine.h"
#include "scheduling/helper_team.h"
#include "scheduling/window_segmenter.h"
#include "streaming/speaker_change_detector.h"
#include "streaming/speaker_timeline.h"

namespace speakerseg {

class SharedScheduler {
 public:
  // `voice`: the voice encoder for channels with identity by voice (none: such channels are
  // refused); it runs on the worker, and on a host finishing its channel, never on both at once.
  // `outage_wait`: seconds a window may wait for an unavailable engine before it is dropped.
  // `stitch_threads`: threads that stitch a batch's channels after its forward pass, the lane's
  // worker and stitch_threads - 1 helpers shared by all lanes (1: the worker alone; 0: one per
  // core, at most kMostAutoStitchThreads).
  SharedScheduler(std::unique_ptr<SegmentationEngine> engine, int batch_size,
                  std::unique_ptr<VoiceEncoder> voice = nullptr,
                  double outage_wait = kDefaultOutageWait, int stitch_threads = 1);
  // One lane per engine (at least one; all of one model and kind): batches in flight at once.
  SharedScheduler(std::vector<std::unique_ptr<SegmentationEngine>> engines, int batch_size,
                  std::unique_ptr<VoiceEncoder> voice = nullptr,
                  double outage_wait = kDefaultOutageWait, int stitch_threads = 1);
  static constexpr double kDefaultOutageWait = 10;
  static constexpr int kMostAutoStitchThreads = 8;
  // The waits between retries of an engine that is unavailable: doubling from the first to the
  // last.
  static constexpr std::chrono::milliseconds kFirstRetry{100}, kLastRetry{2000};
  ~SharedScheduler();
  SharedScheduler(const SharedScheduler&) = delete;
  SharedScheduler& operator=(const SharedScheduler&) = delete;

  std::string description() const;
  int batch_size() const { return batch_size_; }
  // Batches that may be in flight at once: one per engine.
  int lanes() const { return static_cast<int>(lanes_.size()); }
  // Threads that stitch a batch: its lane's worker and the helpers.
  int stitch_threads() const { return 1 + helpers_.helpers(); }
  // The stitch threads a scheduler asked for `requested` has (0: one per core OpenMP would use,
  // at most kMostAutoStitchThreads), for keys that must tell schedulers apart by it.
  static int stitch_threads_for(int requested);

  // For operators and tests: forward calls so far, the size of the last and of the largest one,
  // the channels registered and the windows waiting across all of them.
  uint64_t batches_run() const;
  int last_batch_size() const;
  int max_batch_size() const;
  size_t channels() const;
  size_t queue_depth() const;
  // Identity by voice on the worker: encoder calls so far, the utterances they embedded (from
  // every channel: one call serves all the channels of a batch that wait for a voice at once),
  // and the most partials in one call.
  uint64_t voice_calls() const;
  uint64_t voice_utterances() const;
  int max_voice_batch() const;
  // Why the engine is unavailable now ("" while it answers).
  std::string outage() const;
  // The most batches that have run at once (at most lanes()).
  int max_in_flight() const;

 private:
  friend class SharedSegmenterChannel;
  using Clock = std::chrono::steady_clock;

  struct Pending {
    WindowJob job;
    uint64_t seq = 0;  // submission order across channels: the oldest runs first
    Clock::time_point submitted, due;
  };

  // One stream's state. Everything but `timeline` is guarded by the scheduler's mutex_. The
  // timeline belongs to the worker while `in_flight` > 0 and to the host (under mutex_) otherwise;
  // hosts wait for in_flight == 0 before they touch it.
  struct Channel {
    Channel(const StreamSettings& settings, std::shared_ptr<const Voiceprints> enrolled)
        : timeline(settings, std::move(enrolled)) {}
    SpeakerTimeline timeline;
    std::condition_variable wake_host;
    std::deque<Pending> queue;
    std::vector<SpeakerChange> ready;
    int max_queue = 4;
    bool drop_when_late = false;
    Clock::duration max_wait{};
    int waiting_hosts = 0;  // hosts blocked on this channel: the worker must not hold its windows
    int in_flight = 0;      // windows of this channel in the batch being run
    int lane = -1;          // the lane running them (while in_flight > 0)
    Clock::time_point in_flight_since;
    uint64_t generation = 0;  // bumped by reset(): results of older windows are discarded
    uint64_t dropped = 0, processed = 0;  // dropped: inference fell behind a live stream
    uint64_t unanalysed = 0;              // dropped because the engine was unavailable
    // Stream time no analysed window covered (windows run in stream order): `uncovered` samples
    // between analysed windows so far, and the dropped windows' audio past the last analysed one
    // (lost_until). kNowhere before the first window of a stretch (reset() starts one).
    static constexpr int64_t kNowhere = INT64_MIN;
    int64_t covered_until = kNowhere, lost_until = kNowhere, uncovered = 0;
    void analysed(const WindowJob& job);
    void lost(const WindowJob& job);
    int64_t uncovered_samples() const;
    int last_batch = 0, last_shared_batch = 0;
    uint64_t voice_embeddings = 0;  // the timeline's count, copied where the host may read it
    int last_voice_batch = 0;
    double last_delay = 0;  // seconds from submission to results of the last window run
    std::string error;
  };

  void add(const std::shared_ptr<Channel>& channel);
  void remove(const std::shared_ptr<Channel>& channel);
  // One forward call's windows of one channel, in order: the job and its log-probabilities.
  struct ChannelWindows {
    Channel* channel = nullptr;
    std::vector<std::pair<const WindowJob*, const float*>> windows;
  };
  struct VoiceRound {
    std::vector<std::string> failures;  // per ChannelWindows ("": stitched)
    // Per ChannelWindows: the encoder batch (partials, every channel's, at most kVoiceBatch) of
    // the last round that embedded one of its utterances; 0: none.
    std::vector<int> last_round_partials;
    int calls = 0, utterances = 0, max_partials = 0;
  };
  // Partials per voice encoder call: more than the shared batches of a few dozen channels need
  // at once, few enough that the CPU encoder's scratch (1 024 gate values per frame) stays small.
  static constexpr int kVoiceBatch = 64;

  // One engine and the buffers of the batch it runs: the lane's worker's alone.
  struct Lane {
    std::unique_ptr<SegmentationEngine> engine;
    std::vector<const float*> windows;  // each batched window where its job keeps it
    std::vector<WindowOrigin> origins;  // and where that is in its stream's shared audio
    std::vector<float> logprobs;
    std::thread worker;
  };
  // Whether `c` has windows that lane `lane` may take now: queued, not failed, none running in
  // another lane.
  static bool takes(const Channel& c, int lane) {
    return !c.queue.empty() && c.error.empty() && (c.in_flight == 0 || c.lane == lane);
  }

  void loop(int lane);
  void run_batch(std::unique_lock<std::mutex>& lock, int lane);
  // Runs the lane's engine on the batch in its windows, retrying while it is unavailable and the
  // batch may wait (its oldest window younger than outage_wait_, some member not reset
  // meanwhile). Returns "" or why it failed; `unavailable` says whether that was an outage.
  // Called without the lock.
  std::string forward(Lane& lane, int n, size_t samples, Clock::time_point oldest,
                      const std::vector<std::pair<std::shared_ptr<Channel>, uint64_t>>& members,
                      bool* unavailable);
  // Stitches each channel's windows into its timeline, the channels shared between this thread
  // and the helpers. Timelines that wait for a voice embedding wait together: each round embeds
  // what all of them ask for together on this thread (encoder calls of kVoiceBatch partials).
  VoiceRound stitch(const std::vector<ChannelWindows>& work, int frames);
  // The voice encoder's call for `requests`, retried with backoff while it is unavailable, for up
  // to outage_wait_: a voice cannot be skipped without changing who the timeline names, so past
  // that the waiting channels fail. Returns the encoder calls made.
  int embed(const std::vector<const UtteranceRequest*>& requests,
            std::vector<std::vector<float>>& embeddings);

  std::vector<Lane> lanes_;
  const int batch_size_;
  const Clock::duration outage_wait_;
  std::string outage_;  // guarded by mutex_
  std::unique_ptr<VoiceEncoder> voice_;
  HelperTeam helpers_;      // stitch a batch's channels beside its lane's worker
  std::mutex voice_mutex_;  // held while voice_ runs (a lane's embeddings, a host's finish)

  mutable std::mutex mutex_;
  // Always notified to all: a lane waiting out an outage's backoff on it must not swallow the
  // wake-up an idle lane needs.
  std::condition_variable wake_worker_;
  std::vector<std::shared_ptr<Channel>> channels_;
  uint64_t next_seq_ = 0, batches_ = 0;
  int running_ = 0, max_running_ = 0;  // batches between assembly and hand-back
  int last_batch_ = 0, max_batch_ = 0;
  uint64_t voice_calls_ = 0, voice_utterances_ = 0;
  int max_voice_batch_ = 0;
  bool stop_ = false;
};

struct SharedChannelOptions {
  int max_queue = 4;
  bool drop_when_late = false;
  // Seconds a window may wait for other channels' windows to fill a batch (0: run what is there).
  double max_batch_wait = 0;
};

class SharedSegmenterChannel final : public WindowSegmenter {
 public:
  // With settings.identity.enabled (the scheduler then needs a voice encoder), `enrolled` are the
  // people to announce by name (may be null).
  SharedSegmenterChannel(std::shared_ptr<SharedScheduler> scheduler, const StreamSettings& settings,
                         const SharedChannelOptions& options,
                         std::shared_ptr<const Voiceprints> enrolled = nullptr);
  // Waits for at most the batch in flight, never for other channels' queued windows.
  ~SharedSegmenterChannel() override;
  SharedSegmenterChannel(const SharedSegmenterChannel&) = delete;
  SharedSegmenterChannel& operator=(const SharedSegmenterChannel&) = delete;

  void submit(WindowJob job) override;
  // Changes ready so far, in order; never blocks on inference.
  std::vector<SpeakerChange> take_changes() override;
  // Waits until every window submitted on this channel has been run.
  void drain() override;
  // drain(), then finalises every frame up to stream position `end` (end of stream). A failure
  // (the voice encoder's, say) becomes error(), as a failed window's does; nothing is thrown.
  void finish(int64_t end, StretchEnd how = StretchEnd::kEnded) override;
  // Forgets this channel's queued windows, its timeline and unread changes; results of its windows
  // in the batch in flight are discarded when they arrive.
  void reset() override;

  // The first inference error of a batch that held this channel's windows ("" otherwise); the
  // channel takes no more windows after it, the other channels carry on.
  std::string error() const override;
  uint64_t dropped_windows() const override;
  std::string outage() const override;
  uint64_t unanalysed_windows() const override;
  double unanalysed_seconds() const override;
  uint64_t processed_windows() const;
  size_t queue_depth() const override;
  int last_batch_size() const override;
  int last_shared_batch_size() const override;
  uint64_t voice_embeddings() const override;
  int last_voice_batch_size() const override;
  double current_delay_seconds() const override;

  const std::shared_ptr<SharedScheduler>& scheduler() const { return scheduler_; }

 private:
  // Waits, with the worker told to hurry, until no window of this channel is queued or running.
  void wait_idle(std::unique_lock<std::mutex>& lock);

  std::shared_ptr<SharedScheduler> scheduler_;
  std::shared_ptr<SharedScheduler::Channel> channel_;
};

}  // namespace speakerseg
