// The fused LSTM recurrence in plain C++, one lane: for CPUs without AVX2 and for other
// architectures. Four blocks at once give the compiler independent chains to schedule.
#include <cstdint>
#include <cstring>

#include "engines/cpu/lstm_recurrence_kernel.h"

namespace speakerseg::cpu::isa {
namespace {

struct Scalar : Fp32Product<Scalar> {
  using V = float;
  static constexpr int kWidth = kScalarWidth, kMaxSequences = 4, kBlocksPerPass = 4;
  static V set(float x) { return x; }
  static V load(const float* p) { return *p; }
  static void store(float* p, V v) { *p = v; }
  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  static V mul(V a, V b) { return a * b; }
  static V div(V a, V b) { return a / b; }
  static V min(V a, V b) { return a < b ? a : b; }
  static V max(V a, V b) { return a > b ? a : b; }
  static V fma(V a, V b, V c) { return a * b + c; }
  static V pow2(V n) {
    const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
    float out;
    std::memcpy(&out, &bits, sizeof out);
    return out;
  }
};

}  // namespace

void run_scalar(const RecurrenceTask* tasks, int count, int steps, int hidden, int from, int to) {
  run_tasks<Scalar>(tasks, count, steps, hidden, from, to);
}

}  // namespace speakerseg::cpu::isa
