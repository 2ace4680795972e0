// The CUDA engine's host side: cuBLAS products, the cuDNN RNN, CUDA graphs, device memory. Plain
// C++ compiled by the host compiler; only cuda_kernels.cu goes through nvcc.
//
// Per forward pass (docs/gpu.md has the whole story):
//   upload -> waveform instance norm -> SincNet as im2col (symmetric pairs) + two SGEMMs, in row
//   chunks -> |.| + max-pool -> instance norm + LeakyReLU -> conv1 as five tap SGEMMs -> pool +
//   norm -> conv2 likewise -> one 4-layer bidirectional cuDNN LSTM -> head SGEMMs -> bias +
//   log-softmax -> download.
// Batches run padded up to a batch class (plan_policy.h). Every (class, samples) shape gets a Plan:
// its cuDNN descriptors, its RNN algorithm, its buffer offsets in one device arena and, after a
// first eager run, its captured CUDA graph; the classes of 10 s windows all get theirs when the
// engine is made.
#include "engines/cuda/cuda_engine.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <array>
#include <chrono>
#include <cstring>
#include <map>
#include <stdexcept>
#include <utility>
#include <vector>

#include "engines/cuda/cuda_buffers.h"
#include "engines/cuda/cuda_errors.h"
#include "engines/cuda/cuda_graph.h"
#include "engines/cuda/cuda_kernels.h"
#include "engines/cuda/cuda_module.h"
#include "engines/cuda/cudnn_lstm_weights.h"
#include "engines/cuda/cudnn_rnn.h"
#include "engines/cuda/device_audio_cache.h"
#include "engines/cuda/forward_pass.h"
#include "engines/cuda/plan_policy.h"

namespace speakerseg {
namespace {

using cuda::check;
using cuda::check_alloc;
using cuda::fail;

// ---------------------------------------------------------------------------------------------

constexpr size_t kCublasWorkspace = 32u << 20;  // what cuBLAS asks for on Hopper

enum Stage {
  kUpload,
  kWaveNorm,
  kSinc,
  kNorm0,
  kConv1,
  kNorm1,
  kConv2,
  kNorm2,
  kLstm,
  kHead,
  kDownload,
  kGraph,
  kStages
};
const char* const kStageNames[kStages] = {"upload", "wave-norm",   "sinc+pool", "norm0",
                                          "conv1",  "pool1+norm1", "conv2",     "pool2+norm2",
                                          "lstm",   "head",        "download",  "graph"};

struct Plan {
  int batch = 0, samples = 0;
  StageLengths len{};
  int sinc_chunk = 0;  // im2col rows per SincNet product
  LstmAlgorithm algorithm = LstmAlgorithm::kStandard;
  const cuda::Rnn* rnn = nullptr;  // in the engine's cache
  size_t rnn_work = 0;
  cudnnRNNDataDescriptor_t x_desc = nullptr, y_desc = nullptr;
  cudnnTensorDescriptor_t h_desc = nullptr;
  // The sequence lengths cuDNN reads on the device, at every pass and every graph replay: in an
  // allocation of the plan's own, since the arena's contents belong to whichever shape ran last.
  int32_t* seq_lengths = nullptr;
  cuda::BufferLayout layout{};
  cudaGraphExec_t graph = nullptr;
  cuda::GraphSlot graph_slot;
};

class CudaEngine final : public SegmentationEngine {
 public:
  CudaEngine(std::shared_ptr<const SegmentationModel> model, const CudaEngineOptions& options)
      : model_(std::move(model)), options_(options) {
    if (options_.max_batch < 1)
      fail("max_batch must be at least 1, got " + std::to_string(options_.max_batch));
    if (options_.tf32 && options_.fp16) fail("tf32 and fp16 exclude each other: choose one");
    if (options_.stage_check) options_.cuda_graphs = false;
    if (!options_.warn) options_.warn = cuda::warn_on_stderr;
    cuda::check_device_index(options_.device);
    try {
      init();
    } catch (...) {
      release();
      throw;
    }
  }

  ~CudaEngine() override { release(); }

  std::string description() const override {
    return cuda::engine_description(device_name_, options_.device, cudnn_version_,
                                    lstm_algorithm_name(options_.lstm_algorithm),
                                    options_.cuda_graphs, math_name(), classes_.size(),
                                    startup_seconds_) +
           (options_.lstm_seq_major ? ", LSTM sequence-major" : "") +
           (audio_cache_ ? ", streams' audio kept on the device" : "");
  }

