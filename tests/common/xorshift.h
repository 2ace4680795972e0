// A fixed pseudo-random sequence for tests that churn at random: the same seed gives the same run
// on every machine, and each thread owns its own generator.
#pragma once

#include <cstdint>

namespace speakerseg::test {

class Xorshift {
 public:
  explicit Xorshift(uint32_t seed) : state_(seed ? seed : 1) {}
  // The next value in [0, n).
  uint32_t below(uint32_t n) {
    state_ ^= state_ << 13, state_ ^= state_ >> 17, state_ ^= state_ << 5;
    return state_ % n;
  }

 private:
  uint32_t state_;
};

}  // namespace speakerseg::test
