#include "scheduling/shared_segmenter.h"

#include <omp.h>

#include <algorithm>
#include <functional>
#include <queue>
#include <stdexcept>
#include <utility>

#include "identity/utterance_embedding.h"
#include "model/model_spec.h"

namespace speakerseg {

namespace {

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

std::vector<std::unique_ptr<SegmentationEngine>> one(std::unique_ptr<SegmentationEngine> engine) {
  std::vector<std::unique_ptr<SegmentationEngine>> engines;
  engines.push_back(std::move(engine));
  return engines;
}

}  // namespace

SharedScheduler::SharedScheduler(std::unique_ptr<SegmentationEngine> engine, int batch_size,
                                 std::unique_ptr<VoiceEncoder> voice, double outage_wait,
                                 int stitch_threads)
    : SharedScheduler(one(std::move(engine)), batch_size, std::move(voice), outage_wait,
                      stitch_threads) {}

SharedScheduler::SharedScheduler(std::vector<std::unique_ptr<SegmentationEngine>> engines,
                                 int batch_size, std::unique_ptr<VoiceEncoder> voice,
                                 double outage_wait, int stitch_threads)
    : lanes_(engines.size()),
      batch_size_(std::max(1, batch_size)),
      outage_wait_(std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(std::max(0.0, outage_wait)))),
      voice_(std::move(voice)),
      helpers_(stitch_threads_for(stitch_threads) - 1) {
  if (lanes_.empty()) throw std::invalid_argument("SharedScheduler: no engine");
  for (size_t i = 0; i < lanes_.size(); ++i) {
    if (!engines[i]) throw std::invalid_argument("SharedScheduler: no engine");
    lanes_[i].engine = std::move(engines[i]);
  }
  // Started once every lane has its engine: a worker reads only its own lane.
  for (size_t i = 0; i < lanes_.size(); ++i)
    lanes_[i].worker = std::thread([this, i] { loop(static_cast<int>(i)); });
}

int SharedScheduler::stitch_threads_for(int requested) {
  // The cores the CPU engine's threads=0 takes (OpenMP's count: the affinity mask,
  // OMP_NUM_THREADS).
  return requested > 0 ? requested : std::clamp(omp_get_max_threads(), 1, kMostAutoStitchThreads);
}

std::string SharedScheduler::description() const {
  const std::string engine = lanes_.front().engine->description();
  return lanes_.size() == 1 ? engine
                            : engine + ", " + std::to_string(lanes_.size()) + " batches in flight";
}

SharedScheduler::~SharedScheduler() {
  // Channels hold a shared_ptr to the scheduler, so none is left here and no window is waiting.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_worker_.notify_all();
  for (Lane& lane : lanes_) lane.worker.join();
}

void SharedScheduler::add(const std::shared_ptr<Channel>& channel) {
  std::lock_guard<std::mutex> lock(mutex_);
  channels_.push_back(channel);
}

void SharedScheduler::remove(const std::shared_ptr<Channel>& channel) {
  std::unique_lock<std::mutex> lock(mutex_);
  channel->queue.clear();
  ++channel->generation;
  // The worker may be stitching into this channel's timeline: wait for that batch only.
  channel->wake_host.wait(lock, [&] { return channel->in_flight == 0; });
  channels_.erase(std::find(channels_.begin(), channels_.end(), channel));
}

void SharedScheduler::loop(int lane) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (stop_) return;
    size_t waiting = 0;
    bool hurry = false;
    auto due = Clock::time_point::max();
    for (const auto& c : channels_) {
      if (!takes(*c, lane)) continue;
      waiting += c->queue.size();
      hurry = hurry || c->waiting_hosts > 0;
      // Each channel's queue is in submission order with one max_wait, so its front is due first.
      due = std::min(due, c->queue.front().due);
    }
    const bool full = static_cast<int>(waiting) >= batch_size_;
    if (waiting == 0) {
      wake_worker_.wait(lock);
    } else if (running_ > 0 && !full && !hurry) {
      // Another lane's batch is in flight: a second one starts only with a full batch, since
      // small batches beside it would split the load into more, smaller and dearer passes. A
      // full batch, a waiting host or the end of that batch ends the wait.
      wake_worker_.wait(lock);
    } else if (!full && !hurry && Clock::now() < due) {
      // A new window, a waiting host or the deadline ends the wait; the loop then re-decides.
      wake_worker_.wait_until(lock, due);
    } else {
      run_batch(lock, lane);
    }
  }
}

