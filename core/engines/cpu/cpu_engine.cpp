// The CPU engine: matrix products through oneDNN's sgemm, everything else in cpu_kernels.cpp,
// parallelised by hand at a coarse grain (windows, row blocks, LSTM directions) so that each
// sgemm call runs on one thread. The LSTM recurrence is our own fused kernel (lstm_recurrence.h).
// On two cores this beats letting the library split small products. At an emulated precision
// (cpu_engine.h) every product's operands are rounded: the weights once here, the activations
// just before their product.
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "engines/cpu/cpu_engine.h"
#include "engines/cpu/cpu_gemm.h"
#include "engines/cpu/cpu_kernels.h"
#include "engines/cpu/lstm_recurrence.h"
#include "engines/setting_names.h"

namespace speakerseg {
namespace {

using cpu::gemm;
using cpu::parallel_for;

constexpr int kSide = (kSincKernel - 1) / 2;  // 125
constexpr int kSincRows = 255;                // output positions per task; a multiple of the pool
constexpr int kConvRows = 510;
constexpr int kHeadRows = 512;

// Row blocks of at most kHeadRows rows, at least one per thread, of equal size: one window's 589
// frames as 512 + 77 rows left one of two threads idle most of the time.
struct RowBlocks {
  int rows, count;
  RowBlocks(int rows, int threads)
      : rows(rows), count(std::max((rows + kHeadRows - 1) / kHeadRows, std::min(threads, rows))) {}
  int begin(int block) const {
    return static_cast<int>(static_cast<int64_t>(rows) * block / count);
  }
  int size(int block) const { return begin(block + 1) - begin(block); }
};

enum Stage {
  kWaveNorm,
  kSinc,
  kNorm0,
  kConv1,
  kNorm1,
  kConv2,
  kNorm2,
  kLstmInput,
  kLstmRecurrence,
  kHead,
  kStages
};
const char* const kStageNames[kStages] = {"wave-norm",       "sinc+pool",  "norm0", "conv1+pool",
                                          "norm1",           "conv2+pool", "norm2", "lstm-input",
                                          "lstm-recurrence", "head"};

class CpuEngine final : public SegmentationEngine {
 public:
  CpuEngine(std::shared_ptr<const SegmentationModel> model, const CpuEngineOptions& options)
      : model_(std::move(model)),
        threads_(options.threads > 0 ? options.threads : omp_get_max_threads()),
        rounding_(cpu::emulated_rounding(options.precision)),
        sinc_rounding_(cpu::emulated_sinc_rounding(options.precision)) {
    // The SincNet filters are symmetric (cosine half) and antisymmetric (sine half) about their
    // centre tap, so each output is a product with pre-added / pre-subtracted sample pairs: half
    // the multiply-adds of the plain convolution.
    const int half = kSincFilters / 2;
    sinc_even_.resize(static_cast<size_t>(half) * (kSide + 1));
    sinc_odd_.resize(static_cast<size_t>(half) * kSide);
    for (int f = 0; f < half; ++f) {
      const float* e = &model_->sinc_filters[static_cast<size_t>(f) * kSincKernel];
      const float* o = &model_->sinc_filters[static_cast<size_t>(f + half) * kSincKernel];
      for (int k = 0; k <= kSide; ++k) sinc_even_[f * (kSide + 1) + k] = e[k];
      for (int k = 0; k < kSide; ++k) sinc_odd_[f * kSide + k] = o[k];
    }
    if (rounding_ != cpu::Rounding::kNone) {
      cpu::round_in_place(sinc_rounding_, sinc_even_.data(), sinc_even_.size());
      cpu::round_in_place(sinc_rounding_, sinc_odd_.data(), sinc_odd_.size());
      for (int i = 0; i < 2; ++i)
        rounded_conv_[i] = cpu::rounded_copy(rounding_, model_->conv_weight[i].data(),
                                             model_->conv_weight[i].size());
      for (int i = 0; i < 3; ++i)
        rounded_head_[i] = cpu::rounded_copy(rounding_, model_->head_weight[i].data(),
                                             model_->head_weight[i].size());
    }
    const cpu::LstmIsa kernel = cpu::recurrence_kernel(options.precision);  // refuses first
    recurrent_weights_.reserve(2 * kLstmLayers);
    input_weights_.reserve(kLstmLayers);
    for (int l = 0; l < kLstmLayers; ++l) {
      input_weights_.emplace_back(model_->lstm[l].w.data(), 2 * kLstmGates,
                                  model_->lstm[l].input_size, options.precision);
      for (int d = 0; d < 2; ++d)
        recurrent_weights_.emplace_back(
            model_->lstm[l].r.data() + static_cast<size_t>(d) * kLstmGates * kLstmHidden,
            model_->lstm[l].bias.data() + d * kLstmGates, kLstmHidden, kernel, rounding_);
    }
  }

