// The engine factory (engines/engine_factory.h): settings checked against this build, auto's
// choice and its reason, settings that do nothing said so, the engines made with the real models
// giving what the engines made directly give, and the identity that lets equal settings share an
// engine. What needs a GPU (a CUDA engine that fails under auto and falls back) skips without one.
#include "engines/engine_factory.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/test_env.h"
#include "common/xorshift.h"
#include "engines/cpu/cpu_voice_encoder.h"
#include "model/model_spec.h"
#include "model/voice_model.h"

namespace speakerseg {
namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A factory for `s` that keeps what it notices.
struct Made {
  std::vector<EngineNotice> notices;
  std::unique_ptr<EngineFactory> factory;

  explicit Made(const EngineSettings& s) {
    EngineFactory::Reporters r;
    r.notice = [this](const EngineNotice& n) { notices.push_back(n); };
    factory = std::make_unique<EngineFactory>(s, r);
  }
  std::string said(EngineNotice::Level level) const {
    std::string all;
    for (const auto& n : notices)
      if (n.level == level) all += n.text + "\n";
    return all;
  }
};

// The settings error `s` gives (what, then hint); "" when none.
std::string refusal(const EngineSettings& s) {
  try {
    EngineFactory f(s);
  } catch (const EngineSettingsError& e) {
    return std::string(e.what()) + " | " + e.hint();
  }
  return "";
}

bool gpu_present() {
#ifdef SPEAKERSEG_HAVE_CUDA
  return cuda_device_count() > 0;
#else
  return false;
#endif
}

TEST(EngineFactory, NamesAreTheOnesTheFrontEndsUse) {
  for (const char* name : {"auto", "cpu", "cuda", "remote"}) {
    EngineKind k = EngineKind::kAuto;
    ASSERT_TRUE(parse_engine_kind(name, &k)) << name;
    EXPECT_STREQ(engine_kind_name(k), name);
  }
  EngineKind k = EngineKind::kCpu;
  EXPECT_FALSE(parse_engine_kind("gpu", &k));
  EXPECT_FALSE(parse_engine_kind("CPU", &k));
  EXPECT_EQ(k, EngineKind::kCpu);  // untouched
}

TEST(EngineFactory, AutoSaysWhyItRunsOnTheCpu) {
  Made m(EngineSettings{});
  if (gpu_present()) {
    EXPECT_EQ(m.factory->kind(), EngineKind::kCuda);
    EXPECT_EQ(m.said(EngineNotice::kInfo), "");
    return;
  }
  EXPECT_EQ(m.factory->kind(), EngineKind::kCpu);
  const std::string info = m.said(EngineNotice::kInfo);
  EXPECT_TRUE(has(
      info, build_has_cuda_engine() ? "no CUDA device found (" : "this build has no CUDA engine"))
      << info;
  EXPECT_TRUE(has(info, "using the CPU engine")) << info;
  EXPECT_EQ(m.said(EngineNotice::kIgnored), "");
}

TEST(EngineFactory, RemoteNeedsItsBuildAndAServer) {
  EngineSettings s;
  s.kind = EngineKind::kRemote;
  const std::string no_server = refusal(s);
  if (!build_has_remote_engine()) {
    EXPECT_TRUE(has(no_server, "libgrpc++-dev")) << no_server;
    return;
  }
  EXPECT_TRUE(has(no_server, "engine=remote needs server=HOST:PORT")) << no_server;
  EXPECT_TRUE(has(no_server, "8001")) << no_server;  // how to fix it: Triton's port
  s.remote.server = "127.0.0.1:1";
  s.remote.deadline_ms = 2000;
  Made m(s);
  EXPECT_EQ(m.factory->kind(), EngineKind::kRemote);
  EXPECT_FALSE(m.factory->needs_local_models());
  // Nothing listens there: the engine, not the factory, finds that out, and says so.
  try {
    m.factory->segmentation(nullptr, 1);
    ADD_FAILURE() << "a remote engine was made for a server nobody runs";
  } catch (const EngineError& e) {
    EXPECT_TRUE(has(e.what(), "cannot be reached")) << e.what();
    EXPECT_TRUE(has(e.what(), "127.0.0.1:1")) << e.what();
  }
}

TEST(EngineFactory, GpuSettingsNeedABuildWithCuda) {
  EngineSettings cuda;
  cuda.kind = EngineKind::kCuda;
  EngineSettings device;
  device.device = 1;
  EngineSettings algorithm;
  algorithm.lstm_algorithm = LstmAlgorithm::kStandard;
  EngineSettings negative;
  negative.device = -1;
  EXPECT_TRUE(has(refusal(negative), "not a GPU index")) << refusal(negative);
  if (build_has_cuda_engine()) {
    EXPECT_EQ(refusal(cuda), "");
    EXPECT_EQ(refusal(device), "");
    EXPECT_EQ(refusal(algorithm), "");
    return;
  }
  for (const EngineSettings& s : {cuda, device, algorithm}) {
    const std::string why = refusal(s);
    EXPECT_TRUE(has(why, "this build has no CUDA engine")) << why;
    EXPECT_TRUE(has(why, "-Dcuda=enabled")) << why;
  }
}

TEST(EngineFactory, ExplicitCudaWithoutADeviceFailsWhenMadeNotWhenChosen) {
  if (!build_has_cuda_engine()) GTEST_SKIP() << "this build has no CUDA engine";
  if (gpu_present()) GTEST_SKIP() << "a CUDA device is present";
  EngineSettings s;
  s.kind = EngineKind::kCuda;
  Made m(s);
  EXPECT_EQ(m.factory->kind(), EngineKind::kCuda);
  const auto model = SegmentationModel::load_onnx(test::model_path());
  try {
    m.factory->segmentation(model, 1);
    ADD_FAILURE() << "a CUDA engine was made without a device";
  } catch (const EngineError& e) {
    EXPECT_TRUE(has(e.what(), "no CUDA device found")) << e.what();
  }
  // engine=cuda asked for the GPU: no quiet move to the CPU.
  EXPECT_EQ(m.factory->kind(), EngineKind::kCuda);
  EXPECT_EQ(m.said(EngineNotice::kFallback), "");
}

TEST(EngineFactory, SettingsWithoutEffectAreSaidByName) {
  EngineSettings s;
  s.kind = EngineKind::kCpu;
  s.remote.server = "inference:8001";
  s.remote.deadline_ms = 500;
  if (build_has_cuda_engine()) {
    s.device = 1;
    s.cuda_graphs = false;
    s.fp16 = true;
    s.device_audio = true;
  }
  Made m(s);
  EXPECT_EQ(m.factory->kind(), EngineKind::kCpu);
  const std::string ignored = m.said(EngineNotice::kIgnored);
  EXPECT_TRUE(has(ignored, "server=inference:8001")) << ignored;
  EXPECT_TRUE(has(ignored, "deadline=500 ms")) << ignored;
  if (build_has_cuda_engine()) {
    EXPECT_TRUE(has(ignored, "device=1")) << ignored;
    EXPECT_TRUE(has(ignored, "cuda-graphs=false")) << ignored;
    EXPECT_TRUE(has(ignored, "fp16")) << ignored;
    EXPECT_TRUE(has(ignored, "device-audio")) << ignored;
  }
  // Defaults are nobody's choice: nothing to say.
  EngineSettings plain;
  plain.kind = EngineKind::kCpu;
  EXPECT_EQ(Made(plain).said(EngineNotice::kIgnored), "");
}

TEST(EngineFactory, CpuEnginesAreTheOnesMadeDirectly) {
  EngineSettings s;
  s.kind = EngineKind::kCpu;
  s.threads = 2;
  Made m(s);
  ASSERT_TRUE(m.factory->needs_local_models());
  const auto model = SegmentationModel::load_onnx(test::model_path());
  auto engine = m.factory->segmentation(model, 4);
  auto direct = make_cpu_engine(model, {2, CpuPrecision::kFp32});
  EXPECT_EQ(engine->description(), direct->description());
  test::Xorshift rng(7);
  std::vector<float> audio(2 * kWindowSamples);
  for (float& x : audio) x = 0.1f * (rng.below(2001) / 1000.0f - 1.0f);
  const size_t out = 2u * frames_for_samples(kWindowSamples) * kClasses;
  std::vector<float> got(out), want(out);
  engine->forward(audio.data(), 2, kWindowSamples, got.data());
  direct->forward(audio.data(), 2, kWindowSamples, want.data());
  EXPECT_EQ(got, want);  // the same engine, the same threads: bit-identical

  const auto voice_model = VoiceModel::load_onnx(test::env_path("SPEAKERSEG_VOICE_MODEL"));
  auto voice = m.factory->voice(voice_model);
  auto voice_direct = make_cpu_voice_encoder(voice_model, {2, CpuPrecision::kFp32});
  EXPECT_EQ(voice->description(), voice_direct->description());
  std::vector<float> mel(static_cast<size_t>(kPartialFrames) * kMelBands);
  for (float& x : mel) x = rng.below(1001) / 1000.0f;
  std::vector<float> a(kEmbeddingDim), b(kEmbeddingDim);
  voice->embed(mel.data(), 1, kPartialFrames, a.data());
  voice_direct->embed(mel.data(), 1, kPartialFrames, b.data());
  EXPECT_EQ(a, b);
  EXPECT_EQ(m.notices.size(), 0u);
}

TEST(EngineFactory, IdentityTellsEnginesApartAndOnlyThem) {
  EngineSettings cpu;
  cpu.kind = EngineKind::kCpu;
  const std::string base = Made(cpu).factory->identity();
  EngineSettings threads = cpu;
  threads.threads = 3;
  EXPECT_NE(Made(threads).factory->identity(), base);
  EngineSettings precision = cpu;
  precision.precision = CpuPrecision::kBf16;
  EXPECT_NE(Made(precision).factory->identity(), base);
  // What only the CUDA engine reads leaves a CPU engine the same one (shareable).
  EngineSettings graphs = cpu;
  graphs.cuda_graphs = false;
  EXPECT_EQ(Made(graphs).factory->identity(), base);
  if (build_has_remote_engine()) {
    EngineSettings remote;
    remote.kind = EngineKind::kRemote;
    remote.remote.server = "a:8001";
    EngineSettings other = remote;
    other.remote.server = "b:8001";
    EXPECT_NE(Made(remote).factory->identity(), Made(other).factory->identity());
    EXPECT_TRUE(has(Made(remote).factory->identity(), "remote;server=a:8001")) << base;
  }
}

}  // namespace
}  // namespace speakerseg
