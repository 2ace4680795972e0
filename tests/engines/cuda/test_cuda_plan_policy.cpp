// The CUDA engine's decisions that need no GPU (core/engines/cuda/plan_policy.h), on every machine:
// out of memory is never taken for an unavailable RNN algorithm, a graph that fails to launch is
// retired, batches map onto their classes, windows too long for cuDNN are refused, and the voice
// encoder is never given persist-static-small-h.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "engines/cuda/cuda_voice_encoder.h"
#include "engines/cuda/plan_policy.h"
#include "model/model_spec.h"

namespace speakerseg {
namespace {

using cuda::OutOfDeviceMemory;
using cuda::RnnUnavailable;

// The steps as a script: which step fails, how, and for which algorithm; a log of what ran.
class ScriptedSteps final : public cuda::RnnSetupSteps {
 public:
  enum class Fail { kNone, kUnavailable, kOutOfMemory };
  struct Failure {
    std::string step;  // "setup", "place", "probe"
    LstmAlgorithm algorithm;
    Fail how;
  };
  explicit ScriptedSteps(std::vector<Failure> failures) : failures_(std::move(failures)) {}

  void setup(LstmAlgorithm a) override {
    current_ = a;
    step("setup");
  }
  void place() override { step("place"); }
  void probe() override { step("probe"); }

  std::vector<std::string> log;