void SharedScheduler::run_batch(std::unique_lock<std::mutex>& lock, int lane_index) {
  Lane& lane = lanes_[static_cast<size_t>(lane_index)];
  struct Item {
    std::shared_ptr<Channel> channel;
    WindowJob job;
    Clock::time_point submitted;
  };
  std::vector<Item> batch;
  size_t samples = 0;
  // The oldest waiting window of any channel, again and again: the channels by the submission
  // order of their oldest window, in a heap (a scan of every channel per window cost 11 % of the
  // host's time with 4 000 channels). One forward call needs windows of one length, so a channel
  // whose next window has another length leaves the heap: that window waits for the next batch
  // (it keeps its place as the oldest).
  using Next = std::pair<uint64_t, size_t>;  // the channel's oldest window's seq, its index
  std::priority_queue<Next, std::vector<Next>, std::greater<Next>> oldest;
  for (size_t i = 0; i < channels_.size(); ++i)
    if (takes(*channels_[i], lane_index)) oldest.push({channels_[i]->queue.front().seq, i});
  while (static_cast<int>(batch.size()) < batch_size_ && !oldest.empty()) {
    const size_t i = oldest.top().second;
    oldest.pop();
    Channel& c = *channels_[i];
    Pending& p = c.queue.front();
    if (!batch.empty() && p.job.samples.size() != samples) continue;
    samples = p.job.samples.size();
    if (c.in_flight++ == 0) {
      c.in_flight_since = p.submitted;
      c.lane = lane_index;
    }
    batch.push_back({channels_[i], std::move(p.job), p.submitted});
    c.queue.pop_front();
    if (!c.queue.empty()) oldest.push({c.queue.front().seq, i});
  }
  const int n = static_cast<int>(batch.size());
  // The channels in this batch, each once, in order of first appearance, with their generations
  // now: a reset() from here on discards what this batch gives them.
  std::vector<std::pair<std::shared_ptr<Channel>, uint64_t>> members;
  for (const auto& item : batch) {
    if (std::none_of(members.begin(), members.end(),
                     [&](const auto& m) { return m.first == item.channel; }))
      members.emplace_back(item.channel, item.channel->generation);
    item.channel->wake_host.notify_all();  // room in its queue
  }
  max_running_ = std::max(max_running_, ++running_);
  lock.unlock();

  std::string failure;
  bool unavailable = false;
  const int frames = frames_for_samples(static_cast<int64_t>(samples));
  try {
    // The engine reads each window where its job keeps it (no 640 KB copy per window here).
    lane.windows.resize(static_cast<size_t>(n));
    lane.origins.resize(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      const WindowSamples& w = batch[static_cast<size_t>(i)].job.samples;
      lane.windows[static_cast<size_t>(i)] = w.data();
      lane.origins[static_cast<size_t>(i)] = w.origin();
    }
    // Grown, never shrunk (resize() zeroes what it adds back).
    if (lane.logprobs.size() < static_cast<size_t>(n) * frames * kClasses)
      lane.logprobs.resize(static_cast<size_t>(n) * frames * kClasses);
  } catch (const std::exception& e) {
    failure = e.what();  // out of memory: this batch's channels fail, the worker goes on
  }
  if (failure.empty())
    failure = forward(lane, n, samples, batch.front().submitted, members, &unavailable);

  // Stitching needs no lock: each timeline is this lane's while its channel has windows in
  // flight. A channel reset meanwhile only wastes the work; its results are dropped below.
  std::vector<std::vector<SpeakerChange>> changes(members.size());
  std::vector<std::string> stitch_failure(members.size());
  VoiceRound voice;
  if (failure.empty()) {
    std::vector<ChannelWindows> work(members.size());
    for (size_t m = 0; m < members.size(); ++m) {
      work[m].channel = members[m].first.get();
      for (int i = 0; i < n; ++i)
        if (batch[i].channel == members[m].first)
          work[m].windows.push_back(
              {&batch[i].job, &lane.logprobs[static_cast<size_t>(i) * frames * kClasses]});
    }
    voice = stitch(work, frames);
    for (size_t m = 0; m < members.size(); ++m) {
      stitch_failure[m] = std::move(voice.failures[m]);
      if (stitch_failure[m].empty()) changes[m] = members[m].first->timeline.take_changes();
    }
  }

  const auto now = Clock::now();
  lock.lock();
  --running_;
  ++batches_;
  last_batch_ = n;
  max_batch_ = std::max(max_batch_, n);
  voice_calls_ += static_cast<uint64_t>(voice.calls);
  voice_utterances_ += static_cast<uint64_t>(voice.utterances);
  max_voice_batch_ = std::max(max_voice_batch_, voice.max_partials);
  for (size_t m = 0; m < members.size(); ++m) {
    Channel& c = *members[m].first;
    const bool current = members[m].second == c.generation;
    int mine = 0;
    for (const auto& item : batch)
      if (item.channel == members[m].first) {
        ++mine;
        c.last_delay = seconds(now - item.submitted);
        if (current && unavailable)
          c.lost(item.job);
        else if (current)
          c.analysed(item.job);
      }
    // Read before in_flight drops: until then the timeline is the worker's, not a host's.
    c.voice_embeddings = c.timeline.voice_embeddings();
    c.in_flight -= mine;
    c.last_batch = mine;
    c.last_shared_batch = n;
    if (failure.empty() && voice.last_round_partials[m] > 0)
      c.last_voice_batch = voice.last_round_partials[m];
    const std::string& why = failure.empty() ? stitch_failure[m] : failure;
    if (current && unavailable) {
      c.unanalysed += mine;
    } else if (current) {
      c.processed += mine;
      if (!why.empty() && c.error.empty()) {
        c.error = why;
        c.queue.clear();  // the channel takes no more windows: free them now
      }
      for (auto& change : changes[m]) c.ready.push_back(std::move(change));
    }
    c.wake_host.notify_all();
  }
  // The channels of this batch are free for the other lanes again.
  if (lanes_.size() > 1) wake_worker_.notify_all();
}

