// GE2E on the GPU. Per pass: upload the partials' mel frames -> one 3-layer unidirectional cuDNN
// LSTM (its final hidden states hy, not its outputs, are what the head reads) -> the head kernel
// (Linear, ReLU, unit length) -> download the embeddings. Batches run padded up to a batch class
// (plan_policy.h); each (class, frames) shape gets a plan with its descriptors, its RNN algorithm,
// its buffers in one device arena and, after a first eager pass, a CUDA graph. The classes of
// 160-frame partials are all planned, run and captured when the encoder is made.
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "engines/cuda/cuda_buffers.h"
#include "engines/cuda/cuda_errors.h"
#include "engines/cuda/cuda_graph.h"
#include "engines/cuda/cuda_kernels.h"
#include "engines/cuda/cuda_module.h"
#include "engines/cuda/cudnn_rnn.h"
#include "engines/cuda/plan_policy.h"
#include "engines/cuda/voice_pass.h"
#include "model/voice_model.h"

namespace speakerseg {
namespace {

using cuda::check;
using cuda::check_alloc;
using cuda::fail;

static_assert(kEmbeddingDim == cuda::kVoiceHeadWidth && kVoiceHidden == cuda::kVoiceHeadWidth,
              "the head kernel is one thread per unit of a 256-wide layer");

struct VoicePlan {
  int batch = 0, frames = 0;
  LstmAlgorithm algorithm = LstmAlgorithm::kStandard;
  const cuda::Rnn* rnn = nullptr;  // in the encoder's cache
  size_t rnn_work = 0;
  cudnnRNNDataDescriptor_t x_desc = nullptr, y_desc = nullptr;
  cudnnTensorDescriptor_t h_desc = nullptr;
  int32_t* seq_lengths = nullptr;  // read by cuDNN on the device at every pass: the plan's own
  cuda::VoiceLayout layout{};
  cudaGraphExec_t graph = nullptr;
  cuda::GraphSlot graph_slot;
};

class CudaVoiceEncoder final : public VoiceEncoder {
 public:
  CudaVoiceEncoder(std::shared_ptr<const VoiceModel> model, const CudaVoiceEncoderOptions& options)
      : model_(std::move(model)), options_(options) {
    if (options_.max_batch < 1)
      fail("max_batch must be at least 1, got " + std::to_string(options_.max_batch));
    if (!options_.warn) options_.warn = cuda::warn_on_stderr;
    cuda::check_device_index(options_.device);
    try {
      init();
    } catch (...) {
      release();
      throw;
    }
  }

  ~CudaVoiceEncoder() override { release(); }

  std::string description() const override {
    return cuda::engine_description(
        device_name_, options_.device, cudnn_version_, lstm_algorithm_name(options_.lstm_algorithm),
        options_.cuda_graphs, options_.tf32 ? "tf32" : "fp32", classes_.size(), startup_seconds_);
  }

  void embed(const float* mel, int batch, int frames, float* embeddings) override {
    if (batch < 1) throw EngineError("batch must be at least 1, got " + std::to_string(batch));
    if (frames < 1) throw EngineError("a partial needs at least one mel frame");
    if (frames > cuda::kCudnnMaxSteps)
      throw EngineError("a partial of " + std::to_string(frames) +
                        " mel frames is longer than cuDNN's RNN takes (" +
                        std::to_string(cuda::kCudnnMaxSteps) + ")");
    cuda::guarded_call(options_.device, &broken_, [&] {
      const size_t in = static_cast<size_t>(frames) * kMelBands;
      for (int first = 0; first < batch; first += options_.max_batch) {
        const int n = std::min(options_.max_batch, batch - first);
        run(mel + first * in, n, frames, embeddings + static_cast<size_t>(first) * kEmbeddingDim);
      }
    });
  }