 private:
  void step(const std::string& name) {
    log.push_back(name + " " + lstm_algorithm_name(current_));
    for (const auto& f : failures_)
      if (f.step == name && f.algorithm == current_) {
        if (f.how == Fail::kUnavailable) throw RnnUnavailable(name + " refused");
        if (f.how == Fail::kOutOfMemory) throw OutOfDeviceMemory("out of device memory: " + name);
      }
  }
  std::vector<Failure> failures_;
  LstmAlgorithm current_ = LstmAlgorithm::kStandard;
};

using Fail = ScriptedSteps::Fail;
constexpr auto kAuto = LstmAlgorithm::kAuto;
constexpr auto kStandard = LstmAlgorithm::kStandard;
constexpr auto kStatic = LstmAlgorithm::kPersistStaticSmallH;
constexpr auto kDynamic = LstmAlgorithm::kPersistDynamic;

struct Outcome {
  LstmAlgorithm algorithm = kStandard;
  std::vector<std::string> warnings, log;
  std::string error;  // "oom: ..." or "unavailable: ..." when it threw
};

Outcome set_up(LstmAlgorithm requested, LstmAlgorithm wanted,
               std::vector<ScriptedSteps::Failure> failures) {
  ScriptedSteps steps(std::move(failures));
  Outcome o;
  try {
    o.algorithm = cuda::set_up_rnn(requested, wanted, 4, steps,
                                   [&](const std::string& m) { o.warnings.push_back(m); });
  } catch (const OutOfDeviceMemory& e) {
    o.error = std::string("oom: ") + e.what();
  } catch (const RnnUnavailable& e) {
    o.error = std::string("unavailable: ") + e.what();
  }
  o.log = steps.log;
  return o;
}

TEST(CudaPlanPolicy, AutoProbesItsChoiceAndKeepsIt) {
  const Outcome o = set_up(kAuto, kStatic, {});
  EXPECT_EQ(o.algorithm, kStatic);
  EXPECT_TRUE(o.error.empty()) << o.error;
  EXPECT_TRUE(o.warnings.empty());
  EXPECT_EQ(o.log, (std::vector<std::string>{"setup persist-static-small-h",
                                             "place persist-static-small-h",
                                             "probe persist-static-small-h"}));
}

TEST(CudaPlanPolicy, AutoFallsBackFromAnUnavailableAlgorithm) {
  for (const char* step : {"setup", "probe"}) {
    SCOPED_TRACE(step);
    const Outcome o = set_up(kAuto, kDynamic, {{step, kDynamic, Fail::kUnavailable}});
    EXPECT_EQ(o.algorithm, kStandard);
    EXPECT_TRUE(o.error.empty()) << o.error;
    ASSERT_EQ(o.warnings.size(), 1u);
    EXPECT_NE(o.warnings[0].find("refused; batch 4 falls back to lstm-algorithm standard"),
              std::string::npos)
        << o.warnings[0];
    EXPECT_EQ(o.log.back(), "place standard");
  }
}

// The fault of the review: a failed arena growth under `auto` printed "falls back" and tried
// again with another workspace, hiding the real error.
TEST(CudaPlanPolicy, OutOfMemoryIsNeverAFallback) {
  const ScriptedSteps::Failure cases[] = {
      {"place", kStatic, Fail::kOutOfMemory},  // the arena cannot grow
      {"setup", kStatic, Fail::kOutOfMemory},  // the weight space, cuDNN's own allocations
      {"probe", kStatic, Fail::kOutOfMemory},  // cuDNN's device allocation in the run
  };
  for (const auto& f : cases) {
    SCOPED_TRACE(f.step);
    const Outcome o = set_up(kAuto, kStatic, {f});
    EXPECT_EQ(o.error, "oom: out of device memory: " + f.step);
    EXPECT_TRUE(o.warnings.empty()) << o.warnings[0];
    for (const auto& line : o.log) EXPECT_EQ(line.find("standard"), std::string::npos) << line;
  }
  // Standard's own growth, after a fallback, fails as out of memory too.
  const Outcome o =
      set_up(kAuto, kDynamic,
             {{"setup", kDynamic, Fail::kUnavailable}, {"place", kStandard, Fail::kOutOfMemory}});
  EXPECT_EQ(o.error, "oom: out of device memory: place");
}

TEST(CudaPlanPolicy, AnExplicitAlgorithmIsNeitherProbedNorReplaced) {
  Outcome o = set_up(kDynamic, kDynamic, {{"setup", kDynamic, Fail::kUnavailable}});
  EXPECT_EQ(o.error, "unavailable: setup refused");
  EXPECT_TRUE(o.warnings.empty());
  o = set_up(kStatic, kStatic, {});
  EXPECT_EQ(o.log, (std::vector<std::string>{"setup persist-static-small-h",
                                             "place persist-static-small-h"}));
  // Standard chosen by auto has nothing to fall back to.
  o = set_up(kAuto, kStandard, {{"setup", kStandard, Fail::kUnavailable}});
  EXPECT_EQ(o.error, "unavailable: setup refused");
}

// auto's thresholds, from the first GPU run's table (an H200, graphs on): the fastest algorithm per
// measured class (1, 2, 4 ... 128, 512); 256 was not measured and gets standard, as 512. Classes
// that are not powers of two (max_batch itself) follow the same bounds.
TEST(CudaPlanPolicy, AutoTakesTheMeasuredFastestPerClass) {
  const std::vector<std::pair<int, LstmAlgorithm>> want = {
      {1, kDynamic},    {2, kDynamic},    {3, kStatic},     {4, kStatic},     {8, kStatic},
      {16, kStatic},    {32, kStatic},    {64, kStatic},    {100, kStatic},   {128, kStatic},
      {129, kStandard}, {256, kStandard}, {300, kStandard}, {512, kStandard}, {1024, kStandard}};
  for (const auto& [batch, algorithm] : want) {
    EXPECT_EQ(cuda::wanted_lstm_algorithm(kAuto, batch), algorithm)
        << "batch " << batch << ": "
        << lstm_algorithm_name(cuda::wanted_lstm_algorithm(kAuto, batch)) << ", not "
        << lstm_algorithm_name(algorithm);
    for (LstmAlgorithm explicit_choice : {kStandard, kStatic, kDynamic})
      EXPECT_EQ(cuda::wanted_lstm_algorithm(explicit_choice, batch), explicit_choice);
  }
}

// cuDNN refused persist-static-small-h for the voice encoder's 256-wide LSTM on the first GPU run:
// asked for, it is refused before any CUDA call; under auto, no batch class gets it.
TEST(CudaPlanPolicy, TheVoiceEncoderNeverRunsPersistStaticSmallH) {
  bool replaced = false;
  for (int max_batch : {1, 2, 12, 32, 48, 512, 1024})
    for (int c : cuda::batch_classes(max_batch)) {
      SCOPED_TRACE("class " + std::to_string(c));
      const LstmAlgorithm segmentation = cuda::wanted_lstm_algorithm(kAuto, c);
      const LstmAlgorithm voice = cuda::wanted_voice_lstm_algorithm(kAuto, c);
      EXPECT_NE(voice, kStatic);
      EXPECT_EQ(voice, segmentation == kStatic ? kStandard : segmentation);
      replaced |= segmentation == kStatic;
      for (LstmAlgorithm a : {kStandard, kDynamic})
        EXPECT_EQ(cuda::wanted_voice_lstm_algorithm(a, c), a);
    }
  EXPECT_TRUE(replaced) << "no class where the segmentation engine takes persist-static-small-h";
  EXPECT_EQ(cuda::wanted_voice_lstm_algorithm(kAuto, 1), kDynamic);

  for (LstmAlgorithm a : {kStandard, kDynamic, kAuto})
    EXPECT_NO_THROW(cuda::check_voice_lstm_algorithm(a)) << lstm_algorithm_name(a);
  EXPECT_THROW(cuda::wanted_voice_lstm_algorithm(kStatic, 4), EngineError);
  try {
    cuda::check_voice_lstm_algorithm(kStatic);
    FAIL() << "persist-static-small-h was accepted for the voice encoder";
  } catch (const EngineError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("the voice encoder's 256-wide LSTM cannot run lstm-algorithm "
                      "persist-static-small-h (",
                      0),
              0u)
        << m;
    EXPECT_NE(m.find("CUDNN_STATUS_NOT_SUPPORTED"), std::string::npos) << m;
    EXPECT_NE(m.find("use lstm-algorithm auto, standard or persist-dynamic"), std::string::npos)
        << m;
  }
}

// One setting for both networks (the element's lstm-algorithm, speakerseg --lstm-algorithm) is the
// segmentation engine's: persist-static-small-h leaves the voice encoder on auto, and says so.
TEST(CudaPlanPolicy, ASharedSettingGivesTheVoiceEncoderWhatItRuns) {
  std::string note = "stale";
  EXPECT_EQ(voice_lstm_algorithm(kStatic, &note), kAuto);
  EXPECT_NE(note.find("persist-static-small-h is for the segmentation LSTM"), std::string::npos)
      << note;
  EXPECT_NE(note.find("256-wide LSTM cannot run it and uses auto"), std::string::npos) << note;
  EXPECT_NO_THROW(cuda::check_voice_lstm_algorithm(voice_lstm_algorithm(kStatic)));
  for (LstmAlgorithm a : {kStandard, kDynamic, kAuto}) {
    note = "stale";
    EXPECT_EQ(voice_lstm_algorithm(a, &note), a) << lstm_algorithm_name(a);
    EXPECT_TRUE(note.empty()) << note;
  }
}

TEST(CudaPlanPolicy, CudnnAllocationStatusesAreOutOfMemory) {
  EXPECT_TRUE(cuda::cudnn_status_is_out_of_memory(cuda::kCudnnStatusHostAllocationFailed));
  EXPECT_TRUE(cuda::cudnn_status_is_out_of_memory(cuda::kCudnnStatusDeviceAllocationFailed));
  // CUDNN_STATUS_SUCCESS, _NOT_SUPPORTED (3000), _EXECUTION_FAILED (5000), _BAD_PARAM (2000).
  for (int s : {0, 2000, 3000, 4000, 5000})
    EXPECT_FALSE(cuda::cudnn_status_is_out_of_memory(s)) << s;
}

TEST(CudaPlanPolicy, OutOfMemorySaysHowMuchAndWhatToLower) {
  const std::string m = cuda::out_of_memory_message("batch 512 of 160000-sample windows", 3u << 30,
                                                    1u << 30, size_t{80} << 30, "NVIDIA H100");
  EXPECT_EQ(m.rfind("out of device memory: batch 512 of 160000-sample windows needs 3072.0 MiB "
                    "on NVIDIA H100 (1024.0 MiB free of 81920.0 MiB)",
                    0),
            0u)
      << m;
  EXPECT_NE(m.find("batch-size"), std::string::npos) << m;
  EXPECT_NE(m.find("channels"), std::string::npos) << m;
  const std::string unknown = cuda::out_of_memory_message("cuDNN x", 0, 1, 2, "GPU");
  EXPECT_NE(unknown.find("cuDNN x could not allocate on GPU"), std::string::npos) << unknown;
}

struct Pass {
  cuda::GraphSlot slot;
  int launches = 0, eager = 0, retired = 0;
  std::vector<std::string> warnings;
  bool launch_ok = true;
  cuda::PassMode run() {
    return cuda::run_pass(
        slot, 8,
        [&](std::string* why) {
          ++launches;
          if (!launch_ok) *why = "cudaGraphLaunch: cudaErrorInvalidValue";
          return launch_ok;
        },
        [&] { ++eager; }, [&] { ++retired; }, [&](const std::string& m) { warnings.push_back(m); });
  }
};

TEST(CudaPlanPolicy, AGraphThatFailsToLaunchIsRetiredOnce) {
  Pass p;
  EXPECT_EQ(p.run(), cuda::PassMode::kEager);  // nothing captured yet
  EXPECT_EQ(p.launches, 0);
  p.slot.captured = true;
  EXPECT_EQ(p.run(), cuda::PassMode::kReplay);
  EXPECT_EQ(p.eager, 1);
  p.launch_ok = false;
  EXPECT_EQ(p.run(), cuda::PassMode::kEager);  // the failed launch's pass still runs
  EXPECT_EQ(p.eager, 2);
  EXPECT_EQ(p.retired, 1);
  EXPECT_TRUE(p.slot.failed);
  EXPECT_FALSE(p.slot.captured);
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("batch 8 failed to launch (cudaGraphLaunch: cudaErrorInvalidValue)"),
            std::string::npos)
      << p.warnings[0];
  for (int i = 0; i < 3; ++i) EXPECT_EQ(p.run(), cuda::PassMode::kEager);
  EXPECT_EQ(p.launches, 2) << "a retired graph was launched again";
  EXPECT_EQ(p.retired, 1);
  EXPECT_EQ(p.warnings.size(), 1u) << "said more than once";
}