  const char* math_name() const {
    return options_.tf32 ? "tf32" : options_.fp16 ? "fp16 past SincNet" : "fp32";
  }

  std::vector<std::pair<std::string, double>> stage_seconds() const override {
    std::vector<std::pair<std::string, double>> out;
    for (int s = 0; s < kStages; ++s) out.emplace_back(kStageNames[s], seconds_[s]);
    return out;
  }

  void forward(const float* audio, int batch, int samples, float* logprobs) override {
    forward_windows(windows_of(audio, batch, samples), batch, samples, logprobs);
  }

  // Each window goes from where its stream keeps it into the pinned upload buffer: one copy.
  void forward_windows(const float* const* windows, int batch, int samples,
                       float* logprobs) override {
    check_batch(batch, samples);
    cuda::guarded_call(options_.device, &broken_,
                       [&] { run(windows, nullptr, batch, samples, logprobs); });
  }

  // With device_audio: what the device holds of each window's block is not uploaded again.
  void forward_shared(const float* const* windows, const WindowOrigin* origins, int batch,
                      int samples, float* logprobs) override {
    check_batch(batch, samples);
    cuda::guarded_call(options_.device, &broken_, [&] {
      run(windows, audio_cache_ ? origins : nullptr, batch, samples, logprobs);
    });
  }

 private:
  void check_batch(int batch, int samples) const {
    check_forward_shape(batch, samples);
    cuda::check_cudnn_window(samples);
    if (batch > options_.max_batch)
      throw EngineError("batch " + std::to_string(batch) + " is larger than the CUDA engine was " +
                        "planned for (max_batch " + std::to_string(options_.max_batch) + ")");
  }

  // ------------------------------------------------------------------------------------------
  // Setup

  void init() {
    device_name_ = cuda::select_device(options_.device);
    cudnn_version_ = cuda::cudnn_version();

    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    for (auto& e : events_) check(cudaEventCreate(&e), "cudaEventCreate");
    check(cublasCreate(&cublas_), "cublasCreate");
    check(cublasSetStream(cublas_, stream_), "cublasSetStream");
    check_alloc(cudaMalloc(&cublas_workspace_, kCublasWorkspace), "cuBLAS workspace",
                kCublasWorkspace);
    // A workspace of our own: cuBLAS must not allocate while a graph is being captured.
    check(cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspace), "cublasSetWorkspace");
    // With tf32 SincNet's products still run in FP32 (StreamOps::gemm_fp32); fp16 asks for it per
    // product (StreamOps::gemm), so the handle stays FP32.
    check(cublasSetMathMode(cublas_,
                            options_.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
          "cublasSetMathMode");
    check(cudnnCreate(&cudnn_), "cudnnCreate");
    check(cudnnSetStream(cudnn_, stream_), "cudnnSetStream");
    check(cudnnCreateDropoutDescriptor(&dropout_), "cudnnCreateDropoutDescriptor");
    // Dropout 0 needs no random states.
    check(cudnnSetDropoutDescriptor(dropout_, cudnn_, 0.f, nullptr, 0, 0),
          "cudnnSetDropoutDescriptor");

    upload_parameters();
    rnns_ = std::make_unique<cuda::RnnCache>(cudnn_, stream_, dropout_, cudnn::lstm_stack(*model_),
                                             options_.tf32   ? CUDNN_TENSOR_OP_MATH
                                             : options_.fp16 ? CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
                                                             : CUDNN_FMA_MATH);
    // Standard's weight space, which the other algorithms share where their layout is the same.
    rnns_->get(LstmAlgorithm::kStandard, 0);

    // Every batch class of full windows is planned, run once and captured now, largest first (so
    // that the arena is taken once, at its final size): a GPU too small, an algorithm that cannot
    // run, a persist-dynamic NVRTC compile (seconds) and every capture happen when the engine is
    // made, and the streaming path, which sends any batch size, only replays.
    const auto start = std::chrono::steady_clock::now();
    classes_ = cuda::batch_classes(options_.max_batch);
    std::vector<float> out(static_cast<size_t>(options_.max_batch) *
                           frames_for_samples(kWindowSamples) * kClasses);
    for (auto c = classes_.rbegin(); c != classes_.rend(); ++c) {
      plan_for(*c, kWindowSamples);
      // The eager pass captures; the second replays, so that a graph that cannot launch is
      // retired here rather than at a stream's first window.
      for (int pass = 0; pass < (options_.cuda_graphs ? 2 : 1); ++pass)
        run(nullptr, nullptr, *c, kWindowSamples, out.data());
    }
    init_device_audio();
    startup_seconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (double& t : seconds_) t = 0;
  }