std::string SharedScheduler::forward(
    Lane& lane, int n, size_t samples, Clock::time_point oldest,
    const std::vector<std::pair<std::shared_ptr<Channel>, uint64_t>>& members, bool* unavailable) {
  auto backoff = kFirstRetry;
  for (;;) {
    try {
      lane.engine->forward_shared(lane.windows.data(), lane.origins.data(), n,
                                  static_cast<int>(samples), lane.logprobs.data());
      std::lock_guard<std::mutex> lock(mutex_);
      outage_.clear();
      return "";
    } catch (const EngineUnavailable& e) {
      std::unique_lock<std::mutex> lock(mutex_);
      outage_ = e.what();
      const bool wanted = std::any_of(members.begin(), members.end(), [](const auto& m) {
        return m.second == m.first->generation;
      });
      if (stop_ || !wanted || Clock::now() - oldest >= outage_wait_) {
        *unavailable = true;
        return e.what();
      }
      wake_worker_.wait_for(lock, backoff, [&] { return stop_; });
      backoff = std::min(backoff * 2, kLastRetry);
    } catch (const std::exception& e) {
      return e.what();
    }
  }
}

int SharedScheduler::embed(const std::vector<const UtteranceRequest*>& requests,
                           std::vector<std::vector<float>>& embeddings) {
  const auto since = Clock::now();
  auto backoff = kFirstRetry;
  for (;;) {
    try {
      std::lock_guard<std::mutex> voice_lock(voice_mutex_);
      return embed_utterances(*voice_, requests, embeddings, kVoiceBatch);
    } catch (const EngineUnavailable&) {
      if (Clock::now() - since >= outage_wait_) throw;
      // mutex_ may not be taken here (finish() takes it before voice_mutex_, and a lane may
      // stitch while a host finishes), so the wait is a plain sleep, bounded by outage_wait_.
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, kLastRetry);
    }
  }
}

