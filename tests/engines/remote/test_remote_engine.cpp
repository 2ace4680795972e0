// The remote engine against a real Open Inference Protocol server on loopback
// (scripts/servers/oip_server.py: KServe's model server running our ONNX files with ONNX Runtime;
// or, as remote_engine_triton, scripts/servers/triton_server.py: Triton Inference Server with dynamic batching):
// the same log-probabilities and embeddings as ONNX Runtime's on real speech, several engines on
// one server at once, a server that declares no tensors (KServe's default), and the refusals a user
// meets (no server, a wrong model name or shape, a server slower than the deadline or gone), each
// naming the server and the model.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/oip_server.h"
#include "common/parity.h"
#include "common/test_env.h"
#include "common/voice_reference.h"
#include "engines/cpu/cpu_engine.h"
#include "engines/cpu/cpu_voice_encoder.h"
#include "engines/remote/remote_engine.h"
#include "io/npy.h"
#include "model/voice_model.h"
#include "scheduling/shared_segmenter.h"

namespace speakerseg {
namespace {

class RemoteEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new test::OipServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(server_->started()) << server_->why(); }

  static RemoteEngineOptions options() {
    RemoteEngineOptions o;
    o.server = server_->address();
    return o;
  }

  static test::OipServer* server_;
};
test::OipServer* RemoteEngineTest::server_ = nullptr;

// What reaches `server` with a deadline of 2 s.
RemoteEngineOptions reaching(const test::OipServer& server) {
  RemoteEngineOptions o;
  o.server = server.address();
  o.deadline_ms = 2000;
  return o;
}

// The message of the EngineError `make` throws ("" if it throws none).
template <class F>
std::string refusal(F make) {
  try {
    make();
  } catch (const EngineError& e) {
    return e.what();
  }
  return "";
}

// The message of the EngineUnavailable (an outage, retried) `make` throws ("" if it throws none;
// another EngineError fails the test).
template <class F>
std::string outage(F make) {
  try {
    make();
  } catch (const EngineUnavailable& e) {
    return e.what();
  } catch (const EngineError& e) {
    ADD_FAILURE() << "an error that ends the stream, not an outage: " << e.what();
  }
  return "";
}

// Triton declares every model's tensors (its model configuration): a server that declares none is
// KServe's case only.
#define SKIP_UNLESS_KSERVE()                                                    \
  if (test::oip_server_kind() != "kserve")                                      \
  GTEST_SKIP() << "a server that declares no tensors is KServe's default, not " \
               << test::oip_server_kind() << "'s"

// A server as a KServe custom predictor that declares no tensors serves the models: ModelMetadata
// lists no inputs and no outputs. Started on first use, for every test of the program.
const test::OipServer& undeclaring_server() {
  static test::OipServer server({"--no-metadata"});
  return server;
}

// `name`'s windows through `engine`.
std::vector<float> forward_case(SegmentationEngine& engine, const char* name) {
  const NpyArray input = read_npy(test::reference_dir() + "/" + name + ".input.npy");
  const int batch = static_cast<int>(input.shape[0]), samples = static_cast<int>(input.shape[1]);
  std::vector<float> out(static_cast<size_t>(batch) * frames_for_samples(samples) * kClasses);
  engine.forward(input.data.data(), batch, samples, out.data());
  return out;
}

TEST_F(RemoteEngineTest, LogProbsMatchOnnxRuntime) {
  auto engine = make_remote_engine(options());
  for (const char* name : {"first_window", "batch32", "last_partial", "all_windows"}) {
    const NpyArray input = read_npy(test::reference_dir() + "/" + name + ".input.npy");
    const NpyArray reference = read_npy(test::reference_dir() + "/" + name + ".logprobs.npy");
    const int batch = static_cast<int>(input.shape[0]), samples = static_cast<int>(input.shape[1]);
    std::vector<float> out(reference.data.size());
    engine->forward(input.data.data(), batch, samples, out.data());
    const test::Comparison c = test::compare(out, reference.data);
    std::printf("[ remote   ] %-13s %d windows of %d samples: max |diff| %.3g (every class %.3g)\n",
                name, batch, samples, c.max_diff, c.max_diff_all);
    EXPECT_TRUE(c.finite) << name;
    EXPECT_LE(c.max_diff, test::kParityTolerance) << name;
    EXPECT_EQ(c.flips, 0) << name;
  }
}