  void release() noexcept {
    if (options_.device >= 0) cudaSetDevice(options_.device);
    if (stream_) cudaStreamSynchronize(stream_);
    for (auto& p : plans_) destroy_plan(*p.second);
    plans_.clear();
    rnns_.reset();
    // The handles before the workspace cuBLAS was given.
    if (dropout_) cudnnDestroyDropoutDescriptor(dropout_);
    if (cudnn_) cudnnDestroy(cudnn_);
    if (cublas_) cublasDestroy(cublas_);
    arena_.release();
    for (void* p : {params_, cublas_workspace_})
      if (p) cudaFree(p);
    params_ = cublas_workspace_ = nullptr;
    staging_in_.release();
    staging_out_.release();
    spans_host_.release();
    for (float* chunk : audio_chunks_) cudaFree(chunk);
    audio_chunks_.clear();
    if (spans_dev_) cudaFree(spans_dev_);
    spans_dev_ = nullptr;
    for (auto& e : events_)
      if (e) cudaEventDestroy(e);
    if (stream_) cudaStreamDestroy(stream_);
    dropout_ = nullptr;
    cudnn_ = nullptr;
    cublas_ = nullptr;
    stream_ = nullptr;
    events_ = {};
    cudaGetLastError();
  }

  static void destroy_plan(Plan& p) noexcept {
    if (p.graph) cudaGraphExecDestroy(p.graph);
    if (p.seq_lengths) cudaFree(p.seq_lengths);
    if (p.x_desc) cudnnDestroyRNNDataDescriptor(p.x_desc);
    if (p.y_desc) cudnnDestroyRNNDataDescriptor(p.y_desc);
    if (p.h_desc) cudnnDestroyTensorDescriptor(p.h_desc);
    p = Plan{};
  }

  void upload(void* device, const void* host, size_t bytes, const char* what) {
    cuda::upload(stream_, device, host, bytes, what);
  }

  void upload_parameters() {
    const std::vector<float> host = cuda::pack_parameters(*model_, &param_layout_);
    check_alloc(cudaMalloc(&params_, host.size() * sizeof(float)), "model parameters",
                host.size() * sizeof(float));
    upload(params_, host.data(), host.size() * sizeof(float), "uploading the model parameters");
  }

  // ------------------------------------------------------------------------------------------
  // Plans

  Plan& plan_for(int batch, int samples) {
    auto it = plans_.find({batch, samples});
    if (it != plans_.end()) return *it->second;
    auto plan = std::make_unique<Plan>();
    Plan& p = *plan;
    try {
      p.batch = batch;
      p.samples = samples;
      p.len = stage_lengths(samples);
      p.sinc_chunk = cuda::sinc_chunk_rows(batch, samples);
      make_data_descriptors(p);
      const std::vector<int32_t> lengths(batch, p.len.frames);
      check_alloc(
          cudaMalloc(reinterpret_cast<void**>(&p.seq_lengths), lengths.size() * sizeof(int32_t)),
          "sequence lengths", lengths.size() * sizeof(int32_t));
      upload(p.seq_lengths, lengths.data(), lengths.size() * sizeof(int32_t),
             "uploading the sequence lengths");

      const LstmAlgorithm wanted = cuda::wanted_lstm_algorithm(options_.lstm_algorithm, batch);
      PlanRnnSteps steps(*this, p);
      cuda::set_up_rnn(options_.lstm_algorithm, wanted, batch, steps, options_.warn);
    } catch (...) {
      destroy_plan(p);
      throw;
    }
    return *plans_.emplace(std::make_pair(batch, samples), std::move(plan)).first->second;
  }

  void make_data_descriptors(Plan& p) {
    const int T = p.len.frames, B = p.batch;
    const std::vector<int> lengths(B, T);
    check(cudnnCreateRNNDataDescriptor(&p.x_desc), "cudnnCreateRNNDataDescriptor");
    check(cudnnCreateRNNDataDescriptor(&p.y_desc), "cudnnCreateRNNDataDescriptor");
    // Every sequence is whole, so packed and unpacked sequence-major are the same memory.
    const cudnnRNNDataLayout_t layout = options_.lstm_seq_major
                                            ? CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED
                                            : CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED;
    check(cudnnSetRNNDataDescriptor(p.x_desc, CUDNN_DATA_FLOAT, layout, T, B, kConvChannels,
                                    lengths.data(), nullptr),
          "cudnnSetRNNDataDescriptor (input)");
    check(cudnnSetRNNDataDescriptor(p.y_desc, CUDNN_DATA_FLOAT, layout, T, B, kLstmOutput,
                                    lengths.data(), nullptr),
          "cudnnSetRNNDataDescriptor (output)");
    check(cudnnCreateTensorDescriptor(&p.h_desc), "cudnnCreateTensorDescriptor");
    const int dims[3] = {2 * kLstmLayers, B, kLstmHidden};
    const int strides[3] = {B * kLstmHidden, kLstmHidden, 1};
    check(cudnnSetTensorNdDescriptor(p.h_desc, CUDNN_DATA_FLOAT, 3, dims, strides),
          "cudnnSetTensorNdDescriptor (LSTM states)");
  }