 private:
  void init() {
    device_name_ = cuda::select_device(options_.device);
    cudnn_version_ = cuda::cudnn_version();
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudnnCreate(&cudnn_), "cudnnCreate");
    check(cudnnSetStream(cudnn_, stream_), "cudnnSetStream");
    check(cudnnCreateDropoutDescriptor(&dropout_), "cudnnCreateDropoutDescriptor");
    check(cudnnSetDropoutDescriptor(dropout_, cudnn_, 0.f, nullptr, 0, 0),
          "cudnnSetDropoutDescriptor");

    const std::vector<float> head = cuda::pack_voice_head(*model_);
    check_alloc(cudaMalloc(&head_, head.size() * sizeof(float)), "voice encoder head",
                head.size() * sizeof(float));
    cuda::upload(stream_, head_, head.data(), head.size() * sizeof(float),
                 "uploading the voice encoder head");

    rnns_ = std::make_unique<cuda::RnnCache>(cudnn_, stream_, dropout_, cudnn::lstm_stack(*model_),
                                             options_.tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH);
    rnns_->get(LstmAlgorithm::kStandard, 0);

    const auto start = std::chrono::steady_clock::now();
    classes_ = cuda::batch_classes(options_.max_batch);
    std::vector<float> out(static_cast<size_t>(options_.max_batch) * kEmbeddingDim);
    for (auto c = classes_.rbegin(); c != classes_.rend(); ++c) {
      plan_for(*c, kPartialFrames);
      for (int pass = 0; pass < (options_.cuda_graphs ? 2 : 1); ++pass)
        run(nullptr, *c, kPartialFrames, out.data());
    }
    startup_seconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  void release() noexcept {
    if (options_.device >= 0) cudaSetDevice(options_.device);
    if (stream_) cudaStreamSynchronize(stream_);
    for (auto& p : plans_) destroy_plan(*p.second);
    plans_.clear();
    rnns_.reset();
    if (dropout_) cudnnDestroyDropoutDescriptor(dropout_);
    if (cudnn_) cudnnDestroy(cudnn_);
    arena_.release();
    if (head_) cudaFree(head_);
    head_ = nullptr;
    staging_in_.release();
    staging_out_.release();
    if (stream_) cudaStreamDestroy(stream_);
    dropout_ = nullptr;
    cudnn_ = nullptr;
    stream_ = nullptr;
    cudaGetLastError();
  }

  static void destroy_plan(VoicePlan& p) noexcept {
    if (p.graph) cudaGraphExecDestroy(p.graph);
    if (p.seq_lengths) cudaFree(p.seq_lengths);
    if (p.x_desc) cudnnDestroyRNNDataDescriptor(p.x_desc);
    if (p.y_desc) cudnnDestroyRNNDataDescriptor(p.y_desc);
    if (p.h_desc) cudnnDestroyTensorDescriptor(p.h_desc);
    p = VoicePlan{};
  }

  // ------------------------------------------------------------------------------------------
  // Plans

