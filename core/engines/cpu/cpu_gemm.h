// The two pieces every CPU engine runs on: oneDNN's sgemm, each call on one thread, and a
// coarse-grained OpenMP loop to spread independent calls over the cores.
#pragma once

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <optional>
#include <string>
#include <vector>

#include "engines/cpu/bf16_gemm.h"
#include "engines/cpu/cpu_engine.h"  // CpuPrecision
#include "engines/cpu/emulated_precision.h"
#include "engines/cpu/lstm_recurrence.h"
#include "engines/cpu/omp_threads.h"
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

// The rounding an emulated precision gives every product's operands (kNone for fp32 and bf16),
// and SincNet's products' (also kNone for the *-fp32-sinc precisions).
Rounding emulated_rounding(CpuPrecision precision);
Rounding emulated_sinc_rounding(CpuPrecision precision);

// An LSTM layer's input projection C[m][n] = A[m][k] * W^T (W [n][k], rows of A k apart, of C n
// apart): oneDNN's sgemm on the model's weights, at precision bf16 the bf16 product on a copy
// packed at load, at an emulated precision sgemm on a rounded copy of W and of A.
class InputProjection {
 public:
  InputProjection(const float* w, int n, int k, CpuPrecision precision)
      : w_(w), n_(n), k_(k), rounding_(emulated_rounding(precision)) {
    if (precision == CpuPrecision::kBf16) bf16_.emplace(w, n, k);
    if (rounding_ != Rounding::kNone)
      rounded_w_ = rounded_copy(rounding_, w, static_cast<size_t>(n) * k);
  }
  void apply(int m, const float* a, float* c) const {
    if (bf16_) return bf16_gemm(m, a, k_, *bf16_, c, n_);
    if (rounding_ == Rounding::kNone) return gemm(true, m, n_, k_, a, k_, w_, k_, 0.f, c, n_);
    const std::vector<float> rounded_a = rounded_copy(rounding_, a, static_cast<size_t>(m) * k_);
    gemm(true, m, n_, k_, rounded_a.data(), k_, rounded_w_.data(), k_, 0.f, c, n_);
  }

 private:
  const float* w_;  // the model's, which outlives the engine
  int n_, k_;
  Rounding rounding_;
  std::optional<Bf16Matrix> bf16_;
  std::vector<float> rounded_w_;
};

// The recurrence kernel a CPU engine runs at `precision`: the best fp32 one (also for the emulated
// precisions, with rounded weights and hidden state), or the bf16 one where this CPU has it (an
// EngineError saying so where it does not).
LstmIsa recurrence_kernel(CpuPrecision precision);

// "cpu (oneDNN sgemm, avx2 LSTM, 2 threads)": what both CPU engines say they are; with an
// emulated precision "..., 2 threads, fp16 products emulated)".
inline std::string engine_description(int threads, const char* lstm_kernel,
                                      Rounding emulated = Rounding::kNone) {
  return std::string("cpu (oneDNN sgemm, ") + lstm_kernel + " LSTM, " + std::to_string(threads) +
         " thread" + (threads > 1 ? "s" : "") +
         (emulated != Rounding::kNone
              ? std::string(", ") + rounding_name(emulated) + " products emulated"
              : std::string()) +
         ")";
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
