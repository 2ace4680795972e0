#include "engines/cuda/forward_pass.h"

#include <algorithm>

#include "model/segmentation_model.h"

namespace speakerseg::cuda {
namespace {

// out[b][r][60] = sum over taps of in[b][r + tap][:] . weight[:, tap, :], for r < out_rows: a
// channels-last map is its own im2col per tap, so a convolution is five accumulating products per
// window and no copies. Its bias is left out: the instance norm after the pool subtracts every
// per-channel constant.
void conv_taps(ForwardOps& ops, int batch, const float* in, int in_rows, int in_channels,
               const float* weight, int out_rows, float* out) {
  for (int tap = 0; tap < kConvKernel; ++tap)
    ops.gemm_strided_batched(
        true, false, kConvChannels, out_rows, in_channels, weight + tap * in_channels,
        kConvKernel * in_channels, 0, in + tap * in_channels, in_channels,
        static_cast<int64_t>(in_rows) * in_channels, tap ? 1.f : 0.f, out, kConvChannels,
        static_cast<int64_t>(out_rows) * kConvChannels, batch, "convolution");
}

}  // namespace

std::vector<float> pack_parameters(const SegmentationModel& m, ParamLayout* layout) {
  ParamLayout& L = *layout;
  size_t cursor = 0;
  auto take = [&](size_t n) {
    const size_t here = cursor;
    cursor += (n + 63) / 64 * 64;  // 256-byte alignment for cuBLAS
    return here;
  };
  L.sinc_even = take(static_cast<size_t>(kSincHalf) * kSincWeightLd);
  L.sinc_odd = take(static_cast<size_t>(kSincHalf) * kSincWeightLd);
  for (int i = 0; i < 2; ++i) L.conv[i] = take(m.conv_weight[i].size());
  for (int s = 0; s < 3; ++s) {
    L.norm_scale[s] = take(m.norm_scale[s].size());
    L.norm_bias[s] = take(m.norm_bias[s].size());
  }
  for (int i = 0; i < 3; ++i) {
    L.head_w[i] = take(m.head_weight[i].size());
    L.head_b[i] = take(m.head_bias[i].size());
  }
  L.total = cursor;

  std::vector<float> host(L.total, 0.f);
  for (int f = 0; f < kSincHalf; ++f) {
    const float* e = &m.sinc_filters[static_cast<size_t>(f) * kSincKernel];
    const float* o = &m.sinc_filters[static_cast<size_t>(f + kSincHalf) * kSincKernel];
    std::copy(e, e + kSincSide + 1, &host[L.sinc_even + static_cast<size_t>(f) * kSincWeightLd]);
    std::copy(o, o + kSincSide, &host[L.sinc_odd + static_cast<size_t>(f) * kSincWeightLd]);
  }
  auto put = [&](size_t off, const std::vector<float>& v) {
    std::copy(v.begin(), v.end(), &host[off]);
  };
  for (int i = 0; i < 2; ++i) put(L.conv[i], m.conv_weight[i]);
  for (int s = 0; s < 3; ++s) {
    put(L.norm_scale[s], m.norm_scale[s]);
    put(L.norm_bias[s], m.norm_bias[s]);
  }
  for (int i = 0; i < 3; ++i) {
    put(L.head_w[i], m.head_weight[i]);
    put(L.head_b[i], m.head_bias[i]);
  }
  return host;
}

int sinc_chunk_rows(int batch, int samples) {
  return static_cast<int>(std::min<int64_t>(
      static_cast<int64_t>(batch) * stage_lengths(samples).pool0 * kPool, kSincChunkRows));
}

BufferLayout place_buffers(int batch, int samples, int sinc_chunk, size_t rnn_work_bytes) {
  const StageLengths len = stage_lengths(samples);
  const size_t B = batch, T = len.frames;
  const size_t f = sizeof(float);
  BufferLayout L{};
  size_t cursor = 0;
  auto take = [&](size_t bytes) {
    const size_t here = cursor;
    cursor += (bytes + 255) / 256 * 256;
    return here;
  };
  L.wave = take(B * samples * f);
  // One scratch region for the stage-local temporaries, which never live at the same time:
  // SincNet im2col + products, conv1 output, conv2 output, the head's two hidden layers.
  const size_t sinc = static_cast<size_t>(sinc_chunk) * (kSincLd + kSincFilters) * f;
  const size_t conv1 = B * len.pool1 * kPool * kConvChannels * f;
  const size_t conv2 = B * T * kPool * kConvChannels * f;
  const size_t head = 2 * B * T * kHeadHidden * f + 256;
  L.scratch = take(std::max({sinc, conv1, conv2, head}));
  L.pool0 = take(B * len.pool0 * kSincFilters * f);
  L.pool1 = take(B * len.pool1 * kConvChannels * f);
  L.features = take(B * T * kConvChannels * f);
  L.lstm_out = take(B * T * kLstmOutput * f);
  L.logprobs = take(B * T * kClasses * f);
  L.rnn_work = take(rnn_work_bytes);
  L.total = cursor;
  return L;
}

StageOutput stage_output(int stage, const BufferLayout& L, int samples) {
  const StageLengths len = stage_lengths(samples);
  const size_t T = len.frames;
  switch (stage) {
    case 1:
      return {"wave-norm", L.wave, static_cast<size_t>(samples)};
    case 2:
      return {"sinc+pool", L.pool0, static_cast<size_t>(len.pool0) * kSincFilters};
    case 3:
      return {"norm0", L.pool0, static_cast<size_t>(len.pool0) * kSincFilters};
    case 4:  // conv1's output before its pool, in the scratch region
      return {"conv1", L.scratch, static_cast<size_t>(len.pool1) * kPool * kConvChannels};
    case 5:
      return {"pool1+norm1", L.pool1, static_cast<size_t>(len.pool1) * kConvChannels};
    case 6:
      return {"conv2", L.scratch, T * kPool * kConvChannels};
    case 7:
      return {"pool2+norm2", L.features, T * kConvChannels};
    case 8:
      return {"lstm", L.lstm_out, T * kLstmOutput};
    case 9:
      return {"head", L.logprobs, T * kClasses};
  }
  return {"?", 0, 0};
}

void run_forward_pass(const ForwardPass& pass, ForwardOps& ops) {
  const SegmentationModel& m = *pass.model;
  const ParamLayout& P = pass.param_layout;
  const BufferLayout& L = pass.layout;
  const StageLengths len = stage_lengths(pass.samples);
  const int B = pass.batch, T = len.frames;
  auto at = [&](size_t offset) { return reinterpret_cast<float*>(pass.arena + offset); };
  auto param = [&](size_t offset) { return pass.params + offset; };
  float* scratch = at(L.scratch);

  ops.wave_norm(at(L.wave), B, pass.samples, m.wav_norm_scale, m.wav_norm_bias, m.norm_eps);
  ops.stage_done(1);

  // SincNet: conv rows in chunks, each an im2col of symmetric pairs, two products, |.|, pool.
  const int64_t sinc_rows = static_cast<int64_t>(B) * len.pool0 * kPool;
  float* cols = scratch;
  float* conv = scratch + static_cast<size_t>(pass.sinc_chunk) * kSincLd;
  for (int64_t r0 = 0; r0 < sinc_rows; r0 += pass.sinc_chunk) {
    const int n = static_cast<int>(std::min<int64_t>(pass.sinc_chunk, sinc_rows - r0));
    ops.sinc_im2col(at(L.wave), pass.samples, len.pool0 * kPool, r0, n, cols);
    ops.gemm_fp32(true, false, kSincHalf, n, kSincSide + 1, param(P.sinc_even), kSincWeightLd, cols,
                  kSincLd, 0.f, conv, kSincFilters, "SincNet, cosine filters");
    ops.gemm_fp32(true, false, kSincHalf, n, kSincSide, param(P.sinc_odd), kSincWeightLd,
                  cols + kSincDiffColumn, kSincLd, 0.f, conv + kSincHalf, kSincFilters,
                  "SincNet, sine filters");
    ops.abs_max_pool3(conv, n / kPool, kSincFilters, at(L.pool0) + r0 / kPool * kSincFilters);
  }
  ops.stage_done(2);
  ops.pool_norm_leaky(at(L.pool0), 1, B, len.pool0, kSincFilters, param(P.norm_scale[0]),
                      param(P.norm_bias[0]), m.norm_eps, m.leaky_slope, at(L.pool0));
  ops.stage_done(3);

  conv_taps(ops, B, at(L.pool0), len.pool0, kSincFilters, param(P.conv[0]), len.pool1 * kPool,
            scratch);
  ops.stage_done(4);
  ops.pool_norm_leaky(scratch, kPool, B, len.pool1, kConvChannels, param(P.norm_scale[1]),
                      param(P.norm_bias[1]), m.norm_eps, m.leaky_slope, at(L.pool1));
  ops.stage_done(5);
  conv_taps(ops, B, at(L.pool1), len.pool1, kConvChannels, param(P.conv[1]), T * kPool, scratch);
  ops.stage_done(6);
  ops.pool_norm_leaky(scratch, kPool, B, T, kConvChannels, param(P.norm_scale[2]),
                      param(P.norm_bias[2]), m.norm_eps, m.leaky_slope, at(L.features));
  ops.stage_done(7);

  ops.lstm(at(L.features), at(L.lstm_out));
  ops.stage_done(8);

  const int rows = B * T;
  float* h0 = scratch;
  float* h1 = scratch + (static_cast<size_t>(rows) * kHeadHidden + 63) / 64 * 64;
  float* out = at(L.logprobs);
  ops.gemm(false, false, kHeadHidden, rows, kLstmOutput, param(P.head_w[0]), kHeadHidden,
           at(L.lstm_out), kLstmOutput, 0.f, h0, kHeadHidden, "head 1");
  ops.bias_leaky(h0, rows, kHeadHidden, param(P.head_b[0]), m.leaky_slope);
  ops.gemm(false, false, kHeadHidden, rows, kHeadHidden, param(P.head_w[1]), kHeadHidden, h0,
           kHeadHidden, 0.f, h1, kHeadHidden, "head 2");
  ops.bias_leaky(h1, rows, kHeadHidden, param(P.head_b[1]), m.leaky_slope);
  ops.gemm(false, false, kClasses, rows, kHeadHidden, param(P.head_w[2]), kClasses, h1, kHeadHidden,
           0.f, out, kClasses, "head 3");
  ops.bias_log_softmax(out, rows, kClasses, param(P.head_b[2]));
  ops.stage_done(9);
}

}  // namespace speakerseg::cuda
