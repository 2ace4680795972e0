// The CUDA engine's forward pass as a sequence of device operations on one arena, apart from the
// calls that carry them out. The engine (cuda_engine.cpp) runs it through cuBLAS, cuDNN and its
// kernels; tests/test_cuda_forward_pass.cpp runs the very same sequence through host versions of
// those operations, so that every buffer offset, leading dimension and stride, the SincNet
// chunking and the order of the stages are checked against ONNX Runtime on machines without a
// GPU. No CUDA header: compiled into core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engines/cuda/sinc_columns.h"
#include "model/model_spec.h"

namespace speakerseg {

struct SegmentationModel;

namespace cuda {

constexpr int kSincSide = (kSincKernel - 1) / 2;  // 125
constexpr int kSincHalf = kSincFilters / 2;       // 40 cosine filters, then 40 sine filters
constexpr int kSincWeightLd = 128;                // padded rows of the two SincNet weight matrices
// Rows of the SincNet im2col matrix per product: bounds its scratch (256 floats a row, 96 MiB)
// whatever the batch. A multiple of 3 so that no pooling triple straddles two chunks.
constexpr int kSincChunkRows = 3 * 32768;

// Where each parameter sits in the one parameter block; offsets in floats, each 256-byte aligned.
struct ParamLayout {
  size_t sinc_even, sinc_odd, conv[2], norm_scale[3], norm_bias[3], head_w[3], head_b[3], total;
};

// The parameter block's host image, laid out as *layout says. The SincNet filters are symmetric
// (cosine half) and antisymmetric (sine half) about the centre tap, which the loader checks: the
// products take pre-added / pre-subtracted sample pairs, half the multiply-adds.
std::vector<float> pack_parameters(const SegmentationModel& model, ParamLayout* layout);

// Where one (batch, samples) shape's buffers sit in its arena; offsets in bytes, 256-aligned.
struct BufferLayout {
  size_t wave, scratch, pool0, pool1, features, lstm_out, logprobs, rnn_work, total;
};

// SincNet im2col rows per product for a batch: all of them, up to kSincChunkRows.
int sinc_chunk_rows(int batch, int samples);

// `rnn_work_bytes`: what the LSTM implementation needs as workspace.
BufferLayout place_buffers(int batch, int samples, int sinc_chunk, size_t rnn_work_bytes);

// The operations a forward pass is made of. Pointers are into the parameter block and the arena
// (device memory in the engine). Matrices are column-major with cuBLAS's conventions.
class ForwardOps {
 public:
  virtual ~ForwardOps() = default;
  // c = op(a) op(b) + beta c; `what` names the product in error messages.
  virtual void gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda,
                    const float* b, int ldb, float beta, float* c, int ldc, const char* what) = 0;
  // gemm() in plain FP32 whatever math the engine allows elsewhere: SincNet's products, whose
  // inputs are the raw waveform. TF32 there costs accuracy (0.055 DER on train-concat, emulated);
  // everywhere else it does not (docs/gpu.md, "Reduced precision, emulated").
  virtual void gemm_fp32(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda,
                         const float* b, int ldb, float beta, float* c, int ldc, const char* what) {
    gemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc, what);
  }
  // The same for `count` matrix triples, each `stride_*` floats after the previous one.
  virtual void gemm_strided_batched(bool trans_a, bool trans_b, int m, int n, int k, const float* a,
                                    int lda, int64_t stride_a, const float* b, int ldb,
                                    int64_t stride_b, float beta, float* c, int ldc,
                                    int64_t stride_c, int count, const char* what) = 0;
  // The kernels of cuda_kernels.h, with the same arguments (that header says what each does).
  virtual void wave_norm(float* x, int batch, int samples, float scale, float bias, float eps) = 0;
  virtual void sinc_im2col(const float* wave, int samples, int rows_per_window, int64_t first_row,
                           int rows, float* out) = 0;
  virtual void abs_max_pool3(const float* in, int out_rows, int channels, float* out) = 0;
  virtual void pool_norm_leaky(const float* in, int pool, int batch, int rows, int channels,
                               const float* scale, const float* bias, float eps, float slope,
                               float* out) = 0;
  virtual void bias_leaky(float* x, int rows, int n, const float* bias, float slope) = 0;
  virtual void bias_log_softmax(float* x, int rows, int n, const float* bias) = 0;
  // The four bidirectional LSTM layers: features [batch][frames][60] -> out [batch][frames][256].
  virtual void lstm(const float* features, float* out) = 0;
  // Stage `stage` (1 = wave norm ... 9 = head) has been enqueued: the engine times stages here.
  virtual void stage_done(int stage) { (void)stage; }
};

struct ForwardPass {
  const SegmentationModel* model = nullptr;
  const float* params = nullptr;  // the parameter block
  ParamLayout param_layout{};
  char* arena = nullptr;
  BufferLayout layout{};
  int batch = 0, samples = 0, sinc_chunk = 0;
};

// Enqueues one forward pass: the audio at layout.wave (overwritten) becomes log-probabilities
// [batch][frames][7] at layout.logprobs.
void run_forward_pass(const ForwardPass& pass, ForwardOps& ops);

// What stage `stage` (1 .. kForwardStages, as ForwardOps::stage_done numbers them) leaves behind:
// its output buffer, window-major, so that the first n windows are its first n * per_window
// floats. For comparing a GPU pass with the host one stage by stage.
constexpr int kForwardStages = 9;
struct StageOutput {
  const char* name;
  size_t offset;      // bytes into the arena
  size_t per_window;  // floats
};
StageOutput stage_output(int stage, const BufferLayout& layout, int samples);

}  // namespace cuda
}  // namespace speakerseg
