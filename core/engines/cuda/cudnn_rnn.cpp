#include "engines/cuda/cudnn_rnn.h"

#include <stdexcept>

#include "engines/cuda/cuda_errors.h"
#include "engines/cuda/plan_policy.h"

namespace speakerseg::cuda {
namespace {

size_t elements(cudnnTensorDescriptor_t d) {
  cudnnDataType_t type;
  int dims[8] = {0}, strides[8] = {0}, n = 0;
  if (cudnnGetTensorNdDescriptor(d, 8, &type, &n, dims, strides) != CUDNN_STATUS_SUCCESS) return 0;
  size_t total = 1;
  for (int i = 0; i < n; ++i) total *= static_cast<size_t>(dims[i]);
  return total;
}

}  // namespace

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

void upload(cudaStream_t stream, void* device, const void* host, size_t bytes, const char* what) {
  check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream), what);
  check(cudaStreamSynchronize(stream), what);
}

void check_probe_status(cudnnStatus_t s, LstmAlgorithm a, const std::string& what) {
  if (cudnn_status_is_out_of_memory(s)) check(s, "cudnnRNNForward (probe)");
  if (s == CUDNN_STATUS_SUCCESS) return;
  cudaGetLastError();
  throw RnnUnavailable(std::string("CUDA engine: lstm-algorithm ") + lstm_algorithm_name(a) +
                       " for " + what + ": cudnnRNNForward failed: " + cudnn_text(s));
}

size_t RnnCache::workspace_bytes(const Rnn& rnn, LstmAlgorithm a, cudnnRNNDataDescriptor_t x,
                                 const std::string& what) const {
  size_t work = 0, reserve = 0;
  const cudnnStatus_t s =
      cudnnGetRNNTempSpaceSizes(cudnn_, rnn.desc, CUDNN_FWD_MODE_INFERENCE, x, &work, &reserve);
  if (cudnn_status_is_out_of_memory(s)) check(s, "cudnnGetRNNTempSpaceSizes");
  if (s != CUDNN_STATUS_SUCCESS)
    throw RnnUnavailable("CUDA engine: lstm-algorithm " + std::string(lstm_algorithm_name(a)) +
                         " for " + what + ": cudnnGetRNNTempSpaceSizes failed: " + cudnn_text(s));
  return work;
}

RnnCache::RnnCache(cudnnHandle_t cudnn, cudaStream_t stream, cudnnDropoutDescriptor_t dropout,
                   cudnn::LstmStack stack, cudnnMathType_t math)
    : cudnn_(cudnn), stream_(stream), dropout_(dropout), stack_(std::move(stack)), math_(math) {}

RnnCache::~RnnCache() {
  for (auto& r : rnns_)
    if (r.second.desc) cudnnDestroyRNNDescriptor(r.second.desc);
  for (void* p : spaces_) cudaFree(p);
  cudaGetLastError();
}

cudnnRNNDescriptor_t RnnCache::new_descriptor(LstmAlgorithm a) {
  cudnnRNNDescriptor_t d = nullptr;
  check(cudnnCreateRNNDescriptor(&d), "cudnnCreateRNNDescriptor");
  const cudnnStatus_t s = cudnnSetRNNDescriptor_v8(
      d, cudnn_algo(a), CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS,
      stack_.directions == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT,
      CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, math_, stack_.layers.at(0).input_size, stack_.hidden,
      stack_.hidden, static_cast<int32_t>(stack_.layers.size()), dropout_,
      CUDNN_RNN_PADDED_IO_ENABLED);
  if (s != CUDNN_STATUS_SUCCESS) {
    cudnnDestroyRNNDescriptor(d);
    check(s, "cudnnSetRNNDescriptor_v8");
  }
  return d;
}

