// What both ONNX loaders (segmentation-3.0, the GE2E voice encoder) need of an ONNX file: reading
// it with errors a user can act on, and an index of its graph to find weights by structure.
#pragma once

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "model/segmentation_model.h"

namespace speakerseg::onnx_graph {

// Reads and parses `path`. `fetch_hint` says how to get the right file ("Run scripts/setup.sh
// ..."); it ends every error. Throws ModelError for a missing, unreadable, non-regular or
// non-ONNX file.
onnx::ModelProto read_model(const std::string& path, const std::string& fetch_hint);

using Dims = std::vector<int64_t>;

inline std::string dims_str(const Dims& d) {
  std::ostringstream s;
  s << '[';
  for (size_t i = 0; i < d.size(); ++i) s << (i ? ", " : "") << d[i];
  s << ']';
  return s.str();
}

struct Tensor {
  Dims dims;
  std::vector<float> data;
};

class GraphIndex {
 public:
  // `expected`: what the file should be and how to get it, appended to every error.
  GraphIndex(const std::string& path, const onnx::GraphProto& graph, std::string expected)
      : path_(path), expected_(std::move(expected)) {
    add(graph);
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw ModelError("model file '" + path_ + "': " + what + ". " + expected_);
  }

  // Nodes in topological order (ONNX guarantees it within a graph); If branches are inlined after
  // the If node, since the SincNet convolution of some exports lives in one.
  const std::vector<const onnx::NodeProto*>& nodes() const { return nodes_; }

  bool is_initializer(const std::string& name) const { return init_.count(name) != 0; }

  const onnx::TensorProto* initializer(const std::string& name) const {
    auto it = init_.find(name);
    return it == init_.end() ? nullptr : it->second;
  }

  Dims dims_of(const std::string& name) const {
    const auto* t = initializer(name);
    if (!t) return {};
    return Dims(t->dims().begin(), t->dims().end());
  }

  Tensor tensor(const std::string& name, const Dims& expected, const char* role) const {
    const onnx::TensorProto* t = initializer(name);
    if (!t) fail(std::string(role) + " is not a constant tensor");
    Tensor out{Dims(t->dims().begin(), t->dims().end()), {}};
    if (out.dims != expected)
      fail(std::string(role) + " has shape " + dims_str(out.dims) + ", expected " +
           dims_str(expected));
    if (t->data_type() != onnx::TensorProto::FLOAT)
      fail(std::string(role) + " is not float32 (ONNX data type " + std::to_string(t->data_type()) +
           ")");
    if (t->data_location() == onnx::TensorProto::EXTERNAL)
      fail(std::string(role) + " is stored as external data, which is not supported");
    size_t count = 1;
    for (int64_t d : out.dims) count *= static_cast<size_t>(d);
    out.data.resize(count);
    if (!t->raw_data().empty()) {
      if (t->raw_data().size() != count * sizeof(float))
        fail(std::string(role) + " holds " + std::to_string(t->raw_data().size()) +
             " bytes, expected " + std::to_string(count * sizeof(float)));
      std::memcpy(out.data.data(), t->raw_data().data(), count * sizeof(float));
    } else if (static_cast<size_t>(t->float_data_size()) == count) {
      std::copy(t->float_data().begin(), t->float_data().end(), out.data.begin());
    } else {
      fail(std::string(role) + " has no data");
    }
    for (float v : out.data)
      if (!std::isfinite(v)) fail(std::string(role) + " contains NaN or infinite values");
    return out;
  }

  std::vector<const onnx::NodeProto*> consumers(const std::string& tensor) const {
    std::vector<const onnx::NodeProto*> out;
    for (const auto* n : nodes_)
      for (const auto& in : n->input())
        if (in == tensor) {
          out.push_back(n);
          break;
        }
    return out;
  }

  // The nodes downstream of `tensor`.
  std::set<const onnx::NodeProto*> reachable_from(const std::string& tensor) const {
    std::set<const onnx::NodeProto*> seen;
    std::vector<std::string> frontier{tensor};
    while (!frontier.empty()) {
      std::string t = frontier.back();
      frontier.pop_back();
      for (const auto* n : consumers(t))
        if (seen.insert(n).second)
          for (const auto& o : n->output()) frontier.push_back(o);
    }
    return seen;
  }

 private:
  void add(const onnx::GraphProto& g) {
    for (const auto& t : g.initializer()) init_.emplace(t.name(), &t);
    for (const auto& n : g.node()) {
      nodes_.push_back(&n);
      // Constant nodes are initializers in all but name.
      if (n.op_type() == "Constant" && n.output_size() == 1)
        for (const auto& a : n.attribute())
          if (a.name() == "value" && a.has_t()) init_.emplace(n.output(0), &a.t());
      for (const auto& a : n.attribute())
        if (a.has_g()) add(a.g());
    }
  }

  std::string path_, expected_;
  std::vector<const onnx::NodeProto*> nodes_;
  std::map<std::string, const onnx::TensorProto*> init_;
};

inline const onnx::AttributeProto* attribute(const onnx::NodeProto& n, const char* name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

inline std::vector<int64_t> ints_attribute(const onnx::NodeProto& n, const char* name) {
  const auto* a = attribute(n, name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
}

inline std::string node_label(const onnx::NodeProto& n) {
  return n.op_type() + (n.name().empty() ? "" : " '" + n.name() + "'");
}

}  // namespace speakerseg::onnx_graph