  std::string description() const override {
    return cpu::engine_description(threads_, cpu::lstm_isa_name(recurrent_weights_[0].isa()),
                                   rounding_);
  }

  std::vector<std::pair<std::string, double>> stage_seconds() const override {
    std::vector<std::pair<std::string, double>> out;
    for (int s = 0; s < kStages; ++s) out.emplace_back(kStageNames[s], seconds_[s]);
    return out;
  }

  void forward(const float* audio, int batch, int samples, float* logprobs) override {
    forward_windows(windows_of(audio, batch, samples), batch, samples, logprobs);
  }

  // The first stage reads each window where it is: the normalised copy is the one it makes.
  void forward_windows(const float* const* windows, int batch, int samples,
                       float* logprobs) override {
    const StageLengths len = check_forward_shape(batch, samples);
    reserve(batch, samples, len);

    cpu::ScopedOmpThreads threads(threads_);
    run(windows, batch, samples, len, logprobs);
  }

 private:
  void reserve(int batch, int samples, const StageLengths& len) {
    if (batch == batch_ && samples == samples_) return;
    batch_ = batch;
    samples_ = samples;
    const size_t B = batch, T = len.frames;
    wave_.assign(B * samples, 0.f);
    pool0_.assign(B * len.pool0 * kSincFilters, 0.f);
    pool1_.assign(B * len.pool1 * kConvChannels, 0.f);
    features_.assign(B * T * kConvChannels, 0.f);
    gates_.assign(B * T * 2 * kLstmGates, 0.f);
    for (auto& y : lstm_out_) y.assign(B * T * kLstmOutput, 0.f);
    cell_.assign(2 * B * kLstmHidden, 0.f);
    head_.assign(B * T * kHeadHidden * 2, 0.f);
    const size_t scratch =
        std::max<size_t>(static_cast<size_t>(kSincRows) * (2 * kSide + 1 + kSincFilters),
                         static_cast<size_t>(kConvRows) * kConvChannels);
    thread_scratch_.assign(static_cast<size_t>(threads_) * scratch, 0.f);
    scratch_stride_ = scratch;
  }

  // The weights of a product: the model's, or their rounded copies at an emulated precision.
  const float* conv_weight(int i) const {
    return rounded_conv_[i].empty() ? model_->conv_weight[i].data() : rounded_conv_[i].data();
  }
  const float* head_weight(int i) const {
    return rounded_head_[i].empty() ? model_->head_weight[i].data() : rounded_head_[i].data();
  }

