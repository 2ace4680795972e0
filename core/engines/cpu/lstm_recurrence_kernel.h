// The fused LSTM recurrence, written once over a small set of vector operations `O` (one struct
// per instruction set, in lstm_recurrence_<set>.cpp). Everything here has internal linkage: each
// per-set file gets its own copy, compiled for its own set.
//
// Per step and block of W hidden units, the accumulators of the four gates start from the input
// projection plus bias, take h(t-1)[k] times row k of the packed block for every k (one broadcast,
// four loads and 4 x S fused multiply-adds per k for S sequences), and become gates, cell and
// hidden state without leaving registers. exp is Cephes' expf polynomial (~2 ulp): libm's is a
// scalar call and would cost more than the products.
#pragma once

#include "engines/cpu/lstm_recurrence_isa.h"

namespace speakerseg::cpu::isa {
namespace {

// The product of the fp32 kernels: per input k and gate one vector of W weights, times h(t-1)[k]
// broadcast. The bf16 kernel (lstm_recurrence_avx512_bf16.cpp) brings its own: pairs of inputs.
template <class Self>
struct Fp32Product {
  using Weight = float;
  using Hidden = float;
  static constexpr int kPairs = 1;  // inputs per weight lane
  static auto splat_hidden(const Hidden* h, int k) { return Self::set(h[k]); }
  static auto load_weights(const Weight* w) { return Self::load(w); }
  template <class V>
  static V multiply_add(V w, V h, V acc) {
    return Self::fma(w, h, acc);
  }
};

template <class O>
inline typename O::V exp_v(typename O::V x) {
  using V = typename O::V;
  x = O::max(x, O::set(-87.f));
  x = O::min(x, O::set(88.f));
  const V round = O::set(12582912.f);  // 1.5 * 2^23: adding and subtracting it rounds
  const V n = O::sub(O::fma(x, O::set(1.44269504088896341f), round), round);
  V r = O::fma(n, O::set(-0.693359375f), x);
  r = O::fma(n, O::set(2.12194440e-4f), r);
  V p = O::set(1.9875691500e-4f);
  p = O::fma(p, r, O::set(1.3981999507e-3f));
  p = O::fma(p, r, O::set(8.3334519073e-3f));
  p = O::fma(p, r, O::set(4.1665795894e-2f));
  p = O::fma(p, r, O::set(1.6666665459e-1f));
  p = O::fma(p, r, O::set(5.0000001201e-1f));
  p = O::fma(O::mul(p, r), r, O::add(r, O::set(1.f)));
  return O::mul(p, O::pow2(n));
}

template <class O>
inline typename O::V sigmoid_v(typename O::V x) {
  const typename O::V one = O::set(1.f);
  return O::div(one, O::add(one, exp_v<O>(O::sub(O::set(0.f), x))));
}

template <class O>
inline typename O::V tanh_v(typename O::V x) {
  const typename O::V one = O::set(1.f);
  return O::sub(one, O::div(O::set(2.f), O::add(one, exp_v<O>(O::add(x, x)))));
}

// V consecutive blocks of W hidden units, S sequences: 4 * V * S accumulators.
template <class O, int V, int S>
inline void block_step(const typename O::Weight* packed, const float* bias, int hidden, int j0,
                       const float* const* pre, const typename O::Hidden* const* prev,
                       float* const* cell, float* const* out) {
  constexpr int W = O::kWidth, P = O::kPairs;
  using Vec = typename O::V;
  const size_t block_elements = static_cast<size_t>(hidden) * 4 * W;
  Vec acc[4][V][S];
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      const int col = g * hidden + j0 + v * W;
      const Vec b = O::load(bias + col);
#pragma GCC unroll 8
      for (int s = 0; s < S; ++s) acc[g][v][s] = O::add(O::load(pre[s] + col), b);
    }
  if (prev) {
    const typename O::Weight* w = packed + static_cast<size_t>(j0 / W) * block_elements;
    for (int k = 0; k < hidden; k += P) {
      decltype(O::splat_hidden(prev[0], 0)) h[S];
#pragma GCC unroll 8
      for (int s = 0; s < S; ++s) h[s] = O::splat_hidden(prev[s], k);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v)
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g) {
          const auto wv =
              O::load_weights(w + v * block_elements + (static_cast<size_t>(k) * 4 + g * P) * W);
#pragma GCC unroll 8
          for (int s = 0; s < S; ++s) acc[g][v][s] = O::multiply_add(wv, h[s], acc[g][v][s]);
        }
    }
  }
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v)
#pragma GCC unroll 8
    for (int s = 0; s < S; ++s) {
      const Vec i = sigmoid_v<O>(acc[0][v][s]);
      const Vec o = sigmoid_v<O>(acc[1][v][s]);
      const Vec f = sigmoid_v<O>(acc[2][v][s]);
      const Vec c_in = tanh_v<O>(acc[3][v][s]);
      float* c_ptr = cell[s] + j0 + v * W;
      const Vec c = O::fma(f, O::load(c_ptr), O::mul(i, c_in));
      O::store(c_ptr, c);
      O::store(out[s] + j0 + v * W, O::mul(o, tanh_v<O>(c)));
    }
}