TEST(CudaPlanPolicy, BatchClasses) {
  EXPECT_EQ(cuda::batch_classes(1), (std::vector<int>{1}));
  EXPECT_EQ(cuda::batch_classes(2), (std::vector<int>{1, 2}));
  EXPECT_EQ(cuda::batch_classes(32), (std::vector<int>{1, 2, 4, 8, 16, 32}));
  EXPECT_EQ(cuda::batch_classes(48), (std::vector<int>{1, 2, 4, 8, 16, 32, 48}));
  EXPECT_EQ(cuda::batch_classes(512).size(), 10u);
  for (int max_batch : {1, 3, 32, 48, 100, 512}) {
    const auto classes = cuda::batch_classes(max_batch);
    for (int b = 1; b <= max_batch; ++b) {
      const int c = cuda::batch_class_for(classes, b);
      EXPECT_GE(c, b);
      EXPECT_LE(c, max_batch);
      EXPECT_LT(c, 2 * b) << "more than twice the windows run for batch " << b;
    }
  }
  const auto classes = cuda::batch_classes(48);
  EXPECT_EQ(cuda::batch_class_for(classes, 3), 4);
  EXPECT_EQ(cuda::batch_class_for(classes, 33), 48);
  EXPECT_THROW(cuda::batch_class_for(classes, 49), EngineError);
}

TEST(CudaPlanPolicy, WindowsTooLongForCudnnAreRefused) {
  const int longest = cuda::max_cudnn_window_samples();
  EXPECT_EQ(frames_for_samples(longest), cuda::kCudnnMaxSteps);
  EXPECT_GT(frames_for_samples(longest + 1), cuda::kCudnnMaxSteps);
  EXPECT_NO_THROW(cuda::check_cudnn_window(kWindowSamples));
  EXPECT_NO_THROW(cuda::check_cudnn_window(longest));
  // About 18.5 minutes.
  EXPECT_GT(longest, 1100 * kSampleRate);
  EXPECT_LT(longest, 1120 * kSampleRate);
  try {
    cuda::check_cudnn_window(longest + 1);
    FAIL() << "a window of " << longest + 1 << " samples was accepted";
  } catch (const EngineError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("65535 steps"), std::string::npos) << m;
    EXPECT_NE(m.find("at most " + std::to_string(longest) + " samples"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace speakerseg