// Triton's and this server's model take 10 s windows only (deploy/triton): a shorter one is
// refused before it is sent, saying what the server takes.
TEST_F(RemoteEngineTest, AWindowTheServerDoesNotTakeIsRefusedWithTheReason) {
  auto engine = make_remote_engine(options());
  const NpyArray input = read_npy(test::reference_dir() + "/five_seconds.input.npy");
  const int samples = static_cast<int>(input.shape[1]);
  std::vector<float> out(frames_for_samples(samples) * kClasses);
  const std::string why =
      refusal([&] { engine->forward(input.data.data(), 1, samples, out.data()); });
  std::printf("[ refused  ] %s\n", why.c_str());
  EXPECT_NE(why.find("takes windows of 160000 samples only"), std::string::npos) << why;
}

TEST_F(RemoteEngineTest, VoiceEmbeddingsMatchTheOriginalWeights) {
  auto encoder = make_remote_voice_encoder(options());
  test::expect_partials_match(*encoder, 0.9999f, "remote");
}

TEST_F(RemoteEngineTest, SeveralEnginesShareOneServerAtOnce) {
  const NpyArray input = read_npy(test::reference_dir() + "/batch32.input.npy");
  const NpyArray reference = read_npy(test::reference_dir() + "/batch32.logprobs.npy");
  const int samples = static_cast<int>(input.shape[1]), per = 4;
  const size_t out_per = reference.data.size() / input.shape[0] * per;
  std::vector<std::vector<float>> outs(4, std::vector<float>(out_per));
  std::vector<std::thread> threads;
  std::vector<std::string> errors(outs.size());
  for (size_t t = 0; t < outs.size(); ++t)
    threads.emplace_back([&, t] {
      try {
        auto engine = make_remote_engine(options());
        for (int round = 0; round < 3; ++round)
          engine->forward(&input.data[t * per * samples], per, samples, outs[t].data());
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (size_t t = 0; t < outs.size(); ++t) {
    ASSERT_EQ(errors[t], "");
    const std::vector<float> want(reference.data.begin() + t * out_per,
                                  reference.data.begin() + (t + 1) * out_per);
    EXPECT_LE(test::compare(outs[t], want).max_diff, test::kParityTolerance) << "engine " << t;
  }
}

TEST_F(RemoteEngineTest, AWrongModelNameIsRefusedWithTheReason) {
  RemoteEngineOptions o = options();
  o.model = "no-such-model";
  const std::string why = refusal([&] { make_remote_engine(o); });
  std::printf("[ refused  ] %s\n", why.c_str());
  EXPECT_NE(why.find("no-such-model"), std::string::npos) << why;
  EXPECT_NE(why.find(o.server), std::string::npos) << why;
}

TEST_F(RemoteEngineTest, AModelOfTheWrongShapeIsRefusedWithTheReason) {
  RemoteEngineOptions o = options();
  o.model = o.voice_model;  // the voice encoder where the segmentation network should be
  const std::string why = refusal([&] { make_remote_engine(o); });
  std::printf("[ refused  ] %s\n", why.c_str());
  EXPECT_NE(why.find("no input 'input'"), std::string::npos) << why;
  EXPECT_NE(why.find("mel"), std::string::npos) << why;  // what it has instead
}

// Nothing to check at creation but that the models are ready; the answers are the declaring
// server's, bit for bit (both run ONNX Runtime on the same files), and the voices too.
TEST_F(RemoteEngineTest, AServerThatDeclaresNoTensorsGivesTheSameResults) {
  SKIP_UNLESS_KSERVE();
  const test::OipServer& bare = undeclaring_server();
  ASSERT_TRUE(bare.started()) << bare.why();
  RemoteEngineOptions o = options();
  o.server = bare.address();
  auto engine = make_remote_engine(o);
  auto declared = make_remote_engine(options());
  for (const char* name : {"first_window", "batch32", "last_partial"}) {
    const std::vector<float> got = forward_case(*engine, name),
                             want = forward_case(*declared, name);
    const test::Comparison c = test::compare(got, want);
    std::printf("[ no meta  ] %-13s max |diff| from the declaring server %.3g\n", name, c.max_diff);
    EXPECT_TRUE(c.finite) << name;
    EXPECT_EQ(got, want) << name;
  }
  auto encoder = make_remote_voice_encoder(o);
  test::expect_partials_match(*encoder, 0.9999f, "no meta");
}

// The wrong model behind such a server is taken at creation and fails on the first request, as
// an error (not an outage to wait out), naming the server and the model and what to check.
TEST(RemoteEngine, AWrongModelBehindAServerWithoutMetadataFailsOnTheFirstCall) {
  SKIP_UNLESS_KSERVE();
  const test::OipServer& bare = undeclaring_server();
  ASSERT_TRUE(bare.started()) << bare.why();
  RemoteEngineOptions o;
  o.server = bare.address();
  o.model = o.voice_model;  // the voice encoder where the segmentation network should be
  auto engine = make_remote_engine(o);
  const NpyArray input = read_npy(test::reference_dir() + "/first_window.input.npy");
  std::vector<float> out(frames_for_samples(input.shape[1]) * kClasses);
  std::string why;
  try {
    engine->forward(input.data.data(), 1, static_cast<int>(input.shape[1]), out.data());
  } catch (const EngineUnavailable& e) {
    ADD_FAILURE() << "taken for an outage, which would be retried: " << e.what();
  } catch (const EngineError& e) {
    why = e.what();
  }
  std::printf("[ refused  ] %s\n", why.c_str());
  for (const std::string& says :
       {o.server, std::string("'voice-encoder-ge2e'"), std::string("refused the request"),
        std::string("FP32 'input' [1, 1, 160000]"), std::string("the right model"),
        std::string("declares no tensors")})
    EXPECT_NE(why.find(says), std::string::npos) << "lacks \"" << says << "\": " << why;

  RemoteEngineOptions v;
  v.server = bare.address();
  v.voice_model = "segmentation-3.0";
  auto encoder = make_remote_voice_encoder(v);
  std::vector<float> mel(100 * kMelBands, 0.f), embedding(kEmbeddingDim);
  why = refusal([&] { encoder->embed(mel.data(), 1, 100, embedding.data()); });
  std::printf("[ refused  ] %s\n", why.c_str());
  EXPECT_NE(why.find("'segmentation-3.0'"), std::string::npos) << why;
  EXPECT_NE(why.find("FP32 'mel' [1, 100, 40]"), std::string::npos) << why;
  EXPECT_NE(why.find("the right model"), std::string::npos) << why;
}

// A request the server refuses (INVALID_ARGUMENT: here a batch over its max batch size) ends the
// stream with the server's reason, it is not waited out as an outage.
TEST(RemoteEngine, ABatchTheServerRefusesIsAnErrorNotAnOutage) {
  test::OipServer small({"--max-batch", "2"});
  ASSERT_TRUE(small.started()) << small.why();
  auto engine = make_remote_engine(reaching(small));
  const NpyArray input = read_npy(test::reference_dir() + "/batch32.input.npy");
  const int samples = static_cast<int>(input.shape[1]);
  std::vector<float> out(4 * frames_for_samples(samples) * kClasses);
  engine->forward(input.data.data(), 2, samples, out.data());  // within its max batch size
  std::string why;
  try {
    engine->forward(input.data.data(), 4, samples, out.data());
  } catch (const EngineUnavailable& e) {
    ADD_FAILURE() << "taken for an outage, which would be retried: " << e.what();
  } catch (const EngineError& e) {
    why = e.what();
  }
  std::printf("[ refused  ] %s\n", why.c_str());
  EXPECT_NE(why.find(small.address()), std::string::npos) << why;
  // The server's own words: KServe's (scripts/servers/oip_server.py) or Triton's.
  EXPECT_NE(why.find(test::oip_server_kind() == "triton" ? "batch-size must be <= 2"
                                                         : "batch 4 over the max batch size 2"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("lower batch-size"), std::string::npos) << why;
  EXPECT_EQ(why.find("declares no tensors"), std::string::npos) << why;
}

TEST(RemoteEngine, AnUnreachableServerIsRefusedWithTheReason) {
  RemoteEngineOptions o;
  o.server = "127.0.0.1:1";  // nothing listens on port 1
  o.deadline_ms = 2000;
  const std::string why = refusal([&] { make_remote_engine(o); });
  std::printf("[ refused  ] %s\n", why.c_str());
  EXPECT_NE(why.find("127.0.0.1:1"), std::string::npos) << why;
  EXPECT_NE(why.find("cannot be reached"), std::string::npos) << why;
}

TEST(RemoteEngine, ASlowServerMeetsTheDeadlineAsAnError) {
  test::OipServer slow({"--delay-ms", "3000"});
  ASSERT_TRUE(slow.started()) << slow.why();
  RemoteEngineOptions o;
  o.server = slow.address();
  o.deadline_ms = 500;
  auto engine = make_remote_engine(o);  // the checks are not delayed, inference is
  const NpyArray input = read_npy(test::reference_dir() + "/first_window.input.npy");
  std::vector<float> out(frames_for_samples(input.shape[1]) * kClasses);
  const std::string why = refusal(
      [&] { engine->forward(input.data.data(), 1, static_cast<int>(input.shape[1]), out.data()); });
  std::printf("[ refused  ] %s\n", why.c_str());
  EXPECT_NE(why.find("no answer within 500 ms"), std::string::npos) << why;
  EXPECT_NE(why.find("overloaded or stuck"), std::string::npos) << why;  // connected, not gone
  EXPECT_EQ(why.find("cannot be reached"), std::string::npos) << why;
  // An outage, waited out and retried: the same call again.
  EXPECT_NE(outage([&] {
              engine->forward(input.data.data(), 1, static_cast<int>(input.shape[1]), out.data());
            }),
            "");
}

// A server that is gone mid-stream: the request waits for a connection up to its deadline, and
// the outage says the server cannot be reached, not that it is slow.
TEST(RemoteEngine, AServerThatIsGoneIsSaidToBeUnreachableNotSlow) {
  auto server = std::make_unique<test::OipServer>();
  ASSERT_TRUE(server->started()) << server->why();
  RemoteEngineOptions o = reaching(*server);
  o.deadline_ms = 1500;
  auto engine = make_remote_engine(o);
  const NpyArray input = read_npy(test::reference_dir() + "/first_window.input.npy");
  std::vector<float> out(frames_for_samples(input.shape[1]) * kClasses);
  const auto run = [&] {
    engine->forward(input.data.data(), 1, static_cast<int>(input.shape[1]), out.data());
  };
  run();                                           // connected
  server.reset();                                  // SIGTERM: gone
  for (int attempt = 0; attempt < 2; ++attempt) {  // the first after the loss, and one later
    const std::string why = outage(run);
    std::printf("[ outage   ] %s\n", why.c_str());
    EXPECT_NE(why.find(o.server), std::string::npos) << why;
    EXPECT_NE(why.find("cannot be reached"), std::string::npos) << why;
    EXPECT_NE(why.find("start it"), std::string::npos) << why;
    EXPECT_EQ(why.find("overloaded"), std::string::npos) << why;
  }
}

// Round `round`'s three windows (30 s of stream time from 30 s x round, end to end) through a
// shared scheduler's channel, waited for.
void run_three(SharedSegmenterChannel& channel, const NpyArray& input, int round) {
  for (int64_t w = 0; w < 3; ++w)
    channel.submit(
        WindowJob::from_window((3 * round + w) * kWindowSamples, &input.data[w * kWindowSamples]));
  channel.drain();
}

TEST(RemoteEngine, ALostServerCostsWindowsNotTheStreamAndAnalysisResumes) {
  auto server = std::make_unique<test::OipServer>();
  ASSERT_TRUE(server->started()) << server->why();
  const std::string address = server->address(), port = server->port();
  const RemoteEngineOptions o = reaching(*server);
  // Longer than the client's 2 s reconnection backoff: the first batch after the restart waits
  // for the server instead of being dropped.
  const double outage_wait = 5;
  auto scheduler =
      std::make_shared<SharedScheduler>(make_remote_engine(o), 4, nullptr, outage_wait);
  SharedSegmenterChannel channel(scheduler, StreamSettings{}, {});
  const NpyArray input = read_npy(test::reference_dir() + "/batch32.input.npy");

  run_three(channel, input, 0);
  EXPECT_EQ(channel.processed_windows(), 3u);
  EXPECT_EQ(channel.outage(), "");
  EXPECT_EQ(channel.unanalysed_seconds(), 0);

  server.reset();  // SIGTERM: the server is gone
  run_three(channel, input, 1);
  std::printf("[ outage   ] %s\n", channel.outage().c_str());
  EXPECT_EQ(channel.error(), "");  // the stream goes on
  EXPECT_EQ(channel.processed_windows(), 3u);
  EXPECT_EQ(channel.unanalysed_windows(), 3u);
  EXPECT_EQ(channel.dropped_windows(), 0u);  // not late: counted as unanalysed
  EXPECT_NE(channel.outage().find(address), std::string::npos) << channel.outage();
  EXPECT_EQ(channel.unanalysed_seconds(), 30);  // 30 s to 60 s

  server = test::OipServer::on_port(port);
  ASSERT_TRUE(server->started()) << server->why();
  run_three(channel, input, 2);
  EXPECT_EQ(channel.error(), "");
  EXPECT_EQ(channel.processed_windows(), 6u);
  EXPECT_EQ(channel.unanalysed_windows(), 3u);
  EXPECT_EQ(channel.unanalysed_seconds(), 30);
  EXPECT_EQ(channel.outage(), "");
}

// Identity by voice on the first 20 windows of sample.wav (step 1 s) through a scheduler with
// the CPU segmentation engine and `voice`; the changes.
std::vector<SpeakerChange> identify(std::unique_ptr<VoiceEncoder> voice, double outage_wait,
                                    std::string* error) {
  const NpyArray input = read_npy(test::reference_dir() + "/all_windows.input.npy");
  StreamSettings s;
  s.identity.enabled = true;
  auto scheduler = std::make_shared<SharedScheduler>(
      make_cpu_engine(SegmentationModel::load_onnx(test::model_path()), {1}), 4, std::move(voice),
      outage_wait);
  SharedSegmenterChannel channel(scheduler, s, {});
  for (int64_t w = 0; w < 20; ++w)
    channel.submit(WindowJob::from_window(w * kSampleRate, &input.data[w * kWindowSamples]));
  channel.finish(19 * kSampleRate + kWindowSamples);
  *error = channel.error();
  return channel.take_changes();
}

// The voice server gone when the first voice is asked for and back within outage-wait costs
// nothing: the voice calls wait and are retried, and the speakers are named as with the encoder
// on this machine.
TEST(RemoteEngine, AVoiceServerBackWithinTheOutageWaitCostsNothing) {
  std::string error;
  const auto want = identify(
      make_cpu_voice_encoder(VoiceModel::load_onnx(test::env_path("SPEAKERSEG_VOICE_MODEL")), {1}),
      0, &error);
  ASSERT_EQ(error, "");
  ASSERT_FALSE(want.empty());

  auto server = std::make_unique<test::OipServer>();
  ASSERT_TRUE(server->started()) << server->why();
  const std::string port = server->port();
  auto voice = make_remote_voice_encoder(reaching(*server));  // checked while the server is up
  server.reset();
  std::thread restart([&] {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    server = test::OipServer::on_port(port);
  });
  const auto got = identify(std::move(voice), 60, &error);
  restart.join();
  ASSERT_TRUE(server->started()) << server->why();
  EXPECT_EQ(error, "");
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].sample, want[i].sample) << i;
    EXPECT_EQ(got[i].speaker, want[i].speaker) << i;
  }
}

// The Triton runs need its virtualenv (scripts/setup.sh makes .venv-triton): where it is
// missing, every case skips saying so, rather than failing for a tool this machine lacks.
class ServerPython : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* python = std::getenv("SPEAKERSEG_TOOLS_PYTHON");
    if (python && access(python, X_OK) != 0)
      GTEST_SKIP() << test::oip_server_kind() << "'s Python " << python
                   << " is missing: scripts/setup.sh makes it";
  }
};
const auto* const kServerPython = ::testing::AddGlobalTestEnvironment(new ServerPython);

}  // namespace
}  // namespace speakerseg
