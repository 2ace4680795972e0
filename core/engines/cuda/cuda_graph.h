// Inside the CUDA module only: capturing a pass into a CUDA graph and launching it, for both
// engines (their policy, plan_policy.h's run_pass, is plain C++ and tested on every machine).
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <string>

namespace speakerseg::cuda {

// Records what `enqueue` puts on `stream` (thread-local capture mode) as one graph and
// instantiates it. Returns null, with *problem, where the capture, `enqueue` or the instantiation
// failed; the stream is out of capture mode either way. Run it after an eager pass of the same
// work, which loads every kernel module: lazy loading cannot happen inside a capture.
cudaGraphExec_t capture_graph(cudaStream_t stream, const std::function<void()>& enqueue,
                              std::string* problem);

// For run_pass: false, with *why, where the launch failed (the error is cleared).
bool launch_graph(cudaGraphExec_t graph, cudaStream_t stream, std::string* why);

// A plan's graph after its first eager pass: captured, or marked failed with a warning that names
// the plan (`what`), so that its shape runs eagerly from then on. Plans have `graph` and
// `graph_slot` (plan_policy.h's GraphSlot).
template <class Plan>
void capture_plan(Plan& p, cudaStream_t stream, const std::function<void()>& enqueue,
                  const std::string& what, const std::function<void(const std::string&)>& warn) {
  std::string problem;
  p.graph = capture_graph(stream, enqueue, &problem);
  p.graph_slot.captured = p.graph != nullptr;
  if (!p.graph) {
    p.graph_slot.failed = true;
    warn("could not capture a CUDA graph for " + what + ": " + problem +
         "; that shape runs without graphs");
  }
}

// Every plan's graph holds the arena's addresses: when the arena is taken anew they go, and each
// is captured again on its shape's next call. `plans` maps to pointers to plans.
template <class Plans>
void drop_graphs(Plans& plans) {
  for (auto& q : plans) {
    if (q.second->graph) cudaGraphExecDestroy(q.second->graph);
    q.second->graph = nullptr;
    q.second->graph_slot.captured = false;
  }
}

}  // namespace speakerseg::cuda
