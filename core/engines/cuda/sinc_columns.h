// The SincNet im2col matrix of the CUDA engine: shared by its kernel (cuda_kernels.cu) and the
// forward pass that sizes and reads it (forward_pass.cpp). No includes, so that nvcc needs none.
#pragma once

namespace speakerseg::cuda {

// Row stride of the matrix: columns [0, 126) hold the pair sums x[k] + x[250-k] (and the centre
// tap), columns [128, 253) the pair differences x[k] - x[250-k].
constexpr int kSincLd = 256;
constexpr int kSincDiffColumn = 128;

}  // namespace speakerseg::cuda
