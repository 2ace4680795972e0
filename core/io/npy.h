// Minimal .npy (NumPy format 1.0) for little-endian float32 C-order arrays: what the tools write
// and what the reference tests read.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace speakerseg {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

void write_npy(const std::string& path, const std::vector<int64_t>& shape, const float* data);
NpyArray read_npy(const std::string& path);  // throws std::runtime_error

}  // namespace speakerseg