  // Any failure but memory's is the algorithm's: a descriptor cuDNN refuses, a weight layout it
  // gives this algorithm and not another.
  void setup_rnn(Plan& p, LstmAlgorithm a) {
    try {
      p.algorithm = a;
      p.rnn = &rnns_->get(a, p.batch);
      p.rnn_work = rnns_->workspace_bytes(*p.rnn, a, p.x_desc, "batch " + std::to_string(p.batch));
    } catch (const cuda::OutOfDeviceMemory&) {
      throw;
    } catch (const cuda::RnnUnavailable&) {
      throw;
    } catch (const EngineError& e) {
      throw cuda::RnnUnavailable(e.what());
    }
  }

  // The engine's side of cuda::set_up_rnn.
  class PlanRnnSteps final : public cuda::RnnSetupSteps {
   public:
    PlanRnnSteps(CudaEngine& e, Plan& p) : e_(e), p_(p) {}
    void setup(LstmAlgorithm a) override { e_.setup_rnn(p_, a); }
    void place() override { e_.place(p_); }
    void probe() override { e_.probe_rnn(p_); }

   private:
    CudaEngine& e_;
    Plan& p_;
  };

  // Lays out the shape's buffers and makes sure the arena holds them.
  void place(Plan& p) {
    p.layout = cuda::place_buffers(p.batch, p.samples, p.sinc_chunk, p.rnn_work);
    reserve_arena(p.layout.total, p);
  }

  void reserve_arena(size_t bytes, const Plan& p) {
    // Captured graphs hold the old arena's addresses: captured again on their shape's next call.
    arena_.reserve(
        bytes,
        "batch " + std::to_string(p.batch) + " of " + std::to_string(p.samples) + "-sample windows",
        options_.fill_arena_nan, stream_, [&] { cuda::drop_graphs(plans_); });
  }

  template <class T = float>
  T* at(size_t offset) const {
    return reinterpret_cast<T*>(arena_.data() + offset);
  }

  cudnnStatus_t enqueue_rnn(Plan& p, const float* x, float* y) {
    return cudnnRNNForward(cudnn_, p.rnn->desc, CUDNN_FWD_MODE_INFERENCE, p.seq_lengths, p.x_desc,
                           x, p.y_desc, y, p.h_desc, nullptr, nullptr, p.h_desc, nullptr, nullptr,
                           p.rnn->weight_bytes, p.rnn->weights, p.rnn_work,
                           at<void>(p.layout.rnn_work), 0, nullptr);
  }

  // The LSTM stage: features [batch][frames][60] -> lstm_out [batch][frames][256]. Sequence-major,
  // around the RNN: features into the scratch region (free between conv2's pool and the head, and
  // as large as the head's two hidden layers: batch x frames x 256 floats), the RNN into
  // lstm_out, that back into the scratch region batch-major, and copied to lstm_out.
  void enqueue_lstm(Plan& p) {
    const int B = p.batch, T = p.len.frames;
    if (!options_.lstm_seq_major) {
      check(enqueue_rnn(p, at(p.layout.features), at(p.layout.lstm_out)), "cudnnRNNForward");
      return;
    }
    float* scratch = at(p.layout.scratch);
    check(cuda::swap_outer(at(p.layout.features), B, T, kConvChannels, scratch, stream_),
          "the LSTM input to sequence-major");
    check(enqueue_rnn(p, scratch, at(p.layout.lstm_out)), "cudnnRNNForward");
    check(cuda::swap_outer(at(p.layout.lstm_out), T, B, kLstmOutput, scratch, stream_),
          "the LSTM output to batch-major");
    check(cudaMemcpyAsync(at(p.layout.lstm_out), scratch,
                          static_cast<size_t>(B) * T * kLstmOutput * sizeof(float),
                          cudaMemcpyDeviceToDevice, stream_),
          "copying the LSTM output");
  }