  VoicePlan& plan_for(int batch, int frames) {
    auto it = plans_.find({batch, frames});
    if (it != plans_.end()) return *it->second;
    auto plan = std::make_unique<VoicePlan>();
    VoicePlan& p = *plan;
    try {
      p.batch = batch;
      p.frames = frames;
      const std::vector<int> lengths(batch, frames);
      check(cudnnCreateRNNDataDescriptor(&p.x_desc), "cudnnCreateRNNDataDescriptor");
      check(cudnnCreateRNNDataDescriptor(&p.y_desc), "cudnnCreateRNNDataDescriptor");
      check(cudnnSetRNNDataDescriptor(p.x_desc, CUDNN_DATA_FLOAT,
                                      CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED, frames, batch,
                                      kMelBands, lengths.data(), nullptr),
            "cudnnSetRNNDataDescriptor (mel)");
      check(cudnnSetRNNDataDescriptor(p.y_desc, CUDNN_DATA_FLOAT,
                                      CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED, frames, batch,
                                      kVoiceHidden, lengths.data(), nullptr),
            "cudnnSetRNNDataDescriptor (output)");
      check(cudnnCreateTensorDescriptor(&p.h_desc), "cudnnCreateTensorDescriptor");
      const int dims[3] = {kVoiceLayers, batch, kVoiceHidden};
      const int strides[3] = {batch * kVoiceHidden, kVoiceHidden, 1};
      check(cudnnSetTensorNdDescriptor(p.h_desc, CUDNN_DATA_FLOAT, 3, dims, strides),
            "cudnnSetTensorNdDescriptor (LSTM states)");
      check_alloc(
          cudaMalloc(reinterpret_cast<void**>(&p.seq_lengths), lengths.size() * sizeof(int32_t)),
          "sequence lengths", lengths.size() * sizeof(int32_t));
      cuda::upload(stream_, p.seq_lengths, lengths.data(), lengths.size() * sizeof(int32_t),
                   "uploading the sequence lengths");
      Steps steps(*this, p);
      cuda::set_up_rnn(options_.lstm_algorithm,
                       cuda::wanted_voice_lstm_algorithm(options_.lstm_algorithm, batch), batch,
                       steps, options_.warn);
    } catch (...) {
      destroy_plan(p);
      throw;
    }
    return *plans_.emplace(std::make_pair(batch, frames), std::move(plan)).first->second;
  }

  // cuda::set_up_rnn's steps for a voice plan: any failure but memory's is the algorithm's.
  class Steps final : public cuda::RnnSetupSteps {
   public:
    Steps(CudaVoiceEncoder& e, VoicePlan& p) : e_(e), p_(p) {}
    void setup(LstmAlgorithm a) override {
      try {
        p_.algorithm = a;
        p_.rnn = &e_.rnns_->get(a, p_.batch);
        p_.rnn_work = e_.rnns_->workspace_bytes(*p_.rnn, a, p_.x_desc,
                                                std::to_string(p_.batch) + " partials");
      } catch (const cuda::OutOfDeviceMemory&) {
        throw;
      } catch (const cuda::RnnUnavailable&) {
        throw;
      } catch (const EngineError& e) {
        throw cuda::RnnUnavailable(e.what());
      }
    }
    void place() override {
      p_.layout = cuda::place_voice_buffers(p_.batch, p_.frames, p_.rnn_work);
      e_.reserve_arena(p_);
    }
    void probe() override {
      check(cudaMemsetAsync(e_.at(p_.layout.mel), 0,
                            static_cast<size_t>(p_.batch) * p_.frames * kMelBands * sizeof(float),
                            e_.stream_),
            "cudaMemsetAsync");
      cuda::check_probe_status(e_.enqueue_rnn(p_), p_.algorithm,
                               std::to_string(p_.batch) + " partials");
      check(cudaStreamSynchronize(e_.stream_), "the LSTM probe run");
    }

   private:
    CudaVoiceEncoder& e_;
    VoicePlan& p_;
  };

  void reserve_arena(const VoicePlan& p) {
    arena_.reserve(p.layout.total,
                   std::to_string(p.batch) + " partials of " + std::to_string(p.frames) +
                       " mel frames (voice encoder)",
                   options_.fill_arena_nan, stream_, [&] { cuda::drop_graphs(plans_); });
  }

  template <class T = float>
  T* at(size_t offset) const {
    return reinterpret_cast<T*>(arena_.data() + offset);
  }

  cudnnStatus_t enqueue_rnn(VoicePlan& p) {
    return cudnnRNNForward(cudnn_, p.rnn->desc, CUDNN_FWD_MODE_INFERENCE, p.seq_lengths, p.x_desc,
                           at(p.layout.mel), p.y_desc, at(p.layout.lstm_out), p.h_desc, nullptr,
                           at(p.layout.states), p.h_desc, nullptr, nullptr, p.rnn->weight_bytes,
                           p.rnn->weights, p.rnn_work, at<void>(p.layout.rnn_work), 0, nullptr);
  }

