// The CUDA engine's forward-pass operations done on the host, each as its documentation says (in
// double where it sums): cuBLAS's column-major products, the kernels of cuda_kernels.h, cuDNN's
// LSTM reading a weight space packed by the engine's packer. test_cuda_forward_pass runs the
// engine's pass through them against ONNX Runtime; test_cuda_engine compares a GPU pass with them
// stage by stage, so that a GPU failure names its stage. Given a cpu::Rounding, the products (and
// the LSTM's) round both operands to that format first: tensor-core math emulated as the CPU
// engine's emulated precisions do (core/engines/cpu/emulated_precision.h), for holding a GPU's
// reduced-precision pass to.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "common/reference_lstm.h"
#include "engines/cpu/emulated_precision.h"
#include "engines/cuda/cudnn_lstm_weights.h"
#include "engines/cuda/forward_pass.h"
#include "model/segmentation_model.h"

namespace speakerseg::test {

// Each operation as its documentation says, in double where it sums.
class HostOps final : public cuda::ForwardOps {
 public:
  // `fp32_sinc`: SincNet's two products (named "SincNet, ...") unrounded, as the CPU engine's
  // *-emulated-fp32-sinc precisions.
  HostOps(const SegmentationModel& model, int frames, cpu::Rounding rounding = cpu::Rounding::kNone,
          bool fp32_sinc = false)
      : frames_(frames), rounding_(rounding), fp32_sinc_(fp32_sinc) {
    const size_t bytes = test::scrambled_layout(&slots_);
    weight_space_ = cudnn::pack_lstm_weights(model, slots_, bytes);
  }

  void gemm(bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
            float beta, float* c, int ldc, const char* what) override {
    const bool sinc = std::strncmp(what, "SincNet", 7) == 0;
    if (rounding_ != cpu::Rounding::kNone && !(sinc && fp32_sinc_)) {
      // Rounded copies of the spans the product reads (column-major: the last column's rows).
      const std::vector<float> ra = cpu::rounded_copy(
          rounding_, a, static_cast<size_t>(lda) * ((ta ? m : k) - 1) + (ta ? k : m));
      const std::vector<float> rb = cpu::rounded_copy(
          rounding_, b, static_cast<size_t>(ldb) * ((tb ? k : n) - 1) + (tb ? n : k));
      return product(ta, tb, m, n, k, ra.data(), lda, rb.data(), ldb, beta, c, ldc);
    }
    product(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
  }

  void gemm_strided_batched(bool ta, bool tb, int m, int n, int k, const float* a, int lda,
                            int64_t stride_a, const float* b, int ldb, int64_t stride_b, float beta,
                            float* c, int ldc, int64_t stride_c, int count,
                            const char* what) override {
    for (int i = 0; i < count; ++i)
      gemm(ta, tb, m, n, k, a + i * stride_a, lda, b + i * stride_b, ldb, beta, c + i * stride_c,
           ldc, what);
  }

  void wave_norm(float* x, int batch, int samples, float scale, float bias, float eps) override {
    for (int w = 0; w < batch; ++w) {
      float* v = x + static_cast<size_t>(w) * samples;
      double sum = 0, sq = 0;
      for (int i = 0; i < samples; ++i) sum += v[i];
      const double mean = sum / samples;
      for (int i = 0; i < samples; ++i) sq += (v[i] - mean) * (v[i] - mean);
      const double inv = 1.0 / std::sqrt(sq / samples + eps);
      for (int i = 0; i < samples; ++i)
        v[i] = static_cast<float>((v[i] - mean) * inv * scale + bias);
    }
  }

  void sinc_im2col(const float* wave, int samples, int rows_per_window, int64_t first_row, int rows,
                   float* out) override {
    constexpr int kSide = cuda::kSincSide;
    for (int local = 0; local < rows; ++local) {
      const int64_t row = first_row + local;
      const float* p = wave + row / rows_per_window * samples + row % rows_per_window * kSincStride;
      float* o = out + static_cast<size_t>(local) * cuda::kSincLd;
      for (int k = 0; k < kSide; ++k) {
        o[k] = p[k] + p[2 * kSide - k];
        o[cuda::kSincDiffColumn + k] = p[k] - p[2 * kSide - k];
      }
      o[kSide] = p[kSide];
    }
  }

  void abs_max_pool3(const float* in, int out_rows, int channels, float* out) override {
    for (int r = 0; r < out_rows; ++r)
      for (int c = 0; c < channels; ++c) {
        float v = 0;
        for (int j = 0; j < 3; ++j)
          v = std::max(v, std::fabs(in[(static_cast<size_t>(3) * r + j) * channels + c]));
        out[static_cast<size_t>(r) * channels + c] = v;
      }
  }

  void pool_norm_leaky(const float* in, int pool, int batch, int rows, int channels,
                       const float* scale, const float* bias, float eps, float slope,
                       float* out) override {
    std::vector<float> pooled(static_cast<size_t>(rows) * channels);
    for (int w = 0; w < batch; ++w) {
      const float* x = in + static_cast<size_t>(w) * rows * pool * channels;
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < channels; ++c) {
          float v = x[static_cast<size_t>(r) * pool * channels + c];
          for (int j = 1; j < pool; ++j)
            v = std::max(v, x[(static_cast<size_t>(r) * pool + j) * channels + c]);
          pooled[static_cast<size_t>(r) * channels + c] = v;
        }
      float* y = out + static_cast<size_t>(w) * rows * channels;  // may be `in` when pool is 1
      for (int c = 0; c < channels; ++c) {
        double sum = 0, sq = 0;
        for (int r = 0; r < rows; ++r) sum += pooled[static_cast<size_t>(r) * channels + c];
        const double mean = sum / rows;
        for (int r = 0; r < rows; ++r) {
          const double d = pooled[static_cast<size_t>(r) * channels + c] - mean;
          sq += d * d;
        }
        const double inv = 1.0 / std::sqrt(sq / rows + eps);
        for (int r = 0; r < rows; ++r) {
          const double v =
              (pooled[static_cast<size_t>(r) * channels + c] - mean) * inv * scale[c] + bias[c];
          y[static_cast<size_t>(r) * channels + c] = static_cast<float>(v < 0 ? v * slope : v);
        }
      }
    }
  }

