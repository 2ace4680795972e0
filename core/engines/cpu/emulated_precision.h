// Emulated reduced precision: what tensor-core math does to a forward pass, on any x86 CPU, for
// measuring its accuracy (not a speed mode: the emulation runs slower than fp32). A tensor core
// multiplies operands held in fp16, bf16 or tf32 and adds the products into fp32 sums, so a product
// whose two operands are first rounded to the format and then multiplied and summed in fp32 gives
// the same result up to the order of the sums. The CPU engines' `precision` fp16-emulated,
// bf16-emulated and tf32-emulated (cpu_engine.h) round every matrix product's operands this way
// (weights once at load, activations before each product) and keep everything else (sums, LSTM
// cell state, nonlinearities, SincNet's pairs, pooling and norms) in fp32;
// tests/engines/cuda/host_forward_ops.h gives the CUDA pass's host version the same rounding.
//
// The rounding is IEEE round to nearest, ties to even, as the conversions feeding tensor cores do
// (cvt.rn.f16.f32, cvt.rn.bf16.f32); NaN stays NaN, infinities stay infinite.
//   fp16: 10-bit mantissa, 5-bit exponent: |x| >= 65520 becomes infinite, below 2^-14 the
//         subnormals (steps of 2^-24), below 2^-25 zero.
//   bf16: 7-bit mantissa (8 significant bits), fp32's exponent range.
//   tf32: 10-bit mantissa (11 significant bits), fp32's exponent range.
// Plain functions, not inline: the per-instruction-set LSTM kernels call them (round_function)
// and must not share inline code with other files (lstm_recurrence_isa.h).
#pragma once

#include <cstddef>
#include <vector>

namespace speakerseg::cpu {

enum class Rounding { kNone, kFp16, kBf16, kTf32 };

// "none", "fp16", "bf16", "tf32".
const char* rounding_name(Rounding rounding);

float round_to_fp16(float x);
float round_to_bf16(float x);
float round_to_tf32(float x);
// x itself for kNone.
float rounded(Rounding rounding, float x);

void round_in_place(Rounding rounding, float* x, size_t n);
std::vector<float> rounded_copy(Rounding rounding, const float* x, size_t n);

// A function rounding n floats in place, for the LSTM kernels' hidden state; null for kNone.
using RoundFunction = void (*)(float* x, int n);
RoundFunction round_function(Rounding rounding);

}  // namespace speakerseg::cpu
