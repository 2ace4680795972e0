#include "engines/remote/oip_client.h"

#include <grpcpp/grpcpp.h>

#include <cstring>
#include <limits>
#include <sstream>

#include "inference.grpc.pb.h"

namespace speakerseg::remote {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "raw tensor contents are little-endian: a big-endian host would have to swap");

struct OipClient::Stub {
  // Kept to tell, when a call's deadline passes, a server that is gone (no connection) from one
  // that is connected but did not answer.
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<inference::GRPCInferenceService::Stub> service;
};

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::ostringstream s;
  s << '[';
  for (size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
  s << ']';
  return s.str();
}

template <class Dims>
std::vector<int64_t> to_vector(const Dims& dims) {
  return std::vector<int64_t>(dims.begin(), dims.end());
}

// A context that waits at most `deadline`; it fails at once while the server is unreachable
// (gRPC's default) unless the caller asks it to wait for the server.
void arm(grpc::ClientContext* context, std::chrono::milliseconds deadline) {
  context->set_deadline(std::chrono::system_clock::now() + deadline);
}

}  // namespace

OipClient::OipClient(std::string server, std::chrono::milliseconds deadline)
    : server_(std::move(server)), deadline_(deadline), stub_(std::make_unique<Stub>()) {
  grpc::ChannelArguments args;
  // A batch of 32 windows is 20 MB: no message limit on our side (the server's is its own).
  args.SetMaxSendMessageSize(std::numeric_limits<int>::max());
  args.SetMaxReceiveMessageSize(std::numeric_limits<int>::max());
  // A server that comes back is found within 2 s: gRPC's own reconnection backoff would grow to
  // two minutes, and calls fail at once while it waits.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  stub_->channel = grpc::CreateCustomChannel(server_, grpc::InsecureChannelCredentials(), args);
  stub_->service = inference::GRPCInferenceService::NewStub(stub_->channel);
}

OipClient::~OipClient() = default;

namespace {

constexpr const char* kStartIt =
    "start it, or point `server` at the gRPC port it listens on (Triton: 8001, KServe: 8081)";

// "ModelInfer of model 'm' on HOST:PORT failed: UNAVAILABLE: ...", and what to do about it.
// `connected`: whether the channel had a connection when the call ended (a deadline that passes
// without one means the server is gone, not slow).
std::string failure(const std::string& call, const std::string& model, const std::string& server,
                    const grpc::Status& status, std::chrono::milliseconds deadline,
                    bool connected) {
  std::string what =
      call + (model.empty() ? "" : " of model '" + model + "'") + " on " + server + " failed: ";
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return what + "the server cannot be reached (" + status.error_message() + "): " + kStartIt;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      if (!connected)
        return what + "the server cannot be reached (no connection for " +
               std::to_string(deadline.count()) + " ms): " + kStartIt;
      return what + "no answer within " + std::to_string(deadline.count()) +
             " ms: the server is overloaded or stuck; raise the deadline or add server capacity";
    case grpc::StatusCode::NOT_FOUND:
      return what + "the server has no such model (" + status.error_message() +
             "): name a model it serves";
    default:
      return what + "gRPC status " + std::to_string(status.error_code()) + ": " +
             status.error_message();
  }
}

}  // namespace

bool OipClient::connected() const {
  return stub_->channel->GetState(false) == GRPC_CHANNEL_READY;
}

std::vector<int64_t> OipClient::check_model(const std::string& model, const TensorContract& input,
                                            const TensorContract& output) {
  {
    grpc::ClientContext context;
    arm(&context, deadline_);
    inference::ServerReadyResponse ready;
    const grpc::Status status =
        stub_->service->ServerReady(&context, inference::ServerReadyRequest(), &ready);
    if (!status.ok())
      throw EngineError(failure("ServerReady", "", server_, status, deadline_, connected()));
    if (!ready.ready())
      throw EngineError("the inference server at " + server_ +
                        " is live but not ready (still loading its models?): try again when it "
                        "says it is ready");
  }
  {
    grpc::ClientContext context;
    arm(&context, deadline_);
    inference::ModelReadyRequest request;
    request.set_name(model);
    inference::ModelReadyResponse ready;
    const grpc::Status status = stub_->service->ModelReady(&context, request, &ready);
    if (!status.ok() || !ready.ready())
      throw EngineError("the inference server at " + server_ + " has no ready model '" + model +
                        "'" + (status.ok() ? "" : " (" + status.error_message() + ")") +
                        ": name a model it serves (the defaults are segmentation-3.0 and "
                        "voice-encoder-ge2e; deploy/triton holds a model repository of both)");
  }
  grpc::ClientContext context;
  arm(&context, deadline_);
  inference::ModelMetadataRequest request;
  request.set_name(model);
  inference::ModelMetadataResponse metadata;
  const grpc::Status status = stub_->service->ModelMetadata(&context, request, &metadata);
  if (!status.ok())
    throw EngineError(failure("ModelMetadata", model, server_, status, deadline_, connected()));

  std::vector<int64_t> input_shape;
  const auto check = [&](const auto& tensors, const TensorContract& want, const char* kind) {
    std::string names;
    for (const auto& t : tensors) {
      names += (names.empty() ? "" : ", ") + t.name();
      if (t.name() != want.name) continue;
      const std::vector<int64_t> shape = to_vector(t.shape());
      bool fits = t.datatype() == "FP32" && shape.size() == want.dims.size();
      for (size_t d = 0; fits && d < shape.size(); ++d)
        fits = shape[d] == kAnySize || want.dims[d] == kAnySize || shape[d] == want.dims[d];
      if (!fits)
        throw EngineError("model '" + model + "' on " + server_ + ": its " + kind + " '" +
                          want.name + "' is " + t.datatype() + " " + shape_text(shape) +
                          ", this engine needs FP32 " + shape_text(want.dims) +
                          " (-1: any size): is it the right model?");
      return shape;
    }
    throw EngineError("model '" + model + "' on " + server_ + " has no " + kind + " '" + want.name +
                      "' (its " + kind + "s: " + (names.empty() ? "none" : names) +
                      "): is it the right model?");
  };
  // A server may declare no tensors at all (KServe's default for a custom predictor): then only
  // the first answer can tell, and infer() says so if it is the wrong model. One that declares
  // some but not ours is the wrong model now.
  if (metadata.inputs().empty() || metadata.outputs().empty()) undeclared_ = true;
  input_shape = metadata.inputs().empty() ? std::vector<int64_t>(input.dims.size(), kAnySize)
                                          : check(metadata.inputs(), input, "input");
  if (!metadata.outputs().empty()) check(metadata.outputs(), output, "output");
  return input_shape;
}

