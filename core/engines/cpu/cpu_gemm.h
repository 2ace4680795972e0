// The two pieces every CPU engine runs on: oneDNN's sgemm, each call on one thread, and a
// coarse-grained OpenMP loop to spread independent calls over the cores.
#pragma once

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <string>

#include "engines/segmentation_engine.h"  // EngineError

namespace speakerseg::cpu {

// C[M,N] = A[M,K] * op(B) + beta * C, row-major.
inline void gemm(bool trans_b, int m, int n, int k, const float* a, int lda, const float* b,
                 int ldb, float beta, float* c, int ldc) {
  const dnnl_status_t status =
      dnnl_sgemm('N', trans_b ? 'T' : 'N', m, n, k, 1.f, a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success)
    throw EngineError("oneDNN sgemm failed (status " + std::to_string(status) + ")");
}

// oneDNN's sgemm takes its thread count from OpenMP: outside our parallel regions a call would use
// every core whatever the engine was given. The engine's count for the scope of one call into
// it, and the caller's setting back afterwards, also when the call throws.
class ScopedOmpThreads {
 public:
  explicit ScopedOmpThreads(int threads) : caller_(omp_get_max_threads()) {
    omp_set_num_threads(threads);
  }
  ~ScopedOmpThreads() { omp_set_num_threads(caller_); }
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

 private:
  int caller_;
};

// "cpu (oneDNN sgemm, avx2 LSTM, 2 threads)": what both CPU engines say they are.
inline std::string engine_description(int threads, const char* lstm_kernel) {
  return std::string("cpu (oneDNN sgemm, ") + lstm_kernel + " LSTM, " + std::to_string(threads) +
         " thread" + (threads > 1 ? "s" : "") + ")";
}

// Runs f(task, thread) for task in [0, n); each thread's calls are sequential.
template <class F>
void parallel_for(int n, int threads, F&& f) {
  if (threads <= 1 || n <= 1) {
    for (int i = 0; i < n; ++i) f(i, 0);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int i = 0; i < n; ++i) f(i, omp_get_thread_num());
}

}  // namespace speakerseg::cpu