SharedScheduler::VoiceRound SharedScheduler::stitch(const std::vector<ChannelWindows>& work,
                                                    int frames) {
  VoiceRound r;
  r.failures.resize(work.size());
  r.last_round_partials.assign(work.size(), 0);
  std::vector<size_t> next(work.size(), 0);
  // The embedding each waiting channel is given when it goes on (one round's).
  std::vector<std::vector<float>> given(work.size());
  std::vector<char> has_given(work.size(), 0);
  std::vector<size_t> going_on(work.size());
  for (size_t m = 0; m < work.size(); ++m) going_on[m] = m;
  for (;;) {
    // Every channel takes the voice it waited for and stitches its windows until it is done or
    // waits for another embedding: each its own timeline, on this thread and the helpers...
    helpers_.run(static_cast<int>(going_on.size()), [&](int i) {
      const size_t m = going_on[static_cast<size_t>(i)];
      SpeakerTimeline& t = work[m].channel->timeline;
      try {
        if (has_given[m]) {
          has_given[m] = 0;
          t.give_voice(std::move(given[m]));
        }
        while (!t.voice_request() && next[m] < work[m].windows.size()) {
          const auto& [job, logprobs] = work[m].windows[next[m]++];
          t.begin_window(job->start, job->end, logprobs, frames, job->samples.data());
        }
      } catch (const std::exception& e) {
        r.failures[m] = e.what();
      }
    });
    std::vector<size_t> waiting;
    std::vector<const UtteranceRequest*> requests;
    int partials = 0;
    for (size_t m : going_on) {
      if (!r.failures[m].empty()) continue;
      if (const UtteranceRequest* q = work[m].channel->timeline.voice_request()) {
        waiting.push_back(m);
        requests.push_back(q);
        partials += q->count;
      }
    }
    if (waiting.empty()) return r;
    // ...then the embeddings they all wait for run together (calls of kVoiceBatch partials).
    std::vector<std::vector<float>> embeddings;
    try {
      if (!voice_) throw std::logic_error("a channel waits for a voice, but there is no encoder");
      r.calls += embed(requests, embeddings);
    } catch (const std::exception& e) {
      for (size_t m : waiting) r.failures[m] = e.what();
      return r;
    }
    r.utterances += static_cast<int>(requests.size());
    r.max_partials = std::max(r.max_partials, std::min(partials, kVoiceBatch));
    for (size_t i = 0; i < waiting.size(); ++i) {
      r.last_round_partials[waiting[i]] = std::min(partials, kVoiceBatch);
      given[waiting[i]] = std::move(embeddings[i]);
      has_given[waiting[i]] = 1;
    }
    going_on = std::move(waiting);
  }
}

uint64_t SharedScheduler::batches_run() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return batches_;
}

int SharedScheduler::last_batch_size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_batch_;
}

int SharedScheduler::max_batch_size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return max_batch_;
}

uint64_t SharedScheduler::voice_calls() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return voice_calls_;
}

uint64_t SharedScheduler::voice_utterances() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return voice_utterances_;
}

int SharedScheduler::max_voice_batch() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return max_voice_batch_;
}

size_t SharedScheduler::channels() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return channels_.size();
}

size_t SharedScheduler::queue_depth() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (const auto& c : channels_) n += c->queue.size();
  return n;
}

