// The LSTM recurrence of the CPU engines: h(t-1) times the recurrent weights, the gates and the
// cell update, fused into one pass over weights packed once at load. At one sequence a step is a
// 1 x H by H x 4H product whose weights (256 KB for segmentation-3.0's hidden 128, 1 MB for the
// voice encoder's 256) stay in the core's L2 from step to step; a library sgemm call per step
// re-reads them in its own layout and pays its dispatch every time, and the gates then make a
// second pass over the product. Here each block of hidden units streams its weights once per step,
// the accumulators become gates in registers, and several sequences (or both directions of one)
// share each weight load. Compiled for AVX-512, AVX2 and plain C++, picked at run time.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "engines/cpu/emulated_precision.h"

namespace speakerseg::cpu {

// Instruction sets the kernel is built for, best first. kAvx512Bf16 is not a better set but a
// lower precision (products in bf16, see lstm_recurrence_avx512_bf16.cpp): only on request.
enum class LstmIsa { kAvx512, kAvx2, kScalar, kAvx512Bf16 };

// The best fp32 set this CPU runs, or the one SPEAKERSEG_CPU_ISA names (avx512, avx2, scalar: to
// compare them, or to step down past a faulty one) when this CPU runs it.
LstmIsa lstm_isa();
bool lstm_isa_supported(LstmIsa isa);
const char* lstm_isa_name(LstmIsa isa);

// One direction's recurrent weights R [4H][H] (ONNX gate order i, o, f, c) and bias [4H], laid out
// for one instruction set: per block of W hidden units (W = the vector width), for each input k,
// the W rows of each gate: [H/W][H][4][W]; in bf16, for each pair of inputs: [H/W][H/2][4][W][2].
// `emulated` (an fp32 set only): the weights rounded to that format, and the kernel rounds each
// h(t) it writes, so that every product it and the layers after it take has rounded operands
// (emulated_precision.h); bias, gates and cell stay fp32.
class PackedLstmWeights {
 public:
  PackedLstmWeights(const float* recurrent, const float* bias, int hidden, LstmIsa isa,
                    Rounding emulated = Rounding::kNone);

  int hidden() const { return hidden_; }
  LstmIsa isa() const { return isa_; }
  Rounding emulated() const { return emulated_; }
  const void* data() const { return packed_; }
  const float* bias() const { return bias_.data(); }

 private:
  int hidden_;
  LstmIsa isa_;
  Rounding emulated_;
  std::vector<float> storage_;  // packed_ is storage_ aligned to 64 bytes
  void* packed_ = nullptr;
  std::vector<float> bias_;
};

// One direction of `sequences` sequences. Row (b, t) of the input projection (4H values, gate
// order i, o, f, c, without bias) is at gates + b * gates_sequence + t * gates_step; the hidden
// state h(t) of sequence b is written at hidden + b * hidden_sequence + t * hidden_step. `cell`
// holds sequences x H floats of scratch. Reverse runs t = steps - 1 down to 0.
struct LstmRecurrenceJob {
  const PackedLstmWeights* weights = nullptr;
  const float* gates = nullptr;
  size_t gates_sequence = 0, gates_step = 0;
  float* hidden = nullptr;
  size_t hidden_sequence = 0, hidden_step = 0;
  float* cell = nullptr;
  int sequences = 0;
  bool reverse = false;
};

// Runs the jobs' recurrences from zero states through `steps` steps, all on the calling thread
// and in lockstep: independent jobs (two directions, two groups of sequences) interleaved step by
// step keep more of the core busy than one after the other. Every job's weights must be packed
// for the same instruction set.
void run_lstm_recurrence(const LstmRecurrenceJob* jobs, int count, int steps);

// One job on up to `threads` threads (an OpenMP team): each computes its share of the hidden units,
// and a step begins when all of the step before is done, since its product needs all of h(t-1)
// (shared_steps.h, which also copes with a thread the OS has descheduled). For one sequence on
// several cores, which the lockstep above cannot spread, or a few whose weights do not fit one
// core's cache: each core streams only its share of the recurrent weights (half of the voice
// encoder's 1 MB on two cores, which then fits a 512 KB L2), once for all the job's sequences.
// The numbers are exactly run_lstm_recurrence's, bit for bit.
void run_lstm_recurrence_split(const LstmRecurrenceJob& job, int steps, int threads);

}  // namespace speakerseg::cpu
