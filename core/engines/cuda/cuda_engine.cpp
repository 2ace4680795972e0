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
#include <dlfcn.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>
#include <utility>
#include <vector>

#include "engines/cuda/cuda_kernels.h"
#include "engines/cuda/cuda_module.h"
#include "engines/cuda/cudnn_lstm_weights.h"
#include "engines/cuda/forward_pass.h"
#include "engines/cuda/plan_policy.h"

namespace speakerseg {
namespace {

int device_count(std::string* why);

// NVRTC as cuDNN finds it (it dlopens the library when it builds persist-dynamic): its version and
// file name, or "" where the dynamic loader finds none. RTLD_NODELETE: NVRTC carries its own
// libstdc++, whose start-up allocation would otherwise leak at dlclose.
std::string nvrtc_found() {
  for (const char* name : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) {
    void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!lib) continue;
    using VersionFn = int (*)(int*, int*);
    auto fn = reinterpret_cast<VersionFn>(dlsym(lib, "nvrtcVersion"));
    int a = 0, b = 0;
    const bool ok = fn && fn(&a, &b) == 0;
    dlclose(lib);
    if (ok) return std::to_string(a) + "." + std::to_string(b) + " (" + name + ")";
  }
  return "";
}

// ---------------------------------------------------------------------------------------------
// Errors: every CUDA, cuBLAS and cuDNN status becomes an EngineError that names the call.

std::string cuda_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

// Every failure also clears the runtime's last error: a non-sticky one (an allocation, an invalid
// argument) left pending would otherwise come back from the next kernel launch's
// cudaGetLastError() and fail a call that did nothing wrong. Sticky errors stay whatever is done.
[[noreturn]] void fail(const std::string& what) {
  cudaGetLastError();
  throw EngineError("CUDA engine: " + what);
}

// Out of memory says how much was asked for, how much is free and what to lower.
[[noreturn]] void out_of_memory(const std::string& what, size_t asked) {
  cudaGetLastError();
  size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  int device = 0;
  cudaDeviceProp prop{};
  std::string name = "the GPU";
  if (cudaGetDevice(&device) == cudaSuccess &&
      cudaGetDeviceProperties(&prop, device) == cudaSuccess)
    name = prop.name;
  cudaGetLastError();
  throw cuda::OutOfDeviceMemory(
      "CUDA engine: " + cuda::out_of_memory_message(what, asked, free_bytes, total_bytes, name));
}

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  if (e == cudaErrorMemoryAllocation) out_of_memory(what, 0);
  fail(std::string(what) + " failed: " + cuda_text(e));
}

// A cudaMalloc of `bytes`.
void check_alloc(cudaError_t e, const char* what, size_t bytes) {
  if (e == cudaErrorMemoryAllocation) out_of_memory(what, bytes);
  check(e, what);
}

void check(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  if (s == CUBLAS_STATUS_ALLOC_FAILED) out_of_memory(std::string("cuBLAS ") + what, 0);
  fail(std::string("cuBLAS ") + what + " failed: " + cublasGetStatusName(s) + " (" +
       cublasGetStatusString(s) + ")");
}

std::string cudnn_text(cudnnStatus_t s) {
  std::string text = cudnnGetErrorString(s);
  char detail[512] = {0};
  cudnnGetLastErrorString(detail, sizeof detail);
  if (detail[0]) text += std::string(": ") + detail;
  return text;
}

void check(cudnnStatus_t s, const char* what) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  if (cuda::cudnn_status_is_out_of_memory(s))
    out_of_memory(std::string("cuDNN ") + what + " (" + cudnnGetErrorString(s) + ")", 0);
  fail(std::string("cuDNN ") + what + " failed: " + cudnn_text(s));
}

// plan_policy.h keeps these as numbers so that its host test needs no CUDA header.
static_assert(cuda::kCudaErrorMemoryAllocation == cudaErrorMemoryAllocation);
static_assert(cuda::kCublasStatusAllocFailed == CUBLAS_STATUS_ALLOC_FAILED);
static_assert(cuda::kCudnnStatusHostAllocationFailed ==
              CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED);
static_assert(cuda::kCudnnStatusDeviceAllocationFailed ==
              CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED);

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

std::string mib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / 1048576.0);
  return buf;
}

// ---------------------------------------------------------------------------------------------