SharedSegmenterChannel::SharedSegmenterChannel(std::shared_ptr<SharedScheduler> scheduler,
                                               const StreamSettings& settings,
                                               const SharedChannelOptions& options,
                                               std::shared_ptr<const Voiceprints> enrolled)
    : scheduler_(std::move(scheduler)),
      channel_(std::make_shared<SharedScheduler::Channel>(settings, std::move(enrolled))) {
  if (settings.identity.enabled && !scheduler_->voice_)
    throw std::invalid_argument(
        "identity by voice needs a voice encoder: the engine was made without the voice model");
  channel_->max_queue = std::max(1, options.max_queue);
  channel_->drop_when_late = options.drop_when_late;
  // Capped at a day so that the conversion and `submitted + max_wait` cannot overflow.
  const double wait = std::clamp(options.max_batch_wait, 0.0, 86400.0);
  channel_->max_wait = std::chrono::duration_cast<SharedScheduler::Clock::duration>(
      std::chrono::duration<double>(wait));
  scheduler_->add(channel_);
}

SharedSegmenterChannel::~SharedSegmenterChannel() {
  scheduler_->remove(channel_);
}

void SharedSegmenterChannel::submit(WindowJob job) {
  auto& s = *scheduler_;
  auto& c = *channel_;
  std::unique_lock<std::mutex> lock(s.mutex_);
  if (!c.error.empty()) return;
  // A window the engine would refuse must fail its own channel here, not every channel whose
  // windows would share its batch.
  try {
    check_forward_shape(1, static_cast<int>(job.samples.size()));
  } catch (const std::exception& e) {
    c.error = e.what();
    c.queue.clear();
    c.wake_host.notify_all();
    return;
  }
  if (c.drop_when_late) {
    while (static_cast<int>(c.queue.size()) >= c.max_queue) {
      c.lost(c.queue.front().job);
      c.queue.pop_front();
      // Late because the engine is away, or because inference falls behind.
      ++(s.outage_.empty() ? c.dropped : c.unanalysed);
    }
  } else if (static_cast<int>(c.queue.size()) >= c.max_queue) {
    // Back-pressure: the worker must not hold a full queue back for a fuller batch.
    ++c.waiting_hosts;
    s.wake_worker_.notify_all();
    c.wake_host.wait(
        lock, [&] { return static_cast<int>(c.queue.size()) < c.max_queue || !c.error.empty(); });
    --c.waiting_hosts;
    if (!c.error.empty()) return;
  }
  const auto now = SharedScheduler::Clock::now();
  c.queue.push_back({std::move(job), s.next_seq_++, now, now + c.max_wait});
  s.wake_worker_.notify_all();
}

std::vector<SpeakerChange> SharedSegmenterChannel::take_changes() {
  std::lock_guard<std::mutex> lock(scheduler_->mutex_);
  std::vector<SpeakerChange> out;
  out.swap(channel_->ready);
  return out;
}

void SharedSegmenterChannel::wait_idle(std::unique_lock<std::mutex>& lock) {
  auto& c = *channel_;
  ++c.waiting_hosts;
  scheduler_->wake_worker_.notify_all();
  c.wake_host.wait(lock, [&] { return (c.queue.empty() || !c.error.empty()) && c.in_flight == 0; });
  --c.waiting_hosts;
}

void SharedSegmenterChannel::drain() {
  std::unique_lock<std::mutex> lock(scheduler_->mutex_);
  wait_idle(lock);
}

void SharedSegmenterChannel::finish(int64_t end, StretchEnd how) {
  std::unique_lock<std::mutex> lock(scheduler_->mutex_);
  wait_idle(lock);
  // Nothing of this channel is queued or running, and the worker takes no new window while we
  // hold the lock: the timeline is ours.
  auto& c = *channel_;
  // A failed channel's timeline may have stopped anywhere (even waiting for a voice): it has
  // nothing more to give, and error() says why.
  if (!c.error.empty()) return;
  try {
    std::lock_guard<std::mutex> voice_lock(scheduler_->voice_mutex_);
    c.timeline.finish(end, scheduler_->voice_.get(), how);
  } catch (const std::exception& e) {
    // The host is GStreamer's streaming thread, among others: the failure goes where the other
    // failures go, not up through its callbacks.
    c.error = e.what();
    return;
  }
  c.voice_embeddings = c.timeline.voice_embeddings();
  for (auto& change : c.timeline.take_changes()) c.ready.push_back(std::move(change));
}

