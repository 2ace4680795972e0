// oneDNN's sgemm takes its thread count from OpenMP: outside our parallel regions a call would use
// every core whatever its caller was given, and every thread that calls it keeps a team of its
// own. A count for the scope of one call, and the caller's setting back afterwards, also when the
// call throws.
#pragma once

#include <omp.h>

namespace speakerseg::cpu {

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

}  // namespace speakerseg::cpu
