// An fp32 value's bit pattern and back (std::bit_cast before C++20): what the host-side roundings
// to narrower formats (bf16.h, emulated_precision.cpp) and their tests work on.
#pragma once

#include <cstdint>
#include <cstring>

namespace speakerseg::cpu {

inline uint32_t float_bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

inline float bits_float(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

}  // namespace speakerseg::cpu