  template <class F>
  void timed(Stage s, F&& f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    seconds_[s] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  void run(const float* const* windows, int B, int samples, const StageLengths& len,
           float* logprobs) {
    const SegmentationModel& m = *model_;
    const int T = len.frames;

    timed(kWaveNorm, [&] {
      parallel_for(B, threads_, [&](int b, int) {
        cpu::normalize_wave(windows[b], samples, m.wav_norm_scale, m.wav_norm_bias, m.norm_eps,
                            &wave_[static_cast<size_t>(b) * samples]);
      });
    });

    timed(kSinc, [&] { sinc_and_pool(B, samples, len); });
    timed(kNorm0, [&] { norm(pool0_.data(), B, len.pool0, kSincFilters, 0); });
    timed(kConv1, [&] {
      conv_and_pool(pool0_.data(), len.pool0, kSincFilters, conv_weight(0), B, len.pool1 * kPool,
                    pool1_.data());
    });
    timed(kNorm1, [&] { norm(pool1_.data(), B, len.pool1, kConvChannels, 1); });
    timed(kConv2, [&] {
      conv_and_pool(pool1_.data(), len.pool1, kConvChannels, conv_weight(1), B, T * kPool,
                    features_.data());
    });
    timed(kNorm2, [&] { norm(features_.data(), B, T, kConvChannels, 2); });
    lstm(B, T);
    timed(kHead, [&] { head(B, T, logprobs); });
  }

  // SincNet convolution (stride 10) fused with |x| and MaxPool(3): writes pool0_ [B][pool0][80].
  void sinc_and_pool(int B, int samples, const StageLengths& len) {
    const int rows = len.pool0 * kPool;  // convolution outputs the pooling uses
    const int chunks = (rows + kSincRows - 1) / kSincRows;
    const int half = kSincFilters / 2;
    parallel_for(B * chunks, threads_, [&](int task, int thread) {
      const int b = task / chunks;
      const int r0 = (task % chunks) * kSincRows;
      const int n = std::min(kSincRows, rows - r0);
      float* sums = &thread_scratch_[thread * scratch_stride_];            // [n][126]
      float* diffs = sums + static_cast<size_t>(kSincRows) * (kSide + 1);  // [n][125]
      float* conv = diffs + static_cast<size_t>(kSincRows) * kSide;        // [n][80]
      cpu::symmetric_pairs(
          &wave_[static_cast<size_t>(b) * samples + static_cast<size_t>(r0) * kSincStride], n,
          kSincStride, kSide, sums, diffs);
      cpu::round_in_place(sinc_rounding_, sums, static_cast<size_t>(n) * (kSide + 1));
      cpu::round_in_place(sinc_rounding_, diffs, static_cast<size_t>(n) * kSide);
      gemm(true, n, half, kSide + 1, sums, kSide + 1, sinc_even_.data(), kSide + 1, 0.f, conv,
           kSincFilters);
      gemm(true, n, half, kSide, diffs, kSide, sinc_odd_.data(), kSide, 0.f, conv + half,
           kSincFilters);
      cpu::max_pool3(conv, n, kSincFilters, true,
                     &pool0_[(static_cast<size_t>(b) * len.pool0 + r0 / kPool) * kSincFilters]);
    });
  }

  // Valid 5-tap convolution of a channels-last map fused with MaxPool(3). A channels-last map is
  // its own im2col matrix per tap, so the convolution is five products with no copy. The conv bias
  // is left out: the instance norm after the pool subtracts every per-channel constant. At an
  // emulated precision `in` (the norm's output, read by this product only) is rounded first.
  void conv_and_pool(float* in, int in_rows, int in_channels, const float* weight, int B, int rows,
                     float* out) {
    if (rounding_ != cpu::Rounding::kNone)
      parallel_for(B, threads_, [&](int b, int) {
        const size_t n = static_cast<size_t>(in_rows) * in_channels;
        cpu::round_in_place(rounding_, in + b * n, n);
      });
    const int chunks = (rows + kConvRows - 1) / kConvRows;
    const int out_rows = rows / kPool;
    parallel_for(B * chunks, threads_, [&](int task, int thread) {
      const int b = task / chunks;
      const int r0 = (task % chunks) * kConvRows;
      const int n = std::min(kConvRows, rows - r0);
      float* conv = &thread_scratch_[thread * scratch_stride_];
      const float* x = in + (static_cast<size_t>(b) * in_rows + r0) * in_channels;
      for (int tap = 0; tap < kConvKernel; ++tap)
        gemm(true, n, kConvChannels, in_channels, x + tap * in_channels, in_channels,
             weight + tap * in_channels, kConvKernel * in_channels, tap ? 1.f : 0.f, conv,
             kConvChannels);
      cpu::max_pool3(conv, n, kConvChannels, false,
                     out + (static_cast<size_t>(b) * out_rows + r0 / kPool) * kConvChannels);
    });
  }

  // One window per task: splitting a window's channels between threads was slower than one thread
  // (the halves share cache lines of every row), and a vectorised window takes 0.15 ms at most.
  void norm(float* x, int B, int rows, int channels, int stage) {
    parallel_for(B, threads_, [&](int b, int) {
      cpu::instance_norm_leaky_relu(x + static_cast<size_t>(b) * rows * channels, rows, channels,
                                    model_->norm_scale[stage].data(),
                                    model_->norm_bias[stage].data(), model_->norm_eps,
                                    model_->leaky_slope);
    });
  }

  void lstm(int B, int T) {
    const int rows = B * T;
    const float* in = features_.data();
    for (int l = 0; l < kLstmLayers; ++l) {
      const LstmLayerWeights& w = model_->lstm[l];
      float* out = lstm_out_[l % 2].data();
      // Input projection of the whole sequence, both directions: one product per row block.
      const RowBlocks blocks(rows, threads_);
      timed(kLstmInput, [&] {
        parallel_for(blocks.count, threads_, [&](int c, int) {
          const int r0 = blocks.begin(c), n = blocks.size(c);
          input_weights_[l].apply(n, in + static_cast<size_t>(r0) * w.input_size,
                                  &gates_[static_cast<size_t>(r0) * 2 * kLstmGates]);
        });
      });
      // Recurrence: one job per direction and group of sequences, spread over the threads; a
      // thread with several jobs steps them in lockstep (one thread: both directions at once).
      const int groups = std::max(1, std::min(B, threads_ / 2));
      jobs_.resize(2 * groups);
      for (int g = 0; g < groups; ++g)
        for (int d = 0; d < 2; ++d) {
          const int b0 = B * g / groups;
          cpu::LstmRecurrenceJob& job = jobs_[2 * g + d];
          job.weights = &recurrent_weights_[2 * l + d];
          job.gates = &gates_[static_cast<size_t>(b0) * T * 2 * kLstmGates + d * kLstmGates];
          job.gates_sequence = static_cast<size_t>(T) * 2 * kLstmGates;
          job.gates_step = 2 * kLstmGates;
          job.hidden = out + static_cast<size_t>(b0) * T * kLstmOutput + d * kLstmHidden;
          job.hidden_sequence = static_cast<size_t>(T) * kLstmOutput;
          job.hidden_step = kLstmOutput;
          job.cell = &cell_[(static_cast<size_t>(d) * B + b0) * kLstmHidden];
          job.sequences = B * (g + 1) / groups - b0;
          job.reverse = d == 1;
        }
      const int workers = std::min(threads_, 2 * groups);
      timed(kLstmRecurrence, [&] {
        parallel_for(workers, threads_, [&](int worker, int) {
          const int j0 = 2 * groups * worker / workers, j1 = 2 * groups * (worker + 1) / workers;
          cpu::run_lstm_recurrence(&jobs_[j0], j1 - j0, T);
        });
      });
      in = out;
    }
  }

  void head(int B, int T, float* logprobs) {
    const SegmentationModel& m = *model_;
    const int rows = B * T;
    const float* in = lstm_out_[(kLstmLayers - 1) % 2].data();
    const RowBlocks blocks(rows, threads_);
    parallel_for(blocks.count, threads_, [&](int c, int) {
      const int r0 = blocks.begin(c), n = blocks.size(c);
      float* h0 = &head_[static_cast<size_t>(r0) * kHeadHidden * 2];
      float* h1 = h0 + static_cast<size_t>(n) * kHeadHidden;
      // At an emulated precision the LSTM kernel wrote `in` rounded; h0 and h1 are rounded here.
      gemm(false, n, kHeadHidden, kLstmOutput, in + static_cast<size_t>(r0) * kLstmOutput,
           kLstmOutput, head_weight(0), kHeadHidden, 0.f, h0, kHeadHidden);
      cpu::bias_leaky_relu(h0, n, kHeadHidden, m.head_bias[0].data(), m.leaky_slope);
      cpu::round_in_place(rounding_, h0, static_cast<size_t>(n) * kHeadHidden);
      gemm(false, n, kHeadHidden, kHeadHidden, h0, kHeadHidden, head_weight(1), kHeadHidden, 0.f,
           h1, kHeadHidden);
      cpu::bias_leaky_relu(h1, n, kHeadHidden, m.head_bias[1].data(), m.leaky_slope);
      cpu::round_in_place(rounding_, h1, static_cast<size_t>(n) * kHeadHidden);
      float* out = logprobs + static_cast<size_t>(r0) * kClasses;
      gemm(false, n, kClasses, kHeadHidden, h1, kHeadHidden, head_weight(2), kClasses, 0.f, out,
           kClasses);
      cpu::bias_log_softmax(out, n, kClasses, m.head_bias[2].data());
    });
  }

  std::shared_ptr<const SegmentationModel> model_;
  const int threads_;
  const cpu::Rounding rounding_;       // kNone but at an emulated precision
  const cpu::Rounding sinc_rounding_;  // SincNet's: kNone also for the *-fp32-sinc ones
  std::vector<float> sinc_even_, sinc_odd_;
  std::array<std::vector<float>, 2> rounded_conv_;  // empty but at an emulated precision
  std::array<std::vector<float>, 3> rounded_head_;
  std::vector<cpu::InputProjection> input_weights_;        // [layer], both directions
  std::vector<cpu::PackedLstmWeights> recurrent_weights_;  // [layer][direction]

  int batch_ = 0, samples_ = 0;
  std::vector<float> wave_, pool0_, pool1_, features_, gates_, cell_, head_;
  std::vector<cpu::LstmRecurrenceJob> jobs_;
  std::array<std::vector<float>, 2> lstm_out_;
  std::vector<float> thread_scratch_;
  size_t scratch_stride_ = 0;
  double seconds_[kStages] = {};
};

}  // namespace

namespace {
constexpr CpuPrecision kPrecisions[] = {CpuPrecision::kFp32,
                                        CpuPrecision::kBf16,
                                        CpuPrecision::kFp16Emulated,
                                        CpuPrecision::kBf16Emulated,
                                        CpuPrecision::kTf32Emulated,
                                        CpuPrecision::kFp16EmulatedFp32Sinc,
                                        CpuPrecision::kBf16EmulatedFp32Sinc,
                                        CpuPrecision::kTf32EmulatedFp32Sinc};
}  // namespace

const char* cpu_precision_name(CpuPrecision precision) {
  switch (precision) {
    case CpuPrecision::kBf16:
      return "bf16";
    case CpuPrecision::kFp16Emulated:
      return "fp16-emulated";
    case CpuPrecision::kBf16Emulated:
      return "bf16-emulated";
    case CpuPrecision::kTf32Emulated:
      return "tf32-emulated";
    case CpuPrecision::kFp16EmulatedFp32Sinc:
      return "fp16-emulated-fp32-sinc";
    case CpuPrecision::kBf16EmulatedFp32Sinc:
      return "bf16-emulated-fp32-sinc";
    case CpuPrecision::kTf32EmulatedFp32Sinc:
      return "tf32-emulated-fp32-sinc";
    case CpuPrecision::kFp32:
      break;
  }
  return "fp32";
}

bool parse_cpu_precision(const std::string& name, CpuPrecision* out) {
  return parse_setting_name(name, kPrecisions, cpu_precision_name, out);
}

namespace cpu {

Rounding emulated_rounding(CpuPrecision precision) {
  switch (precision) {
    case CpuPrecision::kFp16Emulated:
    case CpuPrecision::kFp16EmulatedFp32Sinc:
      return Rounding::kFp16;
    case CpuPrecision::kBf16Emulated:
    case CpuPrecision::kBf16EmulatedFp32Sinc:
      return Rounding::kBf16;
    case CpuPrecision::kTf32Emulated:
    case CpuPrecision::kTf32EmulatedFp32Sinc:
      return Rounding::kTf32;
    case CpuPrecision::kFp32:
    case CpuPrecision::kBf16:
      break;
  }
  return Rounding::kNone;
}

Rounding emulated_sinc_rounding(CpuPrecision precision) {
  const bool fp32_sinc = precision == CpuPrecision::kFp16EmulatedFp32Sinc ||
                         precision == CpuPrecision::kBf16EmulatedFp32Sinc ||
                         precision == CpuPrecision::kTf32EmulatedFp32Sinc;
  return fp32_sinc ? Rounding::kNone : emulated_rounding(precision);
}

LstmIsa recurrence_kernel(CpuPrecision precision) {
  if (precision != CpuPrecision::kBf16) return lstm_isa();
  if (!lstm_isa_supported(LstmIsa::kAvx512Bf16))
    throw EngineError(
        "precision bf16 needs a CPU with AVX-512 and AVX512_BF16 (vdpbf16ps: Intel Cooper Lake "
        "or Sapphire Rapids and later, AMD Zen 4 and later); this one has neither or only "
        "AVX-512F: use precision fp32");
  return LstmIsa::kAvx512Bf16;
}

}  // namespace cpu

std::unique_ptr<SegmentationEngine> make_cpu_engine(std::shared_ptr<const SegmentationModel> model,
                                                    const CpuEngineOptions& options) {
  if (!model) throw EngineError("make_cpu_engine: no model");
  return std::make_unique<CpuEngine>(std::move(model), options);
}

}  // namespace speakerseg