const Rnn& RnnCache::get(LstmAlgorithm a, int batch) {
  const std::pair<LstmAlgorithm, int> key{a, a == LstmAlgorithm::kPersistDynamic ? batch : 0};
  auto it = rnns_.find(key);
  if (it != rnns_.end()) return it->second;
  auto failed = failures_.find(key);
  if (failed != failures_.end()) throw RnnUnavailable("CUDA engine: " + failed->second);
  Rnn r;
  r.desc = new_descriptor(a);
  try {
    if (a == LstmAlgorithm::kPersistDynamic) {
      // Looked for first: what cuDNN says when it cannot load NVRTC does not name it.
      if (nvrtc_found().empty()) {
        const std::string why =
            "lstm-algorithm persist-dynamic needs NVRTC, which cuDNN loads at run time to "
            "compile it, and the dynamic loader finds no libnvrtc.so.13 (put the CUDA 13 "
            "toolkit's or the nvidia-cuda-nvrtc wheel's lib folder on LD_LIBRARY_PATH); "
            "lstm-algorithm standard needs no NVRTC";
        failures_[key] = why;
        throw RnnUnavailable("CUDA engine: " + why);
      }
      const cudnnStatus_t s = cudnnBuildRNNDynamic(cudnn_, r.desc, batch);
      // Memory that ran out is no reason to give up on the algorithm for good.
      if (cudnn_status_is_out_of_memory(s)) check(s, "cudnnBuildRNNDynamic");
      if (s != CUDNN_STATUS_SUCCESS) {
        const std::string why =
            "lstm-algorithm persist-dynamic: cudnnBuildRNNDynamic for batch " +
            std::to_string(batch) + " failed: " + cudnn_text(s) +
            " (cuDNN compiles this kernel at run time with NVRTC: libnvrtc must be on the "
            "library path; lstm-algorithm standard needs no NVRTC)";
        failures_[key] = why;
        cudaGetLastError();
        throw RnnUnavailable("CUDA engine: " + why);
      }
    }
    check(cudnnGetRNNWeightSpaceSize(cudnn_, r.desc, &r.weight_bytes),
          "cudnnGetRNNWeightSpaceSize");
    if (shared_.weights && r.weight_bytes == shared_.weight_bytes &&
        weight_layout(r.desc, shared_.weights, r.weight_bytes) == shared_slots_) {
      r.weights = shared_.weights;
    } else {
      // The first descriptor's space, or one of another layout: cuDNN does not promise one
      // layout for every algorithm, and a second copy costs one upload.
      void* space = nullptr;
      check_alloc(cudaMalloc(&space, r.weight_bytes), "cuDNN RNN weight space", r.weight_bytes);
      std::vector<cudnn::WeightSlot> slots;
      try {
        slots = weight_layout(r.desc, space, r.weight_bytes);
        std::vector<char> host;
        try {
          host = cudnn::pack_lstm_weights(stack_, slots, r.weight_bytes);
        } catch (const std::invalid_argument& e) {
          fail(std::string("cuDNN's RNN weight layout is not the expected one: ") + e.what());
        }
        upload(stream_, space, host.data(), r.weight_bytes, "uploading the LSTM weights");
      } catch (...) {
        cudaFree(space);
        throw;
      }
      spaces_.push_back(space);
      r.weights = space;
      if (!shared_.weights) {
        shared_slots_ = slots;
        shared_ = r;
      }
    }
  } catch (...) {
    cudnnDestroyRNNDescriptor(r.desc);
    throw;
  }
  return rnns_.emplace(key, r).first->second;
}

std::vector<cudnn::WeightSlot> RnnCache::weight_layout(cudnnRNNDescriptor_t rnn, const void* space,
                                                       size_t bytes) {
  cudnnTensorDescriptor_t m_desc = nullptr, b_desc = nullptr;
  check(cudnnCreateTensorDescriptor(&m_desc), "cudnnCreateTensorDescriptor");
  check(cudnnCreateTensorDescriptor(&b_desc), "cudnnCreateTensorDescriptor");
  std::vector<cudnn::WeightSlot> slots(stack_.slot_count());
  auto offset = [&](const void* addr) {
    return static_cast<size_t>(static_cast<const char*>(addr) - static_cast<const char*>(space));
  };
  const size_t H = stack_.hidden;
  try {
    for (size_t layer = 0; layer < stack_.layers.size(); ++layer)
      for (int dir = 0; dir < stack_.directions; ++dir)
        for (int lin = 0; lin < cudnn::kLinLayers; ++lin) {
          void* m_addr = nullptr;
          void* b_addr = nullptr;
          const int pseudo = stack_.directions * static_cast<int>(layer) + dir;
          check(cudnnGetRNNWeightParams(cudnn_, rnn, pseudo, bytes, space, lin, m_desc, &m_addr,
                                        b_desc, &b_addr),
                "cudnnGetRNNWeightParams");
          const size_t in = lin < 4 ? static_cast<size_t>(stack_.layers[layer].input_size) : H;
          if (!m_addr || !b_addr || elements(m_desc) != H * in || elements(b_desc) != H)
            fail("cuDNN's RNN weight layout is not the expected one (layer " +
                 std::to_string(layer) + ", direction " + std::to_string(dir) + ", matrix " +
                 std::to_string(lin) + ")");
          slots[stack_.slot(static_cast<int>(layer), dir, lin)] = {offset(m_addr), offset(b_addr)};
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

}  // namespace speakerseg::cuda