constexpr size_t kCublasWorkspace = 32u << 20;  // what cuBLAS asks for on Hopper
constexpr int kMinComputeCapability = 75;       // the oldest architecture meson.build compiles for

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

cudnnRNNAlgo_t cudnn_algo(LstmAlgorithm a) {
  switch (a) {
    case LstmAlgorithm::kPersistStaticSmallH:
      return CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H;
    case LstmAlgorithm::kPersistDynamic:
      return CUDNN_RNN_ALGO_PERSIST_DYNAMIC;
    default:
      return CUDNN_RNN_ALGO_STANDARD;
  }
}

// One cuDNN RNN descriptor and the weight space it reads. Standard and persist-static-small-h
// serve every batch size with one each; persist-dynamic is built (compiled) once per batch size.
struct Rnn {
  cudnnRNNDescriptor_t desc = nullptr;
  const void* weights = nullptr;
  size_t weight_bytes = 0;
};

struct Plan {
  int batch = 0, samples = 0;
  StageLengths len{};
  int sinc_chunk = 0;  // im2col rows per SincNet product
  LstmAlgorithm algorithm = LstmAlgorithm::kStandard;
  const Rnn* rnn = nullptr;  // in the engine's cache
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
    if (options_.stage_check) options_.cuda_graphs = false;
    if (!options_.warn)
      options_.warn = [](const std::string& m) {
        std::fprintf(stderr, "speakerseg: warning: %s\n", m.c_str());
      };
    std::string why;
    const int count = device_count(&why);
    if (count == 0) throw EngineError("no CUDA device found: " + why);
    if (options_.device < 0 || options_.device >= count)
      fail("CUDA device " + std::to_string(options_.device) + " does not exist (" +
           std::to_string(count) + " device" + (count > 1 ? "s" : "") + " found)");
    try {
      init();
    } catch (...) {
      release();
      throw;
    }
  }

  ~CudaEngine() override { release(); }

  std::string description() const override {
    return std::string("cuda (") + device_name_ + ", device " + std::to_string(options_.device) +
           ", cuDNN " + cudnn_version_ + ", lstm " + lstm_algorithm_name(options_.lstm_algorithm) +
           (options_.cuda_graphs ? ", graphs" : ", no graphs") +
           (options_.tf32 ? ", tf32" : ", fp32") + ", " + std::to_string(classes_.size()) +
           " batch classes ready in " + seconds_text(startup_seconds_) + ")";
  }

  std::vector<std::pair<std::string, double>> stage_seconds() const override {
    std::vector<std::pair<std::string, double>> out;
    for (int s = 0; s < kStages; ++s) out.emplace_back(kStageNames[s], seconds_[s]);
    return out;
  }

  void forward(const float* audio, int batch, int samples, float* logprobs) override {
    check_forward_shape(batch, samples);
    cuda::check_cudnn_window(samples);
    if (batch > options_.max_batch)
      throw EngineError("batch " + std::to_string(batch) + " is larger than the CUDA engine was " +
                        "planned for (max_batch " + std::to_string(options_.max_batch) + ")");
    if (broken_) fail("an earlier CUDA error left the device unusable: " + broken_reason_);
    // The calling thread may not be the one that built the engine (the inference worker). The
    // device stays current there afterwards: giving a thread back "its" device would make one
    // that never chose any create a context on GPU 0.
    check(cudaSetDevice(options_.device), "cudaSetDevice");
    try {
      run(audio, batch, samples, logprobs);
    } catch (const EngineError& e) {
      // A failed launch or a fault poisons the context; later calls say so instead of guessing.
      const cudaError_t sticky = cudaDeviceSynchronize();
      if (sticky != cudaSuccess && sticky != cudaErrorMemoryAllocation) {
        broken_ = true;
        broken_reason_ = e.what();
      }
      cudaGetLastError();
      throw;
    }
  }

 private:
  // ------------------------------------------------------------------------------------------
  // Setup

  void init() {
    check(cudaSetDevice(options_.device), "cudaSetDevice");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, options_.device), "cudaGetDeviceProperties");
    device_name_ = prop.name;
    const int cc = prop.major * 10 + prop.minor;
    if (cc < kMinComputeCapability)
      fail(std::string(prop.name) + " has compute capability " + std::to_string(prop.major) + "." +
           std::to_string(prop.minor) + "; this build needs 7.5 or newer");
    const size_t v = cudnnGetVersion();
    cudnn_version_ = std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
                     std::to_string(v % 100);
    if (v / 10000 < 9) fail("cuDNN " + cudnn_version_ + " was loaded; the engine needs cuDNN 9");

    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    for (auto& e : events_) check(cudaEventCreate(&e), "cudaEventCreate");
    check(cublasCreate(&cublas_), "cublasCreate");
    check(cublasSetStream(cublas_, stream_), "cublasSetStream");
    check_alloc(cudaMalloc(&cublas_workspace_, kCublasWorkspace), "cuBLAS workspace",
                kCublasWorkspace);
    // A workspace of our own: cuBLAS must not allocate while a graph is being captured.
    check(cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspace), "cublasSetWorkspace");
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
    // Standard's weight space, which the other algorithms share where their layout is the same.
    rnn_for(LstmAlgorithm::kStandard, 0);

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
        run(nullptr, *c, kWindowSamples, out.data());
    }
    startup_seconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (double& t : seconds_) t = 0;
  }

  void release() noexcept {
    if (options_.device >= 0) cudaSetDevice(options_.device);
    if (stream_) cudaStreamSynchronize(stream_);
    for (auto& p : plans_) destroy_plan(*p.second);
    plans_.clear();
    for (auto& r : rnns_)
      if (r.second.desc) cudnnDestroyRNNDescriptor(r.second.desc);
    rnns_.clear();
    rnn_failures_.clear();
    for (void* p : weight_spaces_) cudaFree(p);
    weight_spaces_.clear();
    weight_slots_.clear();
    // The handles before the workspace cuBLAS was given.
    if (dropout_) cudnnDestroyDropoutDescriptor(dropout_);
    if (cudnn_) cudnnDestroy(cudnn_);
    if (cublas_) cublasDestroy(cublas_);
    for (void* p : {arena_, params_, cublas_workspace_})
      if (p) cudaFree(p);
    arena_ = params_ = cublas_workspace_ = nullptr;
    arena_bytes_ = 0;
    for (void* p : {staging_in_, staging_out_})
      if (p) cudaFreeHost(p);
    staging_in_ = staging_out_ = nullptr;
    staging_in_bytes_ = staging_out_bytes_ = 0;
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

  // A synchronous copy on the engine's own stream. (A plain cudaMemcpy from pageable memory may
  // return before the data has arrived, and it runs on the legacy stream, which the engine's
  // non-blocking stream is not ordered with.)
  void upload(void* device, const void* host, size_t bytes, const char* what) {
    check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_), what);
    check(cudaStreamSynchronize(stream_), what);
  }

  void upload_parameters() {
    const std::vector<float> host = cuda::pack_parameters(*model_, &param_layout_);
    check_alloc(cudaMalloc(&params_, host.size() * sizeof(float)), "model parameters",
                host.size() * sizeof(float));
    upload(params_, host.data(), host.size() * sizeof(float), "uploading the model parameters");
  }

  cudnnRNNDescriptor_t new_rnn_descriptor(LstmAlgorithm a) {
    cudnnRNNDescriptor_t d = nullptr;
    check(cudnnCreateRNNDescriptor(&d), "cudnnCreateRNNDescriptor");
    const cudnnStatus_t s = cudnnSetRNNDescriptor_v8(
        d, cudnn_algo(a), CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS, CUDNN_BIDIRECTIONAL,
        CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT,
        options_.tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH, kConvChannels, kLstmHidden,
        kLstmHidden, kLstmLayers, dropout_, CUDNN_RNN_PADDED_IO_ENABLED);
    if (s != CUDNN_STATUS_SUCCESS) {
      cudnnDestroyRNNDescriptor(d);
      check(s, "cudnnSetRNNDescriptor_v8");
    }
    return d;
  }

  // The descriptor (and weight space) for an algorithm and batch size, made on first use.
  // persist-dynamic compiles its kernel for the batch size with NVRTC (seconds): once per size,
  // and a size whose build failed is not tried again.
  const Rnn& rnn_for(LstmAlgorithm a, int batch) {
    const std::pair<LstmAlgorithm, int> key{a, a == LstmAlgorithm::kPersistDynamic ? batch : 0};
    auto it = rnns_.find(key);
    if (it != rnns_.end()) return it->second;
    auto failed = rnn_failures_.find(key);
    if (failed != rnn_failures_.end()) throw cuda::RnnUnavailable("CUDA engine: " + failed->second);
    Rnn r;
    r.desc = new_rnn_descriptor(a);
    try {
      if (a == LstmAlgorithm::kPersistDynamic) {
        // Looked for first: what cuDNN says when it cannot load NVRTC does not name it.
        if (nvrtc_found().empty()) {
          const std::string why =
              "lstm-algorithm persist-dynamic needs NVRTC, which cuDNN loads at run time to "
              "compile it, and the dynamic loader finds no libnvrtc.so.13 (put the CUDA 13 "
              "toolkit's or the nvidia-cuda-nvrtc wheel's lib folder on LD_LIBRARY_PATH); "
              "lstm-algorithm standard needs no NVRTC";
          rnn_failures_[key] = why;
          throw cuda::RnnUnavailable("CUDA engine: " + why);
        }
        const cudnnStatus_t s = cudnnBuildRNNDynamic(cudnn_, r.desc, batch);
        // Memory that ran out is no reason to give up on the algorithm for good.
        if (cuda::cudnn_status_is_out_of_memory(s)) check(s, "cudnnBuildRNNDynamic");
        if (s != CUDNN_STATUS_SUCCESS) {
          const std::string why =
              "lstm-algorithm persist-dynamic: cudnnBuildRNNDynamic for batch " +
              std::to_string(batch) + " failed: " + cudnn_text(s) +
              " (cuDNN compiles this kernel at run time with NVRTC: libnvrtc must be on the "
              "library path; lstm-algorithm standard needs no NVRTC)";
          rnn_failures_[key] = why;
          cudaGetLastError();
          throw cuda::RnnUnavailable("CUDA engine: " + why);
        }
      }
      check(cudnnGetRNNWeightSpaceSize(cudnn_, r.desc, &r.weight_bytes),
            "cudnnGetRNNWeightSpaceSize");
      if (shared_weights_.weights && r.weight_bytes == shared_weights_.weight_bytes &&
          weight_layout(r.desc, shared_weights_.weights, r.weight_bytes) == weight_slots_) {
        r.weights = shared_weights_.weights;
      } else {
        // The first (standard) descriptor's space, or one of another layout: cuDNN does not
        // promise one layout for every algorithm, and a second copy costs one upload.
        void* space = nullptr;
        check_alloc(cudaMalloc(&space, r.weight_bytes), "cuDNN RNN weight space", r.weight_bytes);
        std::vector<cudnn::WeightSlot> slots;
        try {
          slots = weight_layout(r.desc, space, r.weight_bytes);
          pack_weights(slots, space, r.weight_bytes);
        } catch (...) {
          cudaFree(space);
          throw;
        }
        weight_spaces_.push_back(space);
        r.weights = space;
        if (!shared_weights_.weights) {
          weight_slots_ = slots;
          shared_weights_ = r;
        }
      }
    } catch (...) {
      cudnnDestroyRNNDescriptor(r.desc);
      throw;
    }
    return rnns_.emplace(key, r).first->second;
  }

  // Where cuDNN expects every matrix and bias, in cudnn::slot_index order: offsets from the
  // start of `space`, a weight space of at least `bytes` bytes.
  std::vector<cudnn::WeightSlot> weight_layout(cudnnRNNDescriptor_t rnn, const void* space,
                                               size_t bytes) {
    cudnnTensorDescriptor_t m_desc = nullptr, b_desc = nullptr;
    check(cudnnCreateTensorDescriptor(&m_desc), "cudnnCreateTensorDescriptor");
    check(cudnnCreateTensorDescriptor(&b_desc), "cudnnCreateTensorDescriptor");
    std::vector<cudnn::WeightSlot> slots(cudnn::kWeightSlots);
    auto offset = [&](const void* addr) {
      return static_cast<size_t>(static_cast<const char*>(addr) - static_cast<const char*>(space));
    };
    try {
      for (int layer = 0; layer < kLstmLayers; ++layer)
        for (int dir = 0; dir < 2; ++dir)
          for (int lin = 0; lin < cudnn::kLinLayers; ++lin) {
            void* m_addr = nullptr;
            void* b_addr = nullptr;
            check(cudnnGetRNNWeightParams(cudnn_, rnn, 2 * layer + dir, bytes, space, lin, m_desc,
                                          &m_addr, b_desc, &b_addr),
                  "cudnnGetRNNWeightParams");
            const int in = lin < 4 ? model_->lstm[layer].input_size : kLstmHidden;
            if (!m_addr || !b_addr || elements(m_desc) != static_cast<size_t>(kLstmHidden) * in ||
                elements(b_desc) != static_cast<size_t>(kLstmHidden))
              fail("cuDNN's RNN weight layout is not the expected one (layer " +
                   std::to_string(layer) + ", direction " + std::to_string(dir) + ", matrix " +
                   std::to_string(lin) + ")");
            slots[cudnn::slot_index(layer, dir, lin)] = {offset(m_addr), offset(b_addr)};
          }
    } catch (...) {
      cudnnDestroyTensorDescriptor(m_desc);
      cudnnDestroyTensorDescriptor(b_desc);
      throw;
    }
    cudnnDestroyTensorDescriptor(m_desc);
    cudnnDestroyTensorDescriptor(b_desc);
    return slots;
  }

  static size_t elements(cudnnTensorDescriptor_t d) {
    cudnnDataType_t type;
    int dims[8] = {0}, strides[8] = {0}, n = 0;
    if (cudnnGetTensorNdDescriptor(d, 8, &type, &n, dims, strides) != CUDNN_STATUS_SUCCESS)
      return 0;
    size_t total = 1;
    for (int i = 0; i < n; ++i) total *= static_cast<size_t>(dims[i]);
    return total;
  }

  void pack_weights(const std::vector<cudnn::WeightSlot>& slots, void* space, size_t bytes) {
    std::vector<char> host;
    try {
      host = cudnn::pack_lstm_weights(*model_, slots, bytes);
    } catch (const std::invalid_argument& e) {
      fail(std::string("cuDNN's RNN weight layout is not the expected one: ") + e.what());
    }
    upload(space, host.data(), bytes, "uploading the LSTM weights");
  }

  // ------------------------------------------------------------------------------------------
  // Plans

  LstmAlgorithm auto_choice(int batch) const {
    if (batch == 1) return LstmAlgorithm::kPersistDynamic;
    if (batch <= 64) return LstmAlgorithm::kPersistStaticSmallH;
    return LstmAlgorithm::kStandard;
  }

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

      const LstmAlgorithm wanted = options_.lstm_algorithm == LstmAlgorithm::kAuto
                                       ? auto_choice(batch)
                                       : options_.lstm_algorithm;
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
    check(cudnnSetRNNDataDescriptor(p.x_desc, CUDNN_DATA_FLOAT,
                                    CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED, T, B, kConvChannels,
                                    lengths.data(), nullptr),
          "cudnnSetRNNDataDescriptor (input)");
    check(cudnnSetRNNDataDescriptor(p.y_desc, CUDNN_DATA_FLOAT,
                                    CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED, T, B, kLstmOutput,
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
      p.rnn = &rnn_for(a, p.batch);
      size_t reserve = 0;
      const cudnnStatus_t s = cudnnGetRNNTempSpaceSizes(
          cudnn_, p.rnn->desc, CUDNN_FWD_MODE_INFERENCE, p.x_desc, &p.rnn_work, &reserve);
      if (cuda::cudnn_status_is_out_of_memory(s)) check(s, "cudnnGetRNNTempSpaceSizes");
      if (s != CUDNN_STATUS_SUCCESS)
        fail(std::string("lstm-algorithm ") + lstm_algorithm_name(a) + " for batch " +
             std::to_string(p.batch) + ": cudnnGetRNNTempSpaceSizes failed: " + cudnn_text(s));
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
    if (bytes <= arena_bytes_) return;
    // Captured graphs hold the old arena's addresses: captured again on their shape's next call.
    for (auto& q : plans_) {
      if (q.second->graph) cudaGraphExecDestroy(q.second->graph);
      q.second->graph = nullptr;
      q.second->graph_slot.captured = false;
    }
    if (arena_) cudaFree(arena_);
    arena_ = nullptr;
    arena_bytes_ = 0;
    const cudaError_t e = cudaMalloc(&arena_, bytes);
    if (e != cudaSuccess) {
      arena_ = nullptr;
      const std::string what = "batch " + std::to_string(p.batch) + " of " +
                               std::to_string(p.samples) + "-sample windows";
      if (e == cudaErrorMemoryAllocation) out_of_memory(what, bytes);
      check(e, ("the device arena for " + what).c_str());
    }
    arena_bytes_ = bytes;
    // A stage that reads what no stage wrote then gives NaN, not yesterday's plausible numbers.
    if (options_.fill_arena_nan) {
      check(cudaMemsetAsync(arena_, 0xff, bytes, stream_), "filling the arena with NaN");
      check(cudaStreamSynchronize(stream_), "filling the arena with NaN");
    }
  }

  template <class T = float>
  T* at(size_t offset) const {
    return reinterpret_cast<T*>(static_cast<char*>(arena_) + offset);
  }

  cudnnStatus_t enqueue_rnn(Plan& p) {
    return cudnnRNNForward(cudnn_, p.rnn->desc, CUDNN_FWD_MODE_INFERENCE, p.seq_lengths, p.x_desc,
                           at(p.layout.features), p.y_desc, at(p.layout.lstm_out), p.h_desc,
                           nullptr, nullptr, p.h_desc, nullptr, nullptr, p.rnn->weight_bytes,
                           p.rnn->weights, p.rnn_work, at<void>(p.layout.rnn_work), 0, nullptr);
  }

  // Runs the RNN once on zeros: a persistent algorithm that this GPU or configuration cannot run
  // fails here, where `auto` can still fall back, rather than in a forward pass.
  void probe_rnn(Plan& p) {
    check(cudaMemsetAsync(
              at(p.layout.features), 0,
              static_cast<size_t>(p.batch) * p.len.frames * kConvChannels * sizeof(float), stream_),
          "cudaMemsetAsync");
    const cudnnStatus_t s = enqueue_rnn(p);
    if (cuda::cudnn_status_is_out_of_memory(s)) check(s, "cudnnRNNForward (probe)");
    if (s != CUDNN_STATUS_SUCCESS) {
      cudaGetLastError();
      throw cuda::RnnUnavailable(
          std::string("CUDA engine: lstm-algorithm ") + lstm_algorithm_name(p.algorithm) +
          " for batch " + std::to_string(p.batch) + ": cudnnRNNForward failed: " + cudnn_text(s));
    }
    // A fault here is no algorithm's to fall back from: the context is gone.
    check(cudaStreamSynchronize(stream_), "the LSTM probe run");
  }

  // ------------------------------------------------------------------------------------------
  // The forward pass

  // Runs `batch` windows as the plan of their batch class: the windows past `batch` are zeros,
  // and only the first `batch` windows' answers come back. `audio` null: all zeros.
  void run(const float* audio, int batch, int samples, float* logprobs) {
    const int padded = cuda::batch_class_for(classes_, batch);
    Plan& p = plan_for(padded, samples);
    // Normally a no-op; after an arena growth that failed for lack of memory (which leaves no
    // arena), this takes one again before anything uses it.
    reserve_arena(p.layout.total, p);
    const size_t window_out = static_cast<size_t>(p.len.frames) * kClasses;
    const size_t in_bytes = static_cast<size_t>(batch) * samples * sizeof(float);
    const size_t out_bytes = batch * window_out * sizeof(float);
    reserve_staging(static_cast<size_t>(padded) * samples * sizeof(float),
                    padded * window_out * sizeof(float));
    const size_t given = audio ? in_bytes : 0;
    stage_windows_ = audio ? batch : 0;
    if (audio) std::memcpy(staging_in_, audio, in_bytes);

    check(cudaEventRecord(events_[0], stream_), "cudaEventRecord");
    if (audio)
      check(cudaMemcpyAsync(at(p.layout.wave), staging_in_, in_bytes, cudaMemcpyHostToDevice,
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
        [&](std::string* why) {
          const cudaError_t e = cudaGraphLaunch(p.graph, stream_);
          if (e == cudaSuccess) return true;
          cudaGetLastError();
          *why = "cudaGraphLaunch: " + cuda_text(e);
          return false;
        },
        [&] { enqueue(p, true); },
        [&] {
          cudaGraphExecDestroy(p.graph);
          p.graph = nullptr;
        },
        options_.warn);
    check(cudaEventRecord(events_[kStages - 1], stream_), "cudaEventRecord");
    check(cudaMemcpyAsync(staging_out_, at(p.layout.logprobs), out_bytes, cudaMemcpyDeviceToHost,
                          stream_),
          "downloading the log-probabilities");
    check(cudaEventRecord(events_[kStages], stream_), "cudaEventRecord");
    check(cudaStreamSynchronize(stream_), "the forward pass");
    std::memcpy(logprobs, staging_out_, out_bytes);

    add_time(kUpload, 0, 1);
    if (mode == cuda::PassMode::kReplay)
      add_time(kGraph, 1, kStages - 1);
    else
      for (int s = kWaveNorm; s <= kHead; ++s) add_time(static_cast<Stage>(s), s, s + 1);
    add_time(kDownload, kStages - 1, kStages);

    if (mode == cuda::PassMode::kEager && options_.cuda_graphs && !p.graph_slot.failed) capture(p);
  }

  // Pinned host buffers for the transfers: a pageable copy goes through the driver's own small
  // staging buffer in pieces, and cannot overlap anything. Sized for the largest batch class of
  // full windows when the engine is made; grown only by longer windows.
  void reserve_staging(size_t in_bytes, size_t out_bytes) {
    auto grow = [](void** buffer, size_t* have, size_t want, const char* what) {
      if (want <= *have) return;
      if (*buffer) cudaFreeHost(*buffer);
      *buffer = nullptr;
      *have = 0;
      const cudaError_t e = cudaMallocHost(buffer, want);
      if (e != cudaSuccess) {
        *buffer = nullptr;
        cudaGetLastError();
        fail(std::string("cannot allocate ") + mib(want) + " of pinned host memory for " + what +
             ": " + cuda_text(e) + "; lower the batch size");
      }
      *have = want;
    };
    grow(&staging_in_, &staging_in_bytes_, in_bytes, "the audio upload");
    grow(&staging_out_, &staging_out_bytes_, out_bytes, "the log-probability download");
  }

  void add_time(Stage s, int from, int to) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, events_[from], events_[to]) == cudaSuccess)
      seconds_[s] += ms * 1e-3;
    cudaGetLastError();
  }

  // Records the whole forward pass, upload and download excepted, as one graph. Runs after a first
  // eager pass, which has loaded every kernel module (lazy loading cannot happen inside a capture).
  void capture(Plan& p) {
    cudaGraph_t graph = nullptr;
    std::string problem;
    const cudaError_t begin = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
    if (begin != cudaSuccess) {
      problem = "cudaStreamBeginCapture: " + cuda_text(begin);
    } else {
      try {
        enqueue(p, false);
      } catch (const std::exception& e) {
        problem = e.what();
      }
      const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
      if (problem.empty() && end != cudaSuccess)
        problem = "cudaStreamEndCapture: " + cuda_text(end);
    }
    if (problem.empty()) {
      const cudaError_t e = cudaGraphInstantiate(&p.graph, graph, 0);
      if (e != cudaSuccess) {
        p.graph = nullptr;
        problem = "cudaGraphInstantiate: " + cuda_text(e);
      }
    }
    if (graph) cudaGraphDestroy(graph);
    p.graph_slot.captured = problem.empty();
    if (!problem.empty()) {
      cudaGetLastError();
      p.graph_slot.failed = true;
      options_.warn("could not capture a CUDA graph for batch " + std::to_string(p.batch) + ": " +
                    problem + "; that shape runs without graphs");
    }
  }

  // The forward pass's operations, enqueued on the engine's stream.
  class StreamOps final : public cuda::ForwardOps {
   public:
    StreamOps(CudaEngine& e, Plan& p, bool timed) : e_(e), p_(p), timed_(timed) {}

    void gemm(bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b,
              int ldb, float beta, float* c, int ldc, const char* what) override {
      const float one = 1.f;
      const cublasStatus_t s =
          cublasSgemm(e_.cublas_, op(ta), op(tb), m, n, k, &one, a, lda, b, ldb, &beta, c, ldc);
      if (s != CUBLAS_STATUS_SUCCESS) check(s, ("Sgemm (" + std::string(what) + ")").c_str());
    }
    void gemm_strided_batched(bool ta, bool tb, int m, int n, int k, const float* a, int lda,
                              int64_t stride_a, const float* b, int ldb, int64_t stride_b,
                              float beta, float* c, int ldc, int64_t stride_c, int count,
                              const char* what) override {
      const float one = 1.f;
      const cublasStatus_t s =
          cublasSgemmStridedBatched(e_.cublas_, op(ta), op(tb), m, n, k, &one, a, lda, stride_a, b,
                                    ldb, stride_b, &beta, c, ldc, stride_c, count);
      if (s != CUBLAS_STATUS_SUCCESS)
        check(s, ("SgemmStridedBatched (" + std::string(what) + ")").c_str());
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
    void lstm(const float*, float*) override { check(e_.enqueue_rnn(p_), "cudnnRNNForward"); }
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
    pass.arena = static_cast<char*>(arena_);
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
  // Descriptors by (algorithm, batch size for persist-dynamic, else 0); why a build failed.
  std::map<std::pair<LstmAlgorithm, int>, Rnn> rnns_;
  std::map<std::pair<LstmAlgorithm, int>, std::string> rnn_failures_;

  void* params_ = nullptr;
  cuda::ParamLayout param_layout_{};
  Rnn shared_weights_{};  // standard's weight space, and so everyone's of the same layout
  std::vector<cudnn::WeightSlot> weight_slots_;  // its layout
  std::vector<void*> weight_spaces_;

  void* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  void* staging_in_ = nullptr;  // pinned
  void* staging_out_ = nullptr;
  size_t staging_in_bytes_ = 0, staging_out_bytes_ = 0;
  std::vector<int> classes_;  // the batch sizes that have plans; every batch runs as one
  size_t stage_windows_ = 0;  // the caller's windows in this pass, for stage_check
  double startup_seconds_ = 0;
  std::map<std::pair<int, int>, std::unique_ptr<Plan>> plans_;

  bool broken_ = false;
  std::string broken_reason_;
  double seconds_[kStages] = {};
};

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (why)
      *why = "cudaGetDeviceCount: " + cuda_text(e) +
             (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver
                  ? "; is an NVIDIA GPU present with its driver loaded (nvidia-smi)?"
                  : "");
    return 0;
  }
  if (n == 0 && why) *why = "the CUDA driver reports no device";
  return n;
}

