#include "model/onnx_graph.h"

#include <sys/stat.h>

#include <cerrno>
#include <fstream>
#include <iterator>

namespace speakerseg::onnx_graph {

onnx::ModelProto read_model(const std::string& path, const std::string& fetch_hint) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    throw ModelError("model file '" + path + "' cannot be opened (" + std::strerror(errno) + "). " +
                     fetch_hint);
  if (!S_ISREG(st.st_mode))
    throw ModelError("model file '" + path + "' is not a regular file (a directory?). " +
                     fetch_hint);
  std::ifstream file(path, std::ios::binary);
  if (!file)
    throw ModelError("model file '" + path + "' cannot be opened (" + std::strerror(errno) + "). " +
                     fetch_hint);
  std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  onnx::ModelProto proto;
  if (bytes.empty() || !proto.ParseFromString(bytes) || !proto.has_graph() ||
      proto.graph().node_size() == 0)
    throw ModelError("model file '" + path + "' is not a readable ONNX model (" +
                     std::to_string(bytes.size()) +
                     " bytes; truncated, corrupt or another kind of file). " + fetch_hint);
  return proto;
}

}  // namespace speakerseg::onnx_graph
