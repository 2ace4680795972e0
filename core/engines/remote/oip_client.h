// One connection to an Open Inference Protocol server (inference.proto: NVIDIA Triton, KServe,
// Seldon MLServer): the checks a model passes once, when an engine is made, and one FP32
// inference call. Every failure is an EngineError that names the server and the model and says
// what to do. gRPC stays behind this header: nothing that includes it needs the generated code.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engines/segmentation_engine.h"  // EngineError

namespace speakerseg::remote {

// A dimension the caller takes at whatever size the server gives (the batch, a length).
constexpr int64_t kAnySize = -1;

// What a model's tensor must be: FP32, this name, this rank, and these sizes where not kAnySize.
struct TensorContract {
  std::string name;
  std::vector<int64_t> dims;
};

class OipClient {
 public:
  // `server` is HOST:PORT of the gRPC endpoint; every call waits at most `deadline`. gRPC
  // connects on the first call, so this does not fail.
  OipClient(std::string server, std::chrono::milliseconds deadline);
  ~OipClient();
  OipClient(const OipClient&) = delete;
  OipClient& operator=(const OipClient&) = delete;

  const std::string& server() const { return server_; }

  // The server is live and ready, the model ready, and its input and output named in the
  // contracts are FP32 tensors of that rank whose fixed sizes agree with the contracts' (-1 on
  // either side agrees with anything). Returns the server's shape of the input. A server that
  // declares no inputs (or no outputs) at all, as KServe's custom predictors do by default, is
  // taken at its word that the model is ready: the first infer() tells, naming the model, and
  // the input's shape is then all kAnySize.
  std::vector<int64_t> check_model(const std::string& model, const TensorContract& input,
                                   const TensorContract& output);

  // Runs `model` on `data`, an FP32 tensor of `input_shape`, and writes its output, which must be
  // an FP32 tensor of exactly `output_shape`, to `out`. A server that cannot be reached, is
  // overloaded or misses the deadline throws EngineUnavailable; anything else EngineError (a
  // request the server refuses, INVALID_ARGUMENT, says which tensor it was and to check the
  // model).
  void infer(const std::string& model, const std::string& input_name,
             const std::vector<int64_t>& input_shape, const float* data,
             const std::string& output_name, const std::vector<int64_t>& output_shape,
             float* out) const;

 private:
  struct Stub;
  // Whether the channel has a connection to the server now.
  bool connected() const;
  // "Is 'm' the right model ...?", the end of an error that a wrong model would explain.
  std::string right_model(const std::string& model) const;

  std::string server_;
  std::chrono::milliseconds deadline_;
  std::unique_ptr<Stub> stub_;
  // check_model found no declared tensors: errors of infer() say what could not be checked.
  bool undeclared_ = false;
};

}  // namespace speakerseg::remote
