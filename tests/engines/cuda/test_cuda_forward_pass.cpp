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
#include "common/test_env.h"
#include "engines/cpu/cpu_engine.h"
#include "engines/cpu/emulated_precision.h"
#include "engines/cuda/cudnn_lstm_weights.h"
#include "engines/cuda/forward_pass.h"
#include "engines/cuda/host_forward_ops.h"
#include "io/npy.h"
#include "model/segmentation_model.h"

namespace speakerseg {
namespace {

using test::HostOps;

// The first `batch` windows of a reference case through the engine's forward pass, with
// `sinc_chunk` im2col rows per SincNet product (0: what the engine would take).
struct PassResult {
  std::vector<float> logprobs, reference;
  std::vector<int> stages;
};

PassResult run_case(const std::string& name, const std::string& model_path, int batch,
                    int sinc_chunk, cpu::Rounding rounding = cpu::Rounding::kNone,
                    bool fp32_sinc = false) {
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

  HostOps ops(*model, frames, rounding, fp32_sinc);
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

// The host pass with tensor-core math emulated (every product's operands rounded, sums in double)
// against the CPU engine's emulated precision (the same rounding, sums in fp32, in its own order):
// the two emulations the GPU's reduced-precision pass will be held to. Rounding makes tiny
// differences in the sums into whole steps of the format now and then, so they agree less well
// than two fp32 passes, but far better than either agrees with fp32 (first_window: fp16 and tf32
// 0.17 from ONNX Runtime's log-probabilities, bf16 1.6). Measured (Xeon, AVX-512): largest
// probability difference between the two emulations fp16 3.8e-4, bf16 3.0e-3, tf32 3.8e-4, no
// flipped frame; the bounds leave room for another CPU's order of sums.
TEST(CudaForwardPass, EmulatedPrecisionAgreesWithTheCpuEngine) {
  struct Format {
    cpu::Rounding rounding;
    CpuPrecision precision;
    double max_prob_diff;  // between the two emulations
    bool fp32_sinc;
  };
  const std::string dir = test::reference_dir();
  const NpyArray input = read_npy(dir + "/first_window.input.npy");
  const int samples = static_cast<int>(input.shape.at(1));
  const auto model = SegmentationModel::load_onnx(test::model_path());
  for (const Format f :
       {Format{cpu::Rounding::kFp16, CpuPrecision::kFp16Emulated, 1e-3, false},
        Format{cpu::Rounding::kBf16, CpuPrecision::kBf16Emulated, 1e-2, false},
        Format{cpu::Rounding::kTf32, CpuPrecision::kTf32Emulated, 1e-3, false},
        Format{cpu::Rounding::kFp16, CpuPrecision::kFp16EmulatedFp32Sinc, 1e-3, true},
        Format{cpu::Rounding::kBf16, CpuPrecision::kBf16EmulatedFp32Sinc, 1e-2, true}}) {
    const PassResult host =
        run_case("first_window", test::model_path(), 1, 0, f.rounding, f.fp32_sinc);
    std::vector<float> engine(host.logprobs.size(), NAN);
    make_cpu_engine(model, {1, f.precision})->forward(input.data.data(), 1, samples, engine.data());
    const test::Comparison to_reference = test::compare(host.logprobs, host.reference);
    const test::Comparison to_engine = test::compare(host.logprobs, engine);
    double max_p = 0;
    for (size_t i = 0; i < engine.size(); ++i)
      max_p = std::max(max_p,
                       std::fabs(std::exp(double(host.logprobs[i])) - std::exp(double(engine[i]))));
    std::printf(
        "[ cuda-pass ] %s: against ONNX Runtime max |diff| %.3g, flips %d (+%d at near-ties); "
        "against the CPU engine's max |diff| %.3g, max |probability diff| %.3g, flips %d (+%d)\n",
        cpu_precision_name(f.precision), to_reference.max_diff, to_reference.flips,
        to_reference.ties_flipped, to_engine.max_diff, max_p, to_engine.flips,
        to_engine.ties_flipped);
    EXPECT_TRUE(to_reference.finite);
    EXPECT_LE(max_p, f.max_prob_diff) << cpu_precision_name(f.precision);
    EXPECT_EQ(to_engine.flips, 0) << cpu_precision_name(f.precision);
  }
}

// cuda::stage_output names what each stage leaves behind (test_cuda_engine compares a GPU pass
// with this one through it): in a NaN-filled arena, each stage's output for the batch must be
// written, finite, by the time the stage is done, and no stage's output may be the one before's.
// The sequence-major LSTM (CudaEngineOptions::lstm_seq_major) stages its transposed input and
// output in the scratch region: it must hold a whole LSTM output, [batch][frames][256], at every
// batch and window length.
TEST(CudaForwardPass, ScratchHoldsTheLstmOutput) {
  for (int batch : {1, 2, 32, 512, 1024})
    for (int samples : {kWindowSamples, kWindowSamples / 2, 25440}) {
      const int chunk = cuda::sinc_chunk_rows(batch, samples);
      const cuda::BufferLayout L = cuda::place_buffers(batch, samples, chunk, 0);
      const size_t lstm =
          static_cast<size_t>(batch) * frames_for_samples(samples) * kLstmOutput * sizeof(float);
      EXPECT_GE(L.pool0 - L.scratch, lstm) << "batch " << batch << ", " << samples << " samples";
      EXPECT_EQ(L.lstm_out + lstm <= L.logprobs, true);
    }
}

TEST(CudaForwardPass, StageOutputsAreWhatEachStageWrote) {
  const std::string dir = test::reference_dir();
  const NpyArray input = read_npy(dir + "/batch32.input.npy");
  const int batch = 2, samples = static_cast<int>(input.shape.at(1));
  const auto model = SegmentationModel::load_onnx(test::model_path());
  cuda::ForwardPass pass;
  pass.model = model.get();
  const std::vector<float> params = cuda::pack_parameters(*model, &pass.param_layout);
  pass.params = params.data();
  pass.batch = batch;
  pass.samples = samples;
  pass.sinc_chunk = cuda::sinc_chunk_rows(batch, samples);
  pass.layout = cuda::place_buffers(batch, samples, pass.sinc_chunk, 0);
  std::vector<float> arena(pass.layout.total / sizeof(float) + 1, NAN);
  pass.arena = reinterpret_cast<char*>(arena.data());
  std::copy(input.data.begin(), input.data.begin() + static_cast<size_t>(batch) * samples,
            reinterpret_cast<float*>(pass.arena + pass.layout.wave));
  HostOps ops(*model, frames_for_samples(samples));
  ops.set_batch(batch);
  std::vector<std::vector<float>> outputs(cuda::kForwardStages + 1);
  ops.on_stage = [&](int stage) {
    const cuda::StageOutput o = cuda::stage_output(stage, pass.layout, samples);
    const float* v = reinterpret_cast<const float*>(pass.arena + o.offset);
    outputs[stage].assign(v, v + batch * o.per_window);
    // The next buffer's start: the output must fit in its own.
    EXPECT_LE(o.offset + batch * o.per_window * sizeof(float), pass.layout.total) << o.name;
    size_t bad = 0;
    for (float x : outputs[stage]) bad += !std::isfinite(x);
    EXPECT_EQ(bad, 0u) << o.name << ": " << bad << " of " << outputs[stage].size()
                       << " floats not written";
  };
  cuda::run_forward_pass(pass, ops);
  for (int stage = 2; stage <= cuda::kForwardStages; ++stage)
    EXPECT_NE(outputs[stage], outputs[stage - 1])
        << cuda::stage_output(stage, pass.layout, samples).name;
  const auto last = cuda::stage_output(cuda::kForwardStages, pass.layout, samples);
  EXPECT_EQ(std::string(last.name), "head");
  EXPECT_EQ(last.offset, pass.layout.logprobs);
}

}  // namespace
}  // namespace speakerseg
