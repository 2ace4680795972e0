// The CUDA voice encoder against the references the CPU encoder is held to
// (tests/reference/make_voice_reference.py: a numpy forward of Resemblyzer's original weights on
// real speech), for every cuDNN RNN algorithm it runs with CUDA graphs off and on, three passes
// each: cosine >= 0.9999 per partial (the bound). Then batches of every size against the
// CPU encoder, batches larger than max_batch, and what it refuses. The device arena is filled with
// NaN whenever it is taken, so a read of memory nothing wrote shows. Every test that needs a GPU
// skips, saying so, where there is none; the last two run everywhere.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "common/test_env.h"
#include "common/voice_reference.h"
#include "engines/cpu/cpu_voice_encoder.h"
#include "engines/cuda/cuda_voice_encoder.h"
#include "features/mel_spectrogram.h"
#include "identity/utterance_embedding.h"
#include "io/npy.h"
#include "model/voice_model.h"

namespace speakerseg {
namespace {

constexpr float kLeastCosine = 0.9999f;

#define SKIP_WITHOUT_GPU()                                              \
  do {                                                                  \
    std::string why_;                                                   \
    if (cuda_device_count(&why_) == 0)                                  \
      GTEST_SKIP() << "no CUDA device found (" << why_ << "): skipped"; \
  } while (0)

std::shared_ptr<const VoiceModel> model() {
  static const auto m = VoiceModel::load_onnx(test::env_path("SPEAKERSEG_VOICE_MODEL"));
  return m;
}

float cosine(const float* a, const float* b) {
  double ab = 0, aa = 0, bb = 0;
  for (int k = 0; k < kEmbeddingDim; ++k) {
    ab += static_cast<double>(a[k]) * b[k];
    aa += static_cast<double>(a[k]) * a[k];
    bb += static_cast<double>(b[k]) * b[k];
  }
  return aa > 0 && bb > 0 ? static_cast<float>(ab / std::sqrt(aa * bb)) : 0.f;
}

float least_cosine(const std::vector<float>& a, const std::vector<float>& b) {
  float least = 1;
  for (size_t p = 0; p < a.size() / kEmbeddingDim; ++p)
    least = std::min(least, cosine(&a[p * kEmbeddingDim], &b[p * kEmbeddingDim]));
  return least;
}

// Warnings (an algorithm or a graph capture falling back) fail the tests: they would mean the
// configuration under test did not run.
CudaVoiceEncoderOptions options_for(LstmAlgorithm algorithm, bool graphs, int max_batch,
                                    std::vector<std::string>* warnings) {
  CudaVoiceEncoderOptions o;
  o.lstm_algorithm = algorithm;
  o.cuda_graphs = graphs;
  o.max_batch = max_batch;
  o.warn = [warnings](const std::string& m) { warnings->push_back(m); };
  o.fill_arena_nan = std::getenv("SPEAKERSEG_CUDA_TEST_NO_NAN_FILL") == nullptr;
  return o;
}

// The mel frames of every partial of a reference case, one after the other.
std::vector<float> partials_of(const std::string& c, int* count) {
  const NpyArray audio = read_npy(test::voice_reference(c + ".audio.npy"));
  const auto n = static_cast<int64_t>(audio.data.size());
  const MelSpectrogram mel;
  const std::vector<float> spectrum = mel.compute(audio.data.data(), n);
  const auto starts = partial_starts(MelSpectrogram::frames_for(n));
  std::vector<float> out;
  for (int64_t s : starts)
    out.insert(out.end(), spectrum.begin() + s * kMelBands,
               spectrum.begin() + (s + kPartialFrames) * kMelBands);
  *count = static_cast<int>(starts.size());
  return out;
}

class CudaVoiceParity : public ::testing::TestWithParam<std::tuple<LstmAlgorithm, bool>> {};

TEST_P(CudaVoiceParity, PartialsMatchTheOriginalWeightsOnEveryPass) {
  SKIP_WITHOUT_GPU();
  const auto [algorithm, graphs] = GetParam();
  std::vector<std::string> warnings;
  auto encoder = make_cuda_voice_encoder(model(), options_for(algorithm, graphs, 32, &warnings));
  std::printf("[ cuda voice ] %s\n", encoder->description().c_str());
  const MelSpectrogram mel;
  for (const std::string& c : test::voice_cases()) {
    const NpyArray audio = read_npy(test::voice_reference(c + ".audio.npy"));
    const NpyArray want = read_npy(test::voice_reference(c + ".partials.npy"));
    std::vector<float> first;
    for (int pass = 0; pass < 3; ++pass) {
      const std::vector<float> got = embed_partials(
          *encoder, mel, audio.data.data(), static_cast<int64_t>(audio.data.size()), kPartialStep);
      ASSERT_EQ(got.size(), want.data.size()) << c;
      const float least = least_cosine(got, want.data);
      std::printf("[ cuda voice ] %s %s graphs %s pass %d: %lld partials, least cosine %.8f\n",
                  c.c_str(), lstm_algorithm_name(algorithm), graphs ? "on" : "off", pass,
                  static_cast<long long>(want.shape[0]), least);
      EXPECT_GE(least, kLeastCosine) << c << " pass " << pass;
      if (pass == 0)
        first = got;
      else if (got != first)
        std::printf("[ replays ] voice %s %s: DIFFER, least cosine %.8f\n", c.c_str(),
                    lstm_algorithm_name(algorithm), least_cosine(got, first));
      else
        std::printf("[ replays ] voice %s %s: bit-identical\n", c.c_str(),
                    lstm_algorithm_name(algorithm));
    }
  }
  // Under auto, persist-dynamic that cannot run here (no NVRTC) falls back to standard by design,
  // and says so; anywhere else a warning means the configuration under test did not run. Auto
  // never tries persist-static-small-h, which cuDNN refuses for this LSTM.
  for (const auto& w : warnings) {
    std::printf("[ warning ] %s\n", w.c_str());
    EXPECT_EQ(w.find("persist-static-small-h"), std::string::npos) << w;
  }
  if (algorithm != LstmAlgorithm::kAuto) {
    EXPECT_TRUE(warnings.empty()) << warnings.front();
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, CudaVoiceParity,
                         ::testing::Combine(::testing::Values(LstmAlgorithm::kStandard,
                                                              LstmAlgorithm::kPersistDynamic,
                                                              LstmAlgorithm::kAuto),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           std::string name = lstm_algorithm_name(std::get<0>(info.param));
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name + (std::get<1>(info.param) ? "_graphs" : "_eager");
                         });

// Every batch size from 1 to 12 runs padded up to its class (1, 2, 4, 8, 12 with max_batch 12)
// and gives what the CPU encoder gives for the same partials; nothing past the caller's
// embeddings is written. The three clips' 19 partials: sizes above 12 run as two passes.
TEST(CudaVoiceEncoder, EveryBatchSizeAndLargerThanMaxBatch) {
  SKIP_WITHOUT_GPU();
  int count = 0;
  std::vector<float> partials;
  for (const std::string& c : test::voice_cases()) {
    int n = 0;
    const std::vector<float> p = partials_of(c, &n);
    partials.insert(partials.end(), p.begin(), p.end());
    count += n;
  }
  ASSERT_GE(count, 13);
  std::vector<float> want(static_cast<size_t>(count) * kEmbeddingDim);
  make_cpu_voice_encoder(model())->embed(partials.data(), count, kPartialFrames, want.data());

  std::vector<std::string> warnings;
  auto encoder =
      make_cuda_voice_encoder(model(), options_for(LstmAlgorithm::kAuto, true, 12, &warnings));
  for (int batch = 1; batch <= count; ++batch) {
    std::vector<float> got(static_cast<size_t>(batch + 1) * kEmbeddingDim, 7.f);
    encoder->embed(partials.data(), batch, kPartialFrames, got.data());
    EXPECT_TRUE(std::all_of(got.end() - kEmbeddingDim, got.end(), [](float v) { return v == 7.f; }))
        << "batch " << batch << " wrote past its embeddings";
    got.resize(static_cast<size_t>(batch) * kEmbeddingDim);
    const float least =
        least_cosine(got, std::vector<float>(want.begin(), want.begin() + got.size()));
    EXPECT_GE(least, kLeastCosine) << "batch " << batch;
  }
  // Alternating sizes keep their answers (the arena belongs to whichever shape ran last).
  std::vector<float> a(kEmbeddingDim), b(kEmbeddingDim);
  encoder->embed(partials.data(), 1, kPartialFrames, a.data());
  std::vector<float> big(static_cast<size_t>(count) * kEmbeddingDim);
  encoder->embed(partials.data(), count, kPartialFrames, big.data());
  encoder->embed(partials.data(), 1, kPartialFrames, b.data());
  EXPECT_GE(cosine(a.data(), b.data()), 0.999999f);
  // Another partial length gets its own plan on first use.
  std::vector<float> shorter(kEmbeddingDim);
  encoder->embed(partials.data(), 1, 100, shorter.data());
  std::vector<float> cpu_shorter(kEmbeddingDim);
  make_cpu_voice_encoder(model())->embed(partials.data(), 1, 100, cpu_shorter.data());
  EXPECT_GE(cosine(shorter.data(), cpu_shorter.data()), kLeastCosine);
  for (const auto& w : warnings) {
    std::printf("[ warning ] %s\n", w.c_str());
    EXPECT_EQ(w.find("persist-static-small-h"), std::string::npos) << w;
  }
}

TEST(CudaVoiceEncoder, RefusesWhatItCannotRun) {
  SKIP_WITHOUT_GPU();
  auto encoder = make_cuda_voice_encoder(model(), {});
  std::vector<float> mel(kPartialFrames * kMelBands, 0.f), out(kEmbeddingDim);
  EXPECT_THROW(encoder->embed(mel.data(), 0, kPartialFrames, out.data()), EngineError);
  EXPECT_THROW(encoder->embed(mel.data(), 1, 0, out.data()), EngineError);
  CudaVoiceEncoderOptions bad;
  bad.device = 1000;
  try {
    make_cuda_voice_encoder(model(), bad);
    FAIL() << "device 1000 was accepted";
  } catch (const EngineError& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
  // Silence embeds to a unit vector or to zero, never to NaN.
  encoder->embed(mel.data(), 1, kPartialFrames, out.data());
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float v) { return std::isfinite(v); }));
}

// Runs everywhere: cuDNN refused persist-static-small-h for this 256-wide LSTM on the first GPU run
// (an H200; the parity cases with it failed there), so asking for it fails when the encoder is
// made, before the driver or a device is looked for, with what to use instead; graphs or batch size
// change nothing.
TEST(CudaVoiceEncoder, RefusesPersistStaticSmallHBeforeAnyCudaCall) {
  for (const bool graphs : {false, true})
    for (const int max_batch : {1, 32}) {
      SCOPED_TRACE(std::string("graphs ") + (graphs ? "on" : "off") + ", max_batch " +
                   std::to_string(max_batch));
      std::vector<std::string> warnings;
      try {
        make_cuda_voice_encoder(model(), options_for(LstmAlgorithm::kPersistStaticSmallH, graphs,
                                                     max_batch, &warnings));
        ADD_FAILURE() << "a voice encoder was made with persist-static-small-h";
      } catch (const EngineError& e) {
        const std::string m = e.what();
        EXPECT_EQ(m.rfind("the voice encoder's 256-wide LSTM cannot run lstm-algorithm "
                          "persist-static-small-h (",
                          0),
                  0u)
            << m;
        EXPECT_NE(m.find("use lstm-algorithm auto, standard or persist-dynamic"), std::string::npos)
            << m;
      }
      EXPECT_TRUE(warnings.empty()) << warnings.front();
    }
}

// Runs everywhere: without a GPU, asking for the encoder fails with the clear message, no crash.
TEST(CudaVoiceEncoder, WithoutADeviceTheErrorSaysSo) {
  std::string why;
  if (cuda_device_count(&why) > 0) GTEST_SKIP() << "a CUDA device is present";
  try {
    make_cuda_voice_encoder(model(), {});
    FAIL() << "a CUDA voice encoder was made without a device";
  } catch (const EngineError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("no CUDA device found: ", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace speakerseg