std::string environment() {
  std::string out;
  auto line = [&](const std::string& s) { out += s + "\n"; };
  std::string why;
  const int n = device_count(&why);
  if (n == 0) line("GPU: none (" + why + ")");
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) == cudaSuccess)
      line("GPU " + std::to_string(d) + ": " + prop.name + " (compute capability " +
           std::to_string(prop.major) + "." + std::to_string(prop.minor) + ", " +
           mib(prop.totalGlobalMem) + ")");
  }
  int v = 0;
  auto version = [](int x) {
    return std::to_string(x / 1000) + "." + std::to_string(x % 1000 / 10);
  };
  line("CUDA driver: " + (cudaDriverGetVersion(&v) == cudaSuccess && v ? version(v) : "none"));
  line("CUDA runtime: " + (cudaRuntimeGetVersion(&v) == cudaSuccess ? version(v) : "?"));
  int major = 0, minor = 0, patch = 0;
  cublasGetProperty(MAJOR_VERSION, &major);
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  line("cuBLAS: " + std::to_string(major) + "." + std::to_string(minor) + "." +
       std::to_string(patch));
  const size_t c = cudnnGetVersion();
  line("cuDNN: " + std::to_string(c / 10000) + "." + std::to_string(c / 100 % 100) + "." +
       std::to_string(c % 100));
  const std::string nvrtc = nvrtc_found();
  line("NVRTC: " + (nvrtc.empty() ? "not found (persist-dynamic will fall back or fail)" : nvrtc));
  cudaGetLastError();
  return out;
}

std::unique_ptr<SegmentationEngine> make_engine(std::shared_ptr<const SegmentationModel> model,
                                                const CudaEngineOptions& options) {
  if (!model) throw EngineError("make_cuda_engine: no model");
  return std::make_unique<CudaEngine>(std::move(model), options);
}

}  // namespace
}  // namespace speakerseg

extern "C" __attribute__((visibility("default"))) const speakerseg::cuda_module::Api*
speakerseg_cuda_module() {
  static const speakerseg::cuda_module::Api api{
      speakerseg::cuda_module::kAbi, sizeof(speakerseg::cuda_module::Api), speakerseg::device_count,
      speakerseg::environment, speakerseg::make_engine};
  return &api;
}