  // The pass between upload and download: what a graph holds.
  void enqueue(VoicePlan& p) {
    check(enqueue_rnn(p), "cudnnRNNForward (voice encoder)");
    const float* last =
        at(p.layout.states) + static_cast<size_t>(kVoiceLayers - 1) * p.batch * kVoiceHidden;
    const float* weight_t = static_cast<const float*>(head_);
    check(cuda::voice_head(last, p.batch, weight_t, weight_t + cuda::kVoiceHeadBias,
                           at(p.layout.embeddings), stream_),
          "voice_head kernel");
  }

  // `batch` partials as the plan of their class; the padding partials are zeros and their
  // embeddings are never copied back. `mel` null: all zeros.
  void run(const float* mel, int batch, int frames, float* embeddings) {
    const int padded = cuda::batch_class_for(classes_, batch);
    VoicePlan& p = plan_for(padded, frames);
    reserve_arena(p);  // after a growth that failed for lack of memory, which left no arena
    const size_t partial = static_cast<size_t>(frames) * kMelBands * sizeof(float);
    const size_t in_bytes = mel ? batch * partial : 0;
    const size_t out_bytes = static_cast<size_t>(batch) * kEmbeddingDim * sizeof(float);
    staging_in_.reserve(padded * partial, "the mel upload");
    staging_out_.reserve(static_cast<size_t>(padded) * kEmbeddingDim * sizeof(float),
                         "the embedding download");
    if (mel) {
      std::memcpy(staging_in_.data(), mel, in_bytes);
      check(cudaMemcpyAsync(at(p.layout.mel), staging_in_.data(), in_bytes, cudaMemcpyHostToDevice,
                            stream_),
            "uploading the mel frames");
    }
    if (in_bytes < padded * partial)
      check(cudaMemsetAsync(at<char>(p.layout.mel) + in_bytes, 0, padded * partial - in_bytes,
                            stream_),
            "zeroing the padding partials");
    const cuda::PassMode mode = cuda::run_pass(
        p.graph_slot, padded,
        [&](std::string* why) { return cuda::launch_graph(p.graph, stream_, why); },
        [&] { enqueue(p); },
        [&] {
          cudaGraphExecDestroy(p.graph);
          p.graph = nullptr;
        },
        options_.warn);
    check(cudaMemcpyAsync(staging_out_.data(), at(p.layout.embeddings), out_bytes,
                          cudaMemcpyDeviceToHost, stream_),
          "downloading the embeddings");
    check(cudaStreamSynchronize(stream_), "the voice encoder pass");
    std::memcpy(embeddings, staging_out_.data(), out_bytes);
    if (mode == cuda::PassMode::kEager && options_.cuda_graphs && !p.graph_slot.failed)
      cuda::capture_plan(
          p, stream_, [&] { enqueue(p); }, std::to_string(p.batch) + " partials", options_.warn);
  }

  std::shared_ptr<const VoiceModel> model_;
  CudaVoiceEncoderOptions options_;
  std::string device_name_, cudnn_version_;
  cudaStream_t stream_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cudnnDropoutDescriptor_t dropout_ = nullptr;
  std::unique_ptr<cuda::RnnCache> rnns_;
  void* head_ = nullptr;  // cuda::pack_voice_head's block
  cuda::DeviceArena arena_;
  cuda::PinnedBuffer staging_in_, staging_out_;
  std::vector<int> classes_;
  double startup_seconds_ = 0;
  std::map<std::pair<int, int>, std::unique_ptr<VoicePlan>> plans_;
  std::string broken_;  // why an earlier error left the context unusable
};

}  // namespace

std::unique_ptr<VoiceEncoder> cuda_module::new_voice_encoder(
    std::shared_ptr<const VoiceModel> model, const CudaVoiceEncoderOptions& options) {
  if (!model) throw EngineError("make_cuda_voice_encoder: no voice model");
  return std::make_unique<CudaVoiceEncoder>(std::move(model), options);
}

}  // namespace speakerseg