  // Runs the RNN once on zeros: a persistent algorithm that this GPU or configuration cannot run
  // fails here, where `auto` can still fall back, rather than in a forward pass.
  void probe_rnn(Plan& p) {
    check(cudaMemsetAsync(
              at(p.layout.features), 0,
              static_cast<size_t>(p.batch) * p.len.frames * kConvChannels * sizeof(float), stream_),
          "cudaMemsetAsync");
    // Zeros are zeros in either layout.
    cuda::check_probe_status(enqueue_rnn(p, at(p.layout.features), at(p.layout.lstm_out)),
                             p.algorithm, "batch " + std::to_string(p.batch));
    // A fault here is no algorithm's to fall back from: the context is gone.
    check(cudaStreamSynchronize(stream_), "the LSTM probe run");
  }

  // ------------------------------------------------------------------------------------------
  // The forward pass

  // Runs `batch` windows as the plan of their batch class: the windows past `batch` are zeros,
  // and only the first `batch` windows' answers come back. `windows` null: all zeros.
  void run(const float* const* windows, const WindowOrigin* origins, int batch, int samples,
           float* logprobs) {
    const int padded = cuda::batch_class_for(classes_, batch);
    Plan& p = plan_for(padded, samples);
    // Normally a no-op; after an arena growth that failed for lack of memory (which leaves no
    // arena), this takes one again before anything uses it.
    reserve_arena(p.layout.total, p);
    const size_t window_out = static_cast<size_t>(p.len.frames) * kClasses;
    const size_t in_bytes = static_cast<size_t>(batch) * samples * sizeof(float);
    const size_t out_bytes = batch * window_out * sizeof(float);
    staging_in_.reserve(static_cast<size_t>(padded) * samples * sizeof(float), "the audio upload");
    staging_out_.reserve(padded * window_out * sizeof(float), "the log-probability download");
    const size_t given = windows ? in_bytes : 0;
    stage_windows_ = windows ? batch : 0;
    const bool kept = windows && origins &&
                      static_cast<size_t>(samples) <= cuda::DeviceAudioCache::kWindowSlotSamples;
    if (windows && !kept)
      for (int b = 0; b < batch; ++b)
        std::memcpy(static_cast<char*>(staging_in_.data()) +
                        static_cast<size_t>(b) * samples * sizeof(float),
                    windows[b], static_cast<size_t>(samples) * sizeof(float));

    check(cudaEventRecord(events_[0], stream_), "cudaEventRecord");
    if (kept)
      upload_kept(windows, origins, batch, samples, at(p.layout.wave));
    else if (windows)
      check(cudaMemcpyAsync(at(p.layout.wave), staging_in_.data(), in_bytes, cudaMemcpyHostToDevice,
                            stream_),
            "uploading the audio");
    // The wave buffer holds the last pass's normalised audio (NaN in a fresh test arena).
    if (given < static_cast<size_t>(padded) * samples * sizeof(float))
      check(cudaMemsetAsync(at<char>(p.layout.wave) + given, 0,
                            static_cast<size_t>(padded) * samples * sizeof(float) - given, stream_),
            "zeroing the padding windows");
    check(cudaEventRecord(events_[1], stream_), "cudaEventRecord");
    const cuda::PassMode mode = cuda::run_pass(
        p.graph_slot, padded,
        [&](std::string* why) { return cuda::launch_graph(p.graph, stream_, why); },
        [&] { enqueue(p, true); },
        [&] {
          cudaGraphExecDestroy(p.graph);
          p.graph = nullptr;
        },
        options_.warn);
    check(cudaEventRecord(events_[kStages - 1], stream_), "cudaEventRecord");
    check(cudaMemcpyAsync(staging_out_.data(), at(p.layout.logprobs), out_bytes,
                          cudaMemcpyDeviceToHost, stream_),
          "downloading the log-probabilities");
    check(cudaEventRecord(events_[kStages], stream_), "cudaEventRecord");
    check(cudaStreamSynchronize(stream_), "the forward pass");
    std::memcpy(logprobs, staging_out_.data(), out_bytes);

    add_time(kUpload, 0, 1);
    if (mode == cuda::PassMode::kReplay)
      add_time(kGraph, 1, kStages - 1);
    else
      for (int s = kWaveNorm; s <= kHead; ++s) add_time(static_cast<Stage>(s), s, s + 1);
    add_time(kDownload, kStages - 1, kStages);

    // The whole pass, upload and download excepted, as one graph, after a first eager pass (which
    // has loaded every kernel module: lazy loading cannot happen inside a capture).
    if (mode == cuda::PassMode::kEager && options_.cuda_graphs && !p.graph_slot.failed)
      cuda::capture_plan(
          p, stream_, [&] { enqueue(p, false); }, "batch " + std::to_string(p.batch),
          options_.warn);
  }