// Blocks [j, j + V) of S sequences from b0 on, at step t (prev_t < 0: the first step).
template <class O, int V, int S>
inline void sequences_step(const RecurrenceTask& task, int hidden, int b0, int j, int t,
                           int prev_t) {
  const float* pre[S];
  const float* prev[S];
  float* cell[S];
  float* out[S];
#pragma GCC unroll 8
  for (int s = 0; s < S; ++s) {
    const size_t b = static_cast<size_t>(b0 + s);
    pre[s] = task.gates + b * task.gates_sequence + static_cast<size_t>(t) * task.gates_step;
    prev[s] = task.hidden + b * task.hidden_sequence +
              static_cast<size_t>(prev_t < 0 ? 0 : prev_t) * task.hidden_step;
    cell[s] = task.cell + b * hidden;
    out[s] = task.hidden + b * task.hidden_sequence + static_cast<size_t>(t) * task.hidden_step;
  }
  // The bf16 kernel multiplies by h(t-1) rounded to bf16 pairs, converted once per call into the
  // stack (hidden <= kBf16MaxHidden); the fp32 kernels read h(t-1) where it is.
  constexpr bool kConvert = O::kPairs > 1;
  alignas(64) typename O::Hidden pairs[kConvert ? S : 1][kConvert ? kBf16MaxHidden / 2 : 1];
  const typename O::Hidden* hidden_in[S];
#pragma GCC unroll 8
  for (int s = 0; s < S; ++s) {
    if constexpr (kConvert) {
      if (prev_t >= 0) O::to_pairs(prev[s], hidden, pairs[s]);
      hidden_in[s] = pairs[s];
    } else {
      hidden_in[s] = prev[s];
    }
  }
  block_step<O, V, S>(static_cast<const typename O::Weight*>(task.packed), task.bias, hidden,
                      j * O::kWidth, pre, prev_t < 0 ? nullptr : hidden_in, cell, out);
  // An emulated precision rounds the V blocks of h(t) just written, before any step reads them.
  // Here, not at each store in block_step: a call that may happen inside its loop makes the
  // compiler spill the accumulators around it (the fp32 recurrence ran 15 % slower at batch 1).
  if (task.round_hidden)
    for (int s = 0; s < S; ++s) task.round_hidden(out[s] + j * O::kWidth, V * O::kWidth);
}

// One block for the S (or, at the tail, fewer) sequences from b0 on.
template <class O, int S>
inline void chunk_step(const RecurrenceTask& task, int hidden, int b0, int left, int j, int t,
                       int prev_t) {
  if constexpr (S > 1) {
    if (left < S) return chunk_step<O, S - 1>(task, hidden, b0, left, j, t, prev_t);
  }
  sequences_step<O, 1, S>(task, hidden, b0, j, t, prev_t);
}

template <class O>
inline void task_step(const RecurrenceTask& task, int hidden, int t, int prev_t) {
  const int blocks = task.block_end - task.block_begin;
  if (task.sequences == 1 && blocks % O::kBlocksPerPass == 0) {
    // One sequence: several blocks at once for enough independent accumulators.
    for (int j = task.block_begin; j < task.block_end; j += O::kBlocksPerPass)
      sequences_step<O, O::kBlocksPerPass, 1>(task, hidden, 0, j, t, prev_t);
    return;
  }
  // Block by block, all sequences: a block's weights (H x 4W floats: 16 KB for AVX2 at hidden
  // 128) come from L2 for the first chunk of sequences and from L1 for the others.
  for (int j = task.block_begin; j < task.block_end; ++j)
    for (int b0 = 0; b0 < task.sequences; b0 += O::kMaxSequences)
      chunk_step<O, O::kMaxSequences>(task, hidden, b0, task.sequences - b0, j, t, prev_t);
}

template <class O>
inline void run_tasks(const RecurrenceTask* tasks, int count, int steps, int hidden, int from,
                      int to) {
  if (from == 0)
    for (int i = 0; i < count; ++i)
      for (int b = 0; b < tasks[i].sequences; ++b)
        for (int j = tasks[i].block_begin * O::kWidth; j < tasks[i].block_end * O::kWidth; ++j)
          tasks[i].cell[static_cast<size_t>(b) * hidden + j] = 0.f;
  for (int s = from; s < to; ++s)
    for (int i = 0; i < count; ++i) {
      const RecurrenceTask& task = tasks[i];
      const int t = task.reverse ? steps - 1 - s : s;
      task_step<O>(task, hidden, t, s == 0 ? -1 : task.reverse ? t + 1 : t - 1);
    }
}

}  // namespace
}  // namespace speakerseg::cpu::isa
