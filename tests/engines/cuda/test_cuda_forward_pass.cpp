// The CUDA engine's forward pass (core/cuda/forward_pass.cpp) run on the CPU, on every machine:
// the same sequence of operations over the same arena and parameter block that the engine
// enqueues on a GPU, each operation done here by a plain host version of its documented contract
// (cuBLAS's column-major products, the kernels of cuda_kernels.h, cuDNN's LSTM reading a weight
// space packed by the engine's packer). Held to ONNX Runtime like every engine, it checks what no
// CPU-only build could otherwise check: every buffer offset, leading dimension and stride the
// engine passes, the SincNet chunking (also with chunks that straddle windows), the stage order
// and the parameter packing. What it cannot check is the CUDA code itself: the kernels' bodies,
// cuBLAS, cuDNN and the graphs (tests/test_cuda_engine.cpp does, on a GPU).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/parity.h"
#include "common/reference_lstm.h"
#include "common/test_env.h"
#include "engines/cuda/cudnn_lstm_weights.h"
#include "engines/cuda/forward_pass.h"
#include "io/npy.h"
#include "model/segmentation_model.h"

namespace speakerseg {
namespace {

// Each operation as its documentation says, in double where it sums.
class HostOps final : public cuda::ForwardOps {
 public:
  HostOps(const SegmentationModel& model, int frames) : frames_(frames) {
    const size_t bytes = test::scrambled_layout(&slots_);
    weight_space_ = cudnn::pack_lstm_weights(model, slots_, bytes);
  }

  void gemm(bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
            float beta, float* c, int ldc, const char*) override {
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
      const std::vector<float> y = test::cudnn_lstm(
          weight_space_, slots_,
          std::vector<float>(f, f + static_cast<size_t>(frames_) * kConvChannels), frames_);
      std::copy(y.begin(), y.end(), out + static_cast<size_t>(w) * frames_ * kLstmOutput);
    }
  }

  void stage_done(int stage) override { stages_.push_back(stage); }

  void set_batch(int batch) { batch_ = batch; }
  const std::vector<int>& stages() const { return stages_; }

 private:
  int frames_, batch_ = 0;
  std::vector<cudnn::WeightSlot> slots_;
  std::vector<char> weight_space_;
  std::vector<int> stages_;
};

// The first `batch` windows of a reference case through the engine's forward pass, with
// `sinc_chunk` im2col rows per SincNet product (0: what the engine would take).
struct PassResult {
  std::vector<float> logprobs, reference;
  std::vector<int> stages;
};

PassResult run_case(const std::string& name, const std::string& model_path, int batch,
                    int sinc_chunk) {
  const std::string dir = test::reference_dir();
  const NpyArray input = read_npy(dir + "/" + name + ".input.npy");
  const NpyArray reference = read_npy(dir + "/" + name + ".logprobs.npy");
  const int samples = static_cast<int>(input.shape.at(1));
  const int frames = frames_for_samples(samples);
  const auto model = SegmentationModel::load_onnx(model_path);

  cuda::ForwardPass pass;
  pass.model = model.get();
  std::vector<float> params = cuda::pack_parameters(*model, &pass.param_layout);
  pass.params = params.data();
  pass.batch = batch;
  pass.samples = samples;
  pass.sinc_chunk = sinc_chunk ? sinc_chunk : cuda::sinc_chunk_rows(batch, samples);
  pass.layout = cuda::place_buffers(batch, samples, pass.sinc_chunk, 0);
  // NaN everywhere: a stage that reads what no stage wrote shows up in the output.
  std::vector<float> arena(pass.layout.total / sizeof(float) + 1, NAN);
  pass.arena = reinterpret_cast<char*>(arena.data());
  std::copy(input.data.begin(), input.data.begin() + static_cast<size_t>(batch) * samples,
            reinterpret_cast<float*>(pass.arena + pass.layout.wave));

  HostOps ops(*model, frames);
  ops.set_batch(batch);
  cuda::run_forward_pass(pass, ops);

  PassResult r;
  const size_t n = static_cast<size_t>(batch) * frames * kClasses;
  const float* out = reinterpret_cast<const float*>(pass.arena + pass.layout.logprobs);
  r.logprobs.assign(out, out + n);
  r.reference.assign(reference.data.begin(), reference.data.begin() + n);
  r.stages = ops.stages();
  return r;
}

void expect_parity(const PassResult& r, const std::string& what) {
  const test::Comparison cmp = test::compare(r.logprobs, r.reference);
  std::printf("[ cuda-pass ] %-40s max |diff| %.3g, flips %d (+%d at near-ties)\n", what.c_str(),
              cmp.max_diff_all, cmp.flips, cmp.ties_flipped);
  EXPECT_TRUE(cmp.finite) << what;
  EXPECT_LE(cmp.max_diff_all, test::kParityTolerance) << what;
  EXPECT_EQ(cmp.flips, 0) << what;
}

TEST(CudaForwardPass, OnTheCpuMatchesOnnxRuntime) {
  for (const char* name : {"first_window", "last_partial", "five_seconds"}) {
    const PassResult r = run_case(name, test::model_path(), 1, 0);
    expect_parity(r, name);
    EXPECT_EQ(r.stages, (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9})) << "stages out of order";
  }
  const PassResult computed =
      run_case("sinc_computed", test::reference_dir() + "/sinc_computed.onnx", 1, 0);
  expect_parity(computed, "sinc_computed (filters computed at load)");
}

// The engine cuts the SincNet im2col into chunks of up to 98 304 rows (six windows and a bit);
// chunks of 12 000 rows (each window has 15 975) put boundaries inside windows and across them.
TEST(CudaForwardPass, SincChunksThatStraddleWindowsChangeNothing) {
  const PassResult chunked = run_case("batch32", test::model_path(), 3, 12000);
  expect_parity(chunked, "batch32, 3 windows, 12 000-row chunks");
  const PassResult whole = run_case("batch32", test::model_path(), 3, 0);
  EXPECT_EQ(chunked.logprobs, whole.logprobs);
}

}  // namespace
}  // namespace speakerseg