  // ------------------------------------------------------------------------------------------
  // Streams' audio kept on the device

  static constexpr size_t kAudioSlotSamples = cuda::DeviceAudioCache::kWindowSlotSamples;
  static constexpr size_t kSlotsPerChunk = 16;  // 20 MB of device memory at a time

  void init_device_audio() {
    if (!options_.device_audio) return;
    audio_cache_ =
        cuda::DeviceAudioCache::for_windows(options_.device_audio_slots, options_.max_batch);
    // A window's uploads (at most two), its carry and its copy out.
    const size_t spans = 4 * static_cast<size_t>(options_.max_batch);
    check_alloc(cudaMalloc(reinterpret_cast<void**>(&spans_dev_), spans * sizeof(cuda::CopySpan)),
                "device audio table", spans * sizeof(cuda::CopySpan));
    spans_host_.reserve(spans * sizeof(cuda::CopySpan), "the device audio table");
  }

  float* audio_slot(size_t slot) const {
    return audio_chunks_[slot / kSlotsPerChunk] + (slot % kSlotsPerChunk) * kAudioSlotSamples;
  }

  // The batch's new audio, packed, up through `inbox` (the wave buffer, free until the windows
  // are copied into it) into the slots; the samples a new block carries of the previous one
  // from slot to slot; then each window out of its slot into the wave buffer.
  void upload_kept(const float* const* windows, const WindowOrigin* origins, int batch, int samples,
                   float* inbox) {
    try {
      const auto& plan = audio_cache_->plan(windows, origins, batch, static_cast<size_t>(samples));
      while (audio_chunks_.size() * kSlotsPerChunk < audio_cache_->slots_used()) {
        float* chunk = nullptr;
        const size_t bytes = kSlotsPerChunk * kAudioSlotSamples * sizeof(float);
        check_alloc(cudaMalloc(reinterpret_cast<void**>(&chunk), bytes),
                    "streams' audio kept on the device", bytes);
        audio_chunks_.push_back(chunk);
      }
      auto* staging = static_cast<float*>(staging_in_.data());
      cuda::DeviceAudioCache::pack(plan, staging);
      auto* spans = static_cast<cuda::CopySpan*>(spans_host_.data());
      size_t packed = 0, n = 0;
      int64_t longest_upload = 0, longest_carry = 0;
      for (const auto& u : plan.uploads) {
        spans[n++] = {inbox + packed, audio_slot(u.slot) + u.at, static_cast<int64_t>(u.count)};
        longest_upload = std::max(longest_upload, static_cast<int64_t>(u.count));
        packed += u.count;
      }
      const int uploads = static_cast<int>(n);
      for (const auto& c : plan.carries) {
        spans[n++] = {audio_slot(c.from) + c.from_at, audio_slot(c.to) + c.at,
                      static_cast<int64_t>(c.count)};
        longest_carry = std::max(longest_carry, static_cast<int64_t>(c.count));
      }
      const int carries = static_cast<int>(n) - uploads;
      for (int b = 0; b < batch; ++b) {
        const auto [slot, at] = plan.windows[static_cast<size_t>(b)];
        spans[n++] = {audio_slot(slot) + at, inbox + static_cast<size_t>(b) * samples, samples};
      }
      check(cudaMemcpyAsync(spans_dev_, spans, n * sizeof(cuda::CopySpan), cudaMemcpyHostToDevice,
                            stream_),
            "uploading the device audio table");
      if (packed > 0)
        check(cudaMemcpyAsync(inbox, staging, packed * sizeof(float), cudaMemcpyHostToDevice,
                              stream_),
              "uploading the new audio");
      check(cuda::copy_spans(spans_dev_, uploads, longest_upload, stream_),
            "placing the new audio");
      check(cuda::copy_spans(spans_dev_ + uploads, carries, longest_carry, stream_),
            "carrying audio into new blocks");
      check(cuda::copy_spans(spans_dev_ + uploads + carries, batch, samples, stream_),
            "copying the windows out of the device audio");
    } catch (...) {
      // What the plan recorded may not have reached the device: forget it all.
      audio_cache_ =
          cuda::DeviceAudioCache::for_windows(options_.device_audio_slots, options_.max_batch);
      throw;
    }
  }

