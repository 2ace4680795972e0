#include "engines/cuda/cuda_graph.h"

#include <exception>

#include "engines/cuda/cuda_errors.h"

namespace speakerseg::cuda {

cudaGraphExec_t capture_graph(cudaStream_t stream, const std::function<void()>& enqueue,
                              std::string* problem) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  problem->clear();
  const cudaError_t begin = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  if (begin != cudaSuccess) {
    *problem = "cudaStreamBeginCapture: " + cuda_text(begin);
  } else {
    try {
      enqueue();
    } catch (const std::exception& e) {
      *problem = e.what();
    }
    const cudaError_t end = cudaStreamEndCapture(stream, &graph);
    if (problem->empty() && end != cudaSuccess)
      *problem = "cudaStreamEndCapture: " + cuda_text(end);
  }
  if (problem->empty()) {
    const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    if (e != cudaSuccess) {
      exec = nullptr;
      *problem = "cudaGraphInstantiate: " + cuda_text(e);
    }
  }
  if (graph) cudaGraphDestroy(graph);
  if (!problem->empty()) cudaGetLastError();
  return exec;
}

bool launch_graph(cudaGraphExec_t graph, cudaStream_t stream, std::string* why) {
  const cudaError_t e = cudaGraphLaunch(graph, stream);
  if (e == cudaSuccess) return true;
  cudaGetLastError();
  *why = "cudaGraphLaunch: " + cuda_text(e);
  return false;
}

}  // namespace speakerseg::cuda
