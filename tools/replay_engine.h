// Measuring instruments for `speakerseg live --replay`, not engines to run streams on. ReplayEngine
// answers at once with a real engine's log-probabilities of a recording's windows, handed out in
// turn. What `live` then measures is the host side alone (window buffers, the shared scheduler,
// stitching, turns, identity): its own ceiling in channels per core, which no engine speed can
// raise (issue 36 §3). Its answers are the model's, of the same recording, but not of the window
// asked: the channels' windows start anywhere in it.
//
// With a device time (`speakerseg live --replay-device-ms FIXED,PER_WINDOW`) each call also sleeps
// FIXED + PER_WINDOW x batch milliseconds after its copy: a model of an engine whose host thread
// waits for a device without using a core, so that what batches in flight overlap can be seen
// without the device. A model, not a measurement of any GPU.
//
// The windows are gathered into one block before each call (SegmentationEngine's default
// forward_windows), though the replay reads none of them: that is the copy the CUDA engine makes
// into its upload buffer, so the host ceiling measured counts it. With device audio (`speakerseg
// live --replay --device-audio`) the replay does the CUDA engine's host work for streams' audio
// kept on the device instead: the same plan (cuda::DeviceAudioCache), and the new samples packed
// into its upload buffer.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engines/cuda/cuda_engine.h"
#include "engines/cuda/device_audio_cache.h"
#include "engines/segmentation_engine.h"
#include "engines/voice_encoder.h"
#include "model/model_spec.h"

namespace speakerseg {

// Milliseconds a modelled device takes per call: fixed + per_window x batch.
struct ReplayDeviceTime {
  double fixed_ms = 0, per_window_ms = 0;
};

class ReplayEngine final : public SegmentationEngine {
 public:
  // `logprobs`: [windows][frames_for_samples(kWindowSamples)][kClasses], computed by `source`.
  ReplayEngine(std::shared_ptr<const std::vector<float>> logprobs, std::string source,
               ReplayDeviceTime device = {}, bool device_audio = false, int max_batch = 32)
      : logprobs_(std::move(logprobs)), source_(std::move(source)), device_(device) {
    if (logprobs_->empty() || logprobs_->size() % per_window() != 0)
      throw EngineError("replay: no whole windows of log-probabilities to replay");
    // As the CUDA engine sizes it (CudaEngineOptions::device_audio_slots).
    if (device_audio)
      audio_ =
          cuda::DeviceAudioCache::for_windows(CudaEngineOptions{}.device_audio_slots, max_batch);
  }

  std::string description() const override {
    char d[96] = "";
    if (device_.fixed_ms > 0 || device_.per_window_ms > 0)
      std::snprintf(d, sizeof d, ", a modelled device time of %g ms + %g ms a window",
                    device_.fixed_ms, device_.per_window_ms);
    return "replay of " + std::to_string(logprobs_->size() / per_window()) +
           " windows computed by " + source_ + d +
           (audio_ ? ", the host side of streams' audio kept on a device" : "");
  }

  void forward_shared(const float* const* windows, const WindowOrigin* origins, int batch,
                      int samples, float* out) override {
    if (!audio_) return forward_windows(windows, batch, samples, out);
    check_forward_shape(batch, samples);
    const auto& plan = audio_->plan(windows, origins, batch, static_cast<size_t>(samples));
    if (upload_.size() < plan.uploaded) upload_.resize(plan.uploaded);
    cuda::DeviceAudioCache::pack(plan, upload_.data());
    forward(nullptr, batch, samples, out);
  }

  void forward(const float*, int batch, int samples, float* out) override {
    check_forward_shape(batch, samples);
    if (samples != kWindowSamples)
      throw EngineError("replay: windows of " + std::to_string(kWindowSamples) +
                        " samples only, got " + std::to_string(samples));
    const size_t windows = logprobs_->size() / per_window();
    for (int i = 0; i < batch; ++i) {
      const size_t w = next_.fetch_add(1, std::memory_order_relaxed) % windows;
      std::copy_n(logprobs_->data() + w * per_window(), per_window(),
                  out + static_cast<size_t>(i) * per_window());
    }
    const double ms = device_.fixed_ms + device_.per_window_ms * batch;
    if (ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
  }

 private:
  static size_t per_window() {
    return static_cast<size_t>(frames_for_samples(kWindowSamples)) * kClasses;
  }

  std::shared_ptr<const std::vector<float>> logprobs_;
  std::string source_;
  ReplayDeviceTime device_;
  std::atomic<size_t> next_{0};
  std::unique_ptr<cuda::DeviceAudioCache> audio_;
  std::vector<float> upload_;
};

// The voice encoder's counterpart, for `speakerseg live --replay --reidentify`: it answers at once
// with the real encoder's embeddings of the recording's partials, handed out in turn, one per
// partial asked. What is left to measure is identity's host side: the utterances' audio, their
// volume and mel spectrogram, the decisions. As with ReplayEngine, its answers are the model's,
// of the same recording, but not of the partial asked, so the decisions (and with them how many
// utterances are embedded) are those of voices drawn from the recording, not of the channel.
class ReplayVoiceEncoder final : public VoiceEncoder {
 public:
  // `embeddings`: [partials][kEmbeddingDim] unit vectors, computed by `source`.
  ReplayVoiceEncoder(std::shared_ptr<const std::vector<float>> embeddings, std::string source)
      : embeddings_(std::move(embeddings)), source_(std::move(source)) {
    if (embeddings_->empty() || embeddings_->size() % kEmbeddingDim != 0)
      throw EngineError("replay: no whole voice embeddings to replay");
  }

  std::string description() const override {
    return "replay of " + std::to_string(embeddings_->size() / kEmbeddingDim) +
           " partials embedded by " + source_;
  }

  void embed(const float*, int batch, int frames, float* embeddings) override {
    if (batch < 1 || frames < 1)
      throw EngineError("replay: a voice batch needs partials of at least one frame");
    const size_t partials = embeddings_->size() / kEmbeddingDim;
    for (int i = 0; i < batch; ++i) {
      const size_t p = next_.fetch_add(1, std::memory_order_relaxed) % partials;
      std::copy_n(embeddings_->data() + p * kEmbeddingDim, kEmbeddingDim,
                  embeddings + static_cast<size_t>(i) * kEmbeddingDim);
    }
  }

 private:
  std::shared_ptr<const std::vector<float>> embeddings_;
  std::string source_;
  std::atomic<size_t> next_{0};
};

}  // namespace speakerseg
