// Inside the CUDA module only: the cuDNN LSTM of a network, one descriptor per algorithm (and per
// batch size for persist-dynamic, which cuDNN compiles for one), each with its packed weight space.
// Both engines keep one: segmentation-3.0's 4 bidirectional layers and GE2E's 3 unidirectional.
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engines/cuda/cuda_engine.h"  // LstmAlgorithm
#include "engines/cuda/cudnn_lstm_weights.h"

namespace speakerseg::cuda {

cudnnRNNAlgo_t cudnn_algo(LstmAlgorithm algorithm);

// A synchronous copy on `stream`. (A plain cudaMemcpy from pageable memory may return before the
// data has arrived, and it runs on the legacy stream, which the engines' non-blocking streams are
// not ordered with.)
void upload(cudaStream_t stream, void* device, const void* host, size_t bytes, const char* what);

// One cuDNN RNN descriptor and the weight space it reads.
struct Rnn {
  cudnnRNNDescriptor_t desc = nullptr;
  const void* weights = nullptr;
  size_t weight_bytes = 0;
};

// What a probe run of `algorithm` returned: out of memory stays an error, any other failure makes
// the algorithm unavailable for the plan (`what`).
void check_probe_status(cudnnStatus_t status, LstmAlgorithm algorithm, const std::string& what);

class RnnCache {
 public:
  // `stack` points into a model that outlives the cache. Linear input, no projection, double
  // bias, dropout 0, padded IO; FP32 data, and `math` for its products: CUDNN_FMA_MATH (plain
  // FP32), CUDNN_TENSOR_OP_MATH (TF32) or CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION (FP16 tensor
  // cores, the data converted).
  RnnCache(cudnnHandle_t cudnn, cudaStream_t stream, cudnnDropoutDescriptor_t dropout,
           cudnn::LstmStack stack, cudnnMathType_t math);
  ~RnnCache();
  RnnCache(const RnnCache&) = delete;
  RnnCache& operator=(const RnnCache&) = delete;

  // The descriptor (and weight space) for an algorithm and batch size, made on first use; the
  // reference stays valid for the cache's life. persist-dynamic compiles its kernel for the batch
  // size with NVRTC (seconds): once per size, and a size whose build failed is not tried again.
  // Throws RnnUnavailable where the algorithm cannot be set up, OutOfDeviceMemory where memory ran
  // out. Weight spaces of the same layout are shared.
  const Rnn& get(LstmAlgorithm algorithm, int batch);

  // cuDNN's inference workspace for `rnn` on data `x`. A failure that is not memory's makes the
  // algorithm unavailable for this plan (`what`: "batch 4", "4 partials").
  size_t workspace_bytes(const Rnn& rnn, LstmAlgorithm algorithm, cudnnRNNDataDescriptor_t x,
                         const std::string& what) const;

  const cudnn::LstmStack& stack() const { return stack_; }

 private:
  cudnnRNNDescriptor_t new_descriptor(LstmAlgorithm algorithm);
  // Where cuDNN expects every matrix and bias, in LstmStack::slot order: offsets from the start
  // of `space`, a weight space of `bytes` bytes.
  std::vector<cudnn::WeightSlot> weight_layout(cudnnRNNDescriptor_t rnn, const void* space,
                                               size_t bytes);

  cudnnHandle_t cudnn_;
  cudaStream_t stream_;
  cudnnDropoutDescriptor_t dropout_;
  cudnn::LstmStack stack_;
  cudnnMathType_t math_;
  // By (algorithm, batch size for persist-dynamic, else 0); why a build failed.
  std::map<std::pair<LstmAlgorithm, int>, Rnn> rnns_;
  std::map<std::pair<LstmAlgorithm, int>, std::string> failures_;
  Rnn shared_{};  // the first weight space made, and so everyone's of the same layout
  std::vector<cudnn::WeightSlot> shared_slots_;
  std::vector<void*> spaces_;
};

}  // namespace speakerseg::cuda
