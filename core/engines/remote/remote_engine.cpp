#include "engines/remote/remote_engine.h"

#include <chrono>
#include <vector>

#include "engines/remote/oip_client.h"
#include "model/model_spec.h"
#include "model/voice_model.h"

namespace speakerseg {

namespace {

using remote::kAnySize;

std::chrono::milliseconds deadline_of(const RemoteEngineOptions& o) {
  if (o.server.empty()) throw EngineError("the remote engine needs a server (HOST:PORT)");
  if (o.deadline_ms < 1)
    throw EngineError("the remote engine's deadline must be at least 1 ms, got " +
                      std::to_string(o.deadline_ms));
  return std::chrono::milliseconds(o.deadline_ms);
}

class RemoteEngine final : public SegmentationEngine {
 public:
  explicit RemoteEngine(const RemoteEngineOptions& o)
      : client_(o.server, deadline_of(o)), model_(o.model) {
    // A server may fix the window length (Triton's dims [1, 160000]) or leave it free.
    window_samples_ = client_.check_model(model_, {"input", {kAnySize, 1, kWindowSamples}},
                                          {"output", {kAnySize, kAnySize, kClasses}})[2];
  }

  std::string description() const override {
    return "remote (model '" + model_ + "' on " + client_.server() + ")";
  }

  void forward(const float* audio, int batch, int samples, float* logprobs) override {
    const StageLengths len = check_forward_shape(batch, samples);
    if (window_samples_ != kAnySize && samples != window_samples_)
      throw EngineError("model '" + model_ + "' on " + client_.server() + " takes windows of " +
                        std::to_string(window_samples_) + " samples only, this one has " +
                        std::to_string(samples) +
                        ": let the server's model take any length (dims [1, -1])");
    client_.infer(model_, "input", {batch, 1, samples}, audio, "output",
                  {batch, len.frames, kClasses}, logprobs);
  }

 private:
  remote::OipClient client_;
  std::string model_;
  int64_t window_samples_ = kAnySize;
};

class RemoteVoiceEncoder final : public VoiceEncoder {
 public:
  explicit RemoteVoiceEncoder(const RemoteEngineOptions& o)
      : client_(o.server, deadline_of(o)), model_(o.voice_model) {
    client_.check_model(model_, {"mel", {kAnySize, kAnySize, kMelBands}},
                        {"embedding", {kAnySize, kEmbeddingDim}});
  }

  std::string description() const override {
    return "remote (model '" + model_ + "' on " + client_.server() + ")";
  }

  void embed(const float* mel, int batch, int frames, float* embeddings) override {
    if (batch < 1 || frames < 1)
      throw EngineError("embed needs at least one partial of one frame, got " +
                        std::to_string(batch) + " x " + std::to_string(frames));
    client_.infer(model_, "mel", {batch, frames, kMelBands}, mel, "embedding",
                  {batch, kEmbeddingDim}, embeddings);
  }

 private:
  remote::OipClient client_;
  std::string model_;
};

}  // namespace

std::unique_ptr<SegmentationEngine> make_remote_engine(const RemoteEngineOptions& options) {
  return std::make_unique<RemoteEngine>(options);
}

std::unique_ptr<VoiceEncoder> make_remote_voice_encoder(const RemoteEngineOptions& options) {
  return std::make_unique<RemoteVoiceEncoder>(options);
}

}  // namespace speakerseg