  void add_time(Stage s, int from, int to) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, events_[from], events_[to]) == cudaSuccess)
      seconds_[s] += ms * 1e-3;
    cudaGetLastError();
  }

  // The forward pass's operations, enqueued on the engine's stream.
  class StreamOps final : public cuda::ForwardOps {
   public:
    StreamOps(CudaEngine& e, Plan& p, bool timed) : e_(e), p_(p), timed_(timed) {}

    // fp16: FP32 data, both operands rounded to FP16 on the way into the tensor cores, FP32
    // sums (what the CPU engine's fp16-emulated-fp32-sinc measured); otherwise the handle's math.
    void gemm(bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b,
              int ldb, float beta, float* c, int ldc, const char* what) override {
      if (e_.options_.fp16)
        return gemm_ex(CUBLAS_COMPUTE_32F_FAST_16F, "FP16", ta, tb, m, n, k, a, lda, b, ldb, beta,
                       c, ldc, what);
      sgemm(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc, what);
    }
    void gemm_fp32(bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b,
                   int ldb, float beta, float* c, int ldc, const char* what) override {
      // Without TF32 the handle's math is FP32 already (fp16 asks per product, in gemm()).
      if (!e_.options_.tf32) return sgemm(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc, what);
      gemm_ex(CUBLAS_COMPUTE_32F_PEDANTIC, "FP32", ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc,
              what);
    }
    void gemm_strided_batched(bool ta, bool tb, int m, int n, int k, const float* a, int lda,
                              int64_t stride_a, const float* b, int ldb, int64_t stride_b,
                              float beta, float* c, int ldc, int64_t stride_c, int count,
                              const char* what) override {
      const float one = 1.f;
      if (e_.options_.fp16) {  // as gemm()
        const cublasStatus_t s = cublasGemmStridedBatchedEx(
            e_.cublas_, op(ta), op(tb), m, n, k, &one, a, CUDA_R_32F, lda, stride_a, b, CUDA_R_32F,
            ldb, stride_b, &beta, c, CUDA_R_32F, ldc, stride_c, count, CUBLAS_COMPUTE_32F_FAST_16F,
            CUBLAS_GEMM_DEFAULT);
        if (s != CUBLAS_STATUS_SUCCESS)
          check(s, ("GemmStridedBatchedEx, FP16 (" + std::string(what) + ")").c_str());
        return;
      }
      const cublasStatus_t s =
          cublasSgemmStridedBatched(e_.cublas_, op(ta), op(tb), m, n, k, &one, a, lda, stride_a, b,
                                    ldb, stride_b, &beta, c, ldc, stride_c, count);
      if (s != CUBLAS_STATUS_SUCCESS)
        check(s, ("SgemmStridedBatched (" + std::string(what) + ")").c_str());
    }
    // One product with the handle's math, and one with `compute` on FP32 data (`label` names it
    // in errors).
    void sgemm(bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b,
               int ldb, float beta, float* c, int ldc, const char* what) {
      const float one = 1.f;
      const cublasStatus_t s =
          cublasSgemm(e_.cublas_, op(ta), op(tb), m, n, k, &one, a, lda, b, ldb, &beta, c, ldc);
      if (s != CUBLAS_STATUS_SUCCESS) check(s, ("Sgemm (" + std::string(what) + ")").c_str());
    }
    void gemm_ex(cublasComputeType_t compute, const char* label, bool ta, bool tb, int m, int n,
                 int k, const float* a, int lda, const float* b, int ldb, float beta, float* c,
                 int ldc, const char* what) {
      const float one = 1.f;
      const cublasStatus_t s =
          cublasGemmEx(e_.cublas_, op(ta), op(tb), m, n, k, &one, a, CUDA_R_32F, lda, b, CUDA_R_32F,
                       ldb, &beta, c, CUDA_R_32F, ldc, compute, CUBLAS_GEMM_DEFAULT);
      if (s != CUBLAS_STATUS_SUCCESS)
        check(s, ("GemmEx, " + std::string(label) + " (" + what + ")").c_str());
    }
    void wave_norm(float* x, int batch, int samples, float scale, float bias, float eps) override {
      check(cuda::wave_norm(x, batch, samples, scale, bias, eps, e_.stream_), "wave_norm kernel");
    }
    void sinc_im2col(const float* wave, int samples, int rows_per_window, int64_t first_row,
                     int rows, float* out) override {
      check(cuda::sinc_im2col(wave, samples, rows_per_window, first_row, rows, out, e_.stream_),
            "sinc_im2col kernel");
    }
    void abs_max_pool3(const float* in, int out_rows, int channels, float* out) override {
      check(cuda::abs_max_pool3(in, out_rows, channels, out, e_.stream_), "abs_max_pool3 kernel");
    }
    void pool_norm_leaky(const float* in, int pool, int batch, int rows, int channels,
                         const float* scale, const float* bias, float eps, float slope,
                         float* out) override {
      check(cuda::pool_norm_leaky(in, pool, batch, rows, channels, scale, bias, eps, slope, out,
                                  e_.stream_),
            "pool_norm_leaky kernel");
    }
    void bias_leaky(float* x, int rows, int n, const float* bias, float slope) override {
      check(cuda::bias_leaky(x, rows, n, bias, slope, e_.stream_), "bias_leaky kernel");
    }
    void bias_log_softmax(float* x, int rows, int n, const float* bias) override {
      check(cuda::bias_log_softmax(x, rows, n, bias, e_.stream_), "bias_log_softmax kernel");
    }
    // The plan's RNN reads layout.features and writes layout.lstm_out, the buffers the pass
    // hands over here.
    void lstm(const float*, float*) override { e_.enqueue_lstm(p_); }
    void stage_done(int stage) override {
      if (!timed_) return;
      check(cudaEventRecord(e_.events_[stage + 1], e_.stream_), "cudaEventRecord");
      if (e_.options_.stage_check && e_.stage_windows_ > 0) {
        const cuda::StageOutput o = cuda::stage_output(stage, p_.layout, p_.samples);
        std::vector<float> values(e_.stage_windows_ * o.per_window);
        check(cudaMemcpyAsync(values.data(), e_.at(o.offset), values.size() * sizeof(float),
                              cudaMemcpyDeviceToHost, e_.stream_),
              "downloading a stage's output");
        check(cudaStreamSynchronize(e_.stream_), o.name);
        e_.options_.stage_check(stage, o.name, values);
      }
    }

   private:
    static cublasOperation_t op(bool transpose) { return transpose ? CUBLAS_OP_T : CUBLAS_OP_N; }
    CudaEngine& e_;
    Plan& p_;
    bool timed_;
  };

  void enqueue(Plan& p, bool timed) {
    cuda::ForwardPass pass;
    pass.model = model_.get();
    pass.params = static_cast<const float*>(params_);
    pass.param_layout = param_layout_;
    pass.arena = arena_.data();
    pass.layout = p.layout;
    pass.batch = p.batch;
    pass.samples = p.samples;
    pass.sinc_chunk = p.sinc_chunk;
    StreamOps ops(*this, p, timed);
    cuda::run_forward_pass(pass, ops);
  }

  std::shared_ptr<const SegmentationModel> model_;
  CudaEngineOptions options_;
  std::string device_name_, cudnn_version_;

  cudaStream_t stream_ = nullptr;
  std::array<cudaEvent_t, kStages + 1> events_{};
  cublasHandle_t cublas_ = nullptr;
  void* cublas_workspace_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cudnnDropoutDescriptor_t dropout_ = nullptr;
  std::unique_ptr<cuda::RnnCache> rnns_;  // the LSTM's descriptors and weight spaces

  void* params_ = nullptr;
  cuda::ParamLayout param_layout_{};

  cuda::DeviceArena arena_;
  // Sized for the largest batch class of full windows when the engine is made; grown only by
  // longer windows.
  cuda::PinnedBuffer staging_in_, staging_out_;
  std::vector<int> classes_;  // the batch sizes that have plans; every batch runs as one
  size_t stage_windows_ = 0;  // the caller's windows in this pass, for stage_check
  double startup_seconds_ = 0;
  std::map<std::pair<int, int>, std::unique_ptr<Plan>> plans_;

  // With device_audio: the bookkeeping, the slots' memory, the copy tables.
  std::unique_ptr<cuda::DeviceAudioCache> audio_cache_;
  std::vector<float*> audio_chunks_;
  cuda::CopySpan* spans_dev_ = nullptr;
  cuda::PinnedBuffer spans_host_;

  std::string broken_;  // why an earlier error left the context unusable
  double seconds_[kStages] = {};
};

}  // namespace

std::unique_ptr<SegmentationEngine> cuda_module::new_segmentation_engine(
    std::shared_ptr<const SegmentationModel> model, const CudaEngineOptions& options) {
  if (!model) throw EngineError("make_cuda_engine: no model");
  return std::make_unique<CudaEngine>(std::move(model), options);
}

}  // namespace speakerseg
