#include "engines/cpu/lstm_recurrence.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "engines/cpu/bf16.h"
#include "engines/cpu/lstm_recurrence_isa.h"
#include "engines/cpu/shared_steps.h"

namespace speakerseg::cpu {
namespace {

int width_of(LstmIsa isa) {
  switch (isa) {
    case LstmIsa::kAvx512:
    case LstmIsa::kAvx512Bf16:
      return isa::kAvx512Width;
    case LstmIsa::kAvx2:
      return isa::kAvx2Width;
    case LstmIsa::kScalar:
      break;
  }
  return isa::kScalarWidth;
}

LstmIsa detect() {
  LstmIsa best = LstmIsa::kScalar;
  for (LstmIsa isa : {LstmIsa::kAvx2, LstmIsa::kAvx512})
    if (lstm_isa_supported(isa)) best = isa;
  if (const char* forced = std::getenv("SPEAKERSEG_CPU_ISA"); forced && *forced) {
    for (LstmIsa isa : {LstmIsa::kAvx512, LstmIsa::kAvx2, LstmIsa::kScalar})
      if (std::strcmp(forced, lstm_isa_name(isa)) == 0 && lstm_isa_supported(isa)) return isa;
  }
  return best;
}

}  // namespace

bool lstm_isa_supported(LstmIsa isa) {
  switch (isa) {
    case LstmIsa::kScalar:
      return true;
#if defined(__x86_64__)
    case LstmIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case LstmIsa::kAvx512:
      return __builtin_cpu_supports("avx512f");
    case LstmIsa::kAvx512Bf16:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
#else
    default:
      return false;
#endif
  }
  return false;
}

const char* lstm_isa_name(LstmIsa isa) {
  switch (isa) {
    case LstmIsa::kAvx512:
      return "avx512";
    case LstmIsa::kAvx512Bf16:
      return "avx512-bf16";
    case LstmIsa::kAvx2:
      return "avx2";
    case LstmIsa::kScalar:
      break;
  }
  return "scalar";
}

LstmIsa lstm_isa() {
  static const LstmIsa isa = detect();
  return isa;
}

PackedLstmWeights::PackedLstmWeights(const float* recurrent, const float* bias, int hidden,
                                     LstmIsa isa, Rounding emulated)
    : hidden_(hidden), isa_(isa), emulated_(emulated), bias_(bias, bias + 4 * hidden) {
  const int width = width_of(isa);
  if (!lstm_isa_supported(isa))
    throw std::invalid_argument(std::string("this CPU does not run the ") + lstm_isa_name(isa) +
                                " LSTM kernel");
  if (hidden <= 0 || hidden % width != 0)
    throw std::invalid_argument("LSTM hidden size " + std::to_string(hidden) +
                                " is not a multiple of the kernel's " + std::to_string(width) +
                                " lanes");
  const bool bf16 = isa == LstmIsa::kAvx512Bf16;
  if (bf16 && emulated != Rounding::kNone)
    throw std::invalid_argument("an emulated precision runs on an fp32 LSTM kernel, not bf16");
  if (bf16 && (hidden % 32 != 0 || hidden > isa::kBf16MaxHidden))
    throw std::invalid_argument(
        "the bf16 LSTM kernel takes hidden sizes that are multiples of 32 "
        "up to " +
        std::to_string(isa::kBf16MaxHidden) + ", not " + std::to_string(hidden));
  const size_t H = hidden, W = width, elements = 4 * H * H;
  storage_.assign((bf16 ? elements / 2 : elements) + 16, 0.f);
  const auto address = reinterpret_cast<std::uintptr_t>(storage_.data());
  float* aligned = storage_.data() + ((64 - address % 64) % 64) / sizeof(float);
  packed_ = aligned;
  auto weight = [&](size_t block, size_t k, size_t g, size_t lane) {
    return rounded(emulated, recurrent[(g * H + block * W + lane) * H + k]);
  };
  if (!bf16) {
    for (size_t block = 0; block < H / W; ++block)
      for (size_t k = 0; k < H; ++k)
        for (size_t g = 0; g < 4; ++g)
          for (size_t lane = 0; lane < W; ++lane)
            aligned[((block * H + k) * 4 + g) * W + lane] = weight(block, k, g, lane);
    return;
  }
  auto* out = static_cast<uint16_t*>(packed_);
  for (size_t block = 0; block < H / W; ++block)
    for (size_t pair = 0; pair < H / 2; ++pair)
      for (size_t g = 0; g < 4; ++g)
        for (size_t lane = 0; lane < W; ++lane)
          for (size_t e = 0; e < 2; ++e)
            out[(((block * H / 2 + pair) * 4 + g) * W + lane) * 2 + e] =
                to_bf16(weight(block, 2 * pair + e, g, lane));
}

namespace {

isa::RecurrenceTask task_of(const LstmRecurrenceJob& job) {
  return {job.weights->data(),
          job.weights->bias(),
          job.gates,
          job.gates_sequence,
          job.gates_step,
          job.hidden,
          job.hidden_sequence,
          job.hidden_step,
          job.cell,
          job.sequences,
          0,
          job.weights->hidden() / width_of(job.weights->isa()),
          job.reverse,
          round_function(job.weights->emulated())};
}

void run_kernel(LstmIsa kernel, const isa::RecurrenceTask* tasks, int count, int steps, int hidden,
                int from, int to) {
  switch (kernel) {
#if defined(__x86_64__)
    case LstmIsa::kAvx512:
      return isa::run_avx512(tasks, count, steps, hidden, from, to);
    case LstmIsa::kAvx2:
      return isa::run_avx2(tasks, count, steps, hidden, from, to);
    case LstmIsa::kAvx512Bf16:
      return isa::run_avx512_bf16(tasks, count, steps, hidden, from, to);
#endif
    default:
      return isa::run_scalar(tasks, count, steps, hidden, from, to);
  }
}

}  // namespace

void run_lstm_recurrence(const LstmRecurrenceJob* jobs, int count, int steps) {
  if (count <= 0 || steps <= 0) return;
  constexpr int kMaxJobs = 16;
  if (count > kMaxJobs) {
    run_lstm_recurrence(jobs, kMaxJobs, steps);
    return run_lstm_recurrence(jobs + kMaxJobs, count - kMaxJobs, steps);
  }
  const PackedLstmWeights& first = *jobs[0].weights;
  isa::RecurrenceTask tasks[kMaxJobs];
  for (int i = 0; i < count; ++i) {
    if (jobs[i].weights->isa() != first.isa() || jobs[i].weights->hidden() != first.hidden())
      throw std::invalid_argument("LSTM recurrence jobs packed for different kernels");
    tasks[i] = task_of(jobs[i]);
  }
  run_kernel(first.isa(), tasks, count, steps, first.hidden(), 0, steps);
}

void run_lstm_recurrence_split(const LstmRecurrenceJob& job, int steps, int threads) {
  if (steps <= 0) return;
  const isa::RecurrenceTask whole = task_of(job);
  // Parts of whole passes of the one-sequence path (kBlocksPerPass: 2 or 4 blocks).
  const int blocks = whole.block_end, quantum = blocks % 4 == 0 ? 4 : blocks % 2 == 0 ? 2 : 1;
  const int units = blocks / quantum;
  if (threads <= 1 || units <= 1) return run_lstm_recurrence(&job, 1, steps);
  SharedSteps shared(steps);
#pragma omp parallel num_threads(std::min({threads, units, SharedSteps::kMaxParts}))
  {
    // The team may be smaller than asked (inside another parallel region: one); it shares out
    // the blocks among those it has.
    const int parts = omp_get_num_threads();
    shared.run(omp_get_thread_num(), parts, [&](int part, int t) {
      isa::RecurrenceTask task = whole;
      task.block_begin = quantum * (units * part / parts);
      task.block_end = quantum * (units * (part + 1) / parts);
      run_kernel(job.weights->isa(), &task, 1, steps, job.weights->hidden(), t, t + 1);
    });
  }
}

}  // namespace speakerseg::cpu