std::string OipClient::right_model(const std::string& model) const {
  return "Is '" + model +
         "' the right model (remote-model, remote-voice-model; the defaults are "
         "segmentation-3.0 and voice-encoder-ge2e)?" +
         (undeclared_ ? " The server declares no tensors for it, so this could not be checked "
                        "before the first request."
                      : "");
}

void OipClient::infer(const std::string& model, const std::string& input_name,
                      const std::vector<int64_t>& input_shape, const float* data,
                      const std::string& output_name, const std::vector<int64_t>& output_shape,
                      float* out) const {
  int64_t in_count = 1, out_count = 1;
  for (int64_t d : input_shape) in_count *= d;
  for (int64_t d : output_shape) out_count *= d;

  inference::ModelInferRequest request;
  request.set_model_name(model);
  auto* input = request.add_inputs();
  input->set_name(input_name);
  input->set_datatype("FP32");
  for (int64_t d : input_shape) input->add_shape(d);
  request.add_outputs()->set_name(output_name);
  request.add_raw_input_contents()->assign(reinterpret_cast<const char*>(data),
                                           static_cast<size_t>(in_count) * sizeof(float));

  grpc::ClientContext context;
  arm(&context, deadline_);
  // Mid-stream a lost server is waited for, up to the deadline, rather than failed at once: the
  // call goes out as soon as the channel reconnects (the checks at creation fail fast instead).
  context.set_wait_for_ready(true);
  inference::ModelInferResponse response;
  const grpc::Status status = stub_->service->ModelInfer(&context, request, &response);
  if (!status.ok()) {
    if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT)
      throw EngineError("ModelInfer of model '" + model + "' on " + server_ +
                        " failed: the server refused the request (" + status.error_message() +
                        "): it was FP32 '" + input_name + "' " + shape_text(input_shape) +
                        " asking for '" + output_name + "'. " + right_model(model) +
                        " A batch over the server's max batch size is refused the same way: "
                        "lower batch-size.");
    // The model was ready when the engine was made (check_model): a server without it now is
    // loading it again (Triton, restarted, is reachable before its models are loaded) or had it
    // unloaded. Either may end: an outage, not the stream's end.
    if (status.error_code() == grpc::StatusCode::NOT_FOUND)
      throw EngineUnavailable("ModelInfer of model '" + model + "' on " + server_ +
                              " failed: the server does not serve the model now (" +
                              status.error_message() +
                              "), though it did when the engine started: it is loading it "
                              "(restarting?) or unloaded it; load it again");
    const std::string why = failure("ModelInfer", model, server_, status, deadline_, connected());
    // A server that is gone, overloaded or slow may answer again: not the stream's end.
    switch (status.error_code()) {
      case grpc::StatusCode::UNAVAILABLE:
      case grpc::StatusCode::DEADLINE_EXCEEDED:
      case grpc::StatusCode::RESOURCE_EXHAUSTED:
      case grpc::StatusCode::ABORTED:
      case grpc::StatusCode::CANCELLED:  // a server shutting down cancels what is in flight
      case grpc::StatusCode::UNKNOWN:    // a connection reset mid-call
        throw EngineUnavailable(why);
      default:
        throw EngineError(why);
    }
  }

  for (int i = 0; i < response.outputs_size(); ++i) {
    const auto& tensor = response.outputs(i);
    if (tensor.name() != output_name) continue;
    const std::vector<int64_t> shape = to_vector(tensor.shape());
    if (tensor.datatype() != "FP32" || shape != output_shape)
      throw EngineError("model '" + model + "' on " + server_ + " answered " + tensor.datatype() +
                        " " + shape_text(shape) + " for '" + output_name + "', expected FP32 " +
                        shape_text(output_shape) + ". " + right_model(model));
    // Servers answer a raw request with raw bytes (Triton, KServe) or typed contents.
    if (i < response.raw_output_contents_size()) {
      const std::string& raw = response.raw_output_contents(i);
      if (raw.size() != static_cast<size_t>(out_count) * sizeof(float))
        throw EngineError("model '" + model + "' on " + server_ + " answered " +
                          std::to_string(raw.size()) + " bytes for '" + output_name + "' " +
                          shape_text(shape) + ", expected " +
                          std::to_string(out_count * sizeof(float)));
      std::memcpy(out, raw.data(), raw.size());
    } else {
      const auto& values = tensor.contents().fp32_contents();
      if (values.size() != out_count)
        throw EngineError("model '" + model + "' on " + server_ + " answered " +
                          std::to_string(values.size()) + " values for '" + output_name + "' " +
                          shape_text(shape) + ", expected " + std::to_string(out_count));
      std::copy(values.begin(), values.end(), out);
    }
    return;
  }
  throw EngineError("model '" + model + "' on " + server_ + " answered without an output '" +
                    output_name + "'. " + right_model(model));
}

}  // namespace speakerseg::remote