  void bias_leaky(float* x, int rows, int n, const float* bias, float slope) override {
    for (size_t i = 0; i < static_cast<size_t>(rows) * n; ++i) {
      const float v = x[i] + bias[i % n];
      x[i] = v < 0.f ? v * slope : v;
    }
  }

  void bias_log_softmax(float* x, int rows, int n, const float* bias) override {
    for (int r = 0; r < rows; ++r) {
      float* row = x + static_cast<size_t>(r) * n;
      double top = -INFINITY, sum = 0;
      for (int k = 0; k < n; ++k) top = std::max(top, static_cast<double>(row[k] + bias[k]));
      for (int k = 0; k < n; ++k) sum += std::exp(row[k] + bias[k] - top);
      for (int k = 0; k < n; ++k)
        row[k] = static_cast<float>(row[k] + bias[k] - top - std::log(sum));
    }
  }

  // Each window's sequence through cuDNN's LSTM as the packed weight space defines it.
  void lstm(const float* features, float* out) override {
    for (int w = 0; w < batch_; ++w) {
      const float* f = features + static_cast<size_t>(w) * frames_ * kConvChannels;
      const std::vector<float> y =
          test::cudnn_lstm(weight_space_, slots_,
                           std::vector<float>(f, f + static_cast<size_t>(frames_) * kConvChannels),
                           frames_, rounding_ == cpu::Rounding::kNone ? nullptr : round_);
      std::copy(y.begin(), y.end(), out + static_cast<size_t>(w) * frames_ * kLstmOutput);
    }
  }

  void stage_done(int stage) override {
    stages_.push_back(stage);
    if (on_stage) on_stage(stage);
  }
  // Called as each stage is done, while its output is still in the arena.
  std::function<void(int stage)> on_stage;

  void set_batch(int batch) { batch_ = batch; }
  const std::vector<int>& stages() const { return stages_; }

 private:
  // c = op(a) op(b) + beta c, summed in double.
  static void product(bool ta, bool tb, int m, int n, int k, const float* a, int lda,
                      const float* b, int ldb, float beta, float* c, int ldc) {
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        double sum = 0;
        for (int l = 0; l < k; ++l) {
          const float av =
              ta ? a[l + static_cast<size_t>(i) * lda] : a[i + static_cast<size_t>(l) * lda];
          const float bv =
              tb ? b[j + static_cast<size_t>(l) * ldb] : b[l + static_cast<size_t>(j) * ldb];
          sum += static_cast<double>(av) * bv;
        }
        float& out = c[i + static_cast<size_t>(j) * ldc];
        out = static_cast<float>(sum + (beta != 0.f ? static_cast<double>(beta) * out : 0.0));
      }
  }

  static float (*round_of(cpu::Rounding r))(float) {
    switch (r) {
      case cpu::Rounding::kFp16:
        return cpu::round_to_fp16;
      case cpu::Rounding::kBf16:
        return cpu::round_to_bf16;
      case cpu::Rounding::kTf32:
        return cpu::round_to_tf32;
      case cpu::Rounding::kNone:
        break;
    }
    return nullptr;
  }

  int frames_, batch_ = 0;
  cpu::Rounding rounding_;
  bool fp32_sinc_;
  float (*round_)(float) = round_of(rounding_);
  std::vector<cudnn::WeightSlot> slots_;
  std::vector<char> weight_space_;
  std::vector<int> stages_;
};

}  // namespace speakerseg::test
