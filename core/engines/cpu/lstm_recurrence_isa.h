// What the dispatcher (lstm_recurrence.cpp) hands to the kernel built for one instruction set:
// plain data only. The per-set files are compiled with their own -m flags, so they must not
// instantiate any inline function or template that other files also instantiate (the linker keeps
// one copy, perhaps the AVX-512 one, for everybody): no standard library containers in here.
#pragma once

#include <cstddef>
#include <cstdint>

namespace speakerseg::cpu::isa {

struct RecurrenceTask {
  const void* packed;  // fp32 [H/W][H][4][W]; bf16 [H/W][H/2][4][W][2]
  const float* bias;   // [4H]
  const float* gates;
  size_t gates_sequence, gates_step;
  float* hidden;
  size_t hidden_sequence, hidden_step;
  float* cell;
  int sequences;
  int block_begin, block_end;  // the blocks of W hidden units it computes, of hidden / W
  bool reverse;
  // Null, or what rounds each h(t) the task writes, n floats in place (an emulated precision:
  // emulated_precision.h; a plain function in a file of its own, so no shared inline code).
  void (*round_hidden)(float* h, int n);
};

// Each runs `count` tasks in lockstep through steps [from, to) of `steps` (from 0: from zero
// states, which it sets in its blocks of the cell); all have the same hidden size, a multiple of
// the set's width. A task with part of the blocks leaves the others' h(t) to whoever computes
// them, and reads them at t + 1: the caller steps such parts one step at a time, meeting between.
void run_avx512(const RecurrenceTask* tasks, int count, int steps, int hidden, int from, int to);
void run_avx2(const RecurrenceTask* tasks, int count, int steps, int hidden, int from, int to);
void run_scalar(const RecurrenceTask* tasks, int count, int steps, int hidden, int from, int to);
// Products in bf16 (weights and h(t-1) rounded to bf16, sums in fp32: AVX512_BF16's vdpbf16ps);
// hidden a multiple of 32, at most kBf16MaxHidden.
void run_avx512_bf16(const RecurrenceTask* tasks, int count, int steps, int hidden, int from,
                     int to);

constexpr int kAvx512Width = 16, kAvx2Width = 8, kScalarWidth = 1;
constexpr int kBf16MaxHidden = 512;

}  // namespace speakerseg::cpu::isa