void SharedSegmenterChannel::reset() {
  auto& c = *channel_;
  std::unique_lock<std::mutex> lock(scheduler_->mutex_);
  c.queue.clear();
  ++c.generation;
  c.wake_host.wait(lock, [&] { return c.in_flight == 0; });
  c.timeline.reset();
  c.ready.clear();
  // A new stretch: what the last one left uncovered stays counted.
  c.uncovered = c.uncovered_samples();
  c.covered_until = c.lost_until = SharedScheduler::Channel::kNowhere;
  c.wake_host.notify_all();  // a submit blocked on a full queue
}

std::string SharedSegmenterChannel::error() const {
  std::lock_guard<std::mutex> lock(scheduler_->mutex_);
  return channel_->error;
}

uint64_t SharedSegmenterChannel::dropped_windows() const {
  std::lock_guard<std::mutex> lock(scheduler_->mutex_);
  return channel_->dropped;
}

void SharedScheduler::Channel::analysed(const WindowJob& job) {
  if (covered_until == kNowhere) covered_until = std::max<int64_t>(job.start, 0);
  uncovered += std::max<int64_t>(0, job.start - covered_until);
  covered_until = std::max(covered_until, job.end);
}

void SharedScheduler::Channel::lost(const WindowJob& job) {
  if (covered_until == kNowhere) covered_until = std::max<int64_t>(job.start, 0);
  lost_until = std::max(lost_until, job.end);
}

int64_t SharedScheduler::Channel::uncovered_samples() const {
  return uncovered +
         (lost_until == kNowhere ? 0 : std::max<int64_t>(0, lost_until - covered_until));
}

std::string SharedScheduler::outage() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return outage_;
}

int SharedScheduler::max_in_flight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return max_running_;
}

std::string SharedSegmenterChannel::outage() const {
  return scheduler_->outage();
}

uint64_t SharedSegmenterChannel::unanalysed_windows() const {
  std::lock_guard<std::mutex> lock(scheduler_->mutex_);
  return channel_->unanalysed;
}

double SharedSegmenterChannel::unanalysed_seconds() const {
  std::lock_guard<std::mutex> lock(scheduler_->mutex_);
  return static_cast<double>(channel_->uncovered_samples()) / kSampleRate;
}

uint64_t SharedSegmenterChannel::processed_windows() const {
  std::lock_guard<std::mutex> lock(scheduler_->mutex_);
  return channel_->processed;
}

size_t SharedSegmenterChannel::queue_depth() const {
  std::lock_guard<std::mutex> lock(scheduler_->mutex_);
  return channel_->queue.size();
}

int SharedSegmenterChannel::last_batch_size() const {
  std::lock_guard<std::mutex> lock(scheduler_->mutex_);
  return channel_->last_batch;
}

int SharedSegmenterChannel::last_shared_batch_size() const {
  std::lock_guard<std::mutex> lock(scheduler_->mutex_);
  return channel_->last_shared_batch;
}

uint64_t SharedSegmenterChannel::voice_embeddings() const {
  std::lock_guard<std::mutex> lock(scheduler_->mutex_);
  return channel_->voice_embeddings;
}

int SharedSegmenterChannel::last_voice_batch_size() const {
  std::lock_guard<std::mutex> lock(scheduler_->mutex_);
  return channel_->last_voice_batch;
}

double SharedSegmenterChannel::current_delay_seconds() const {
  std::lock_guard<std::mutex> lock(scheduler_->mutex_);
  const auto& c = *channel_;
  double waiting = 0;
  if (c.in_flight > 0)
    waiting = seconds(SharedScheduler::Clock::now() - c.in_flight_since);
  else if (!c.queue.empty())
    waiting = seconds(SharedScheduler::Clock::now() - c.queue.front().submitted);
  return std::max(c.last_delay, waiting);
}

}  // namespace speakerseg
