// The fused LSTM recurrence (core/engines/cpu/lstm_recurrence.h) for every instruction set this
// CPU runs, against a plain double-precision LSTM written here from the ONNX definition: random
// weights and the real segmentation-3.0 and GE2E recurrent weights, hidden 128 and 256, one to
// seven sequences (every chunk size and remainder of every set), both directions, the strided
// layouts the engines use. Then what the engines rely on: a sequence's result does not depend on
// the sequences it runs with, nor on the jobs stepped in lockstep with it, nor on how many threads
// share one sequence.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/bf16_reference.h"
#include "common/test_env.h"
#include "common/xorshift.h"
#include "engines/cpu/lstm_recurrence.h"
#include "model/segmentation_model.h"
#include "model/voice_model.h"

namespace speakerseg {
namespace {

using cpu::LstmIsa;

struct Direction {
  int hidden = 0;
  std::vector<float> r, bias;  // [4H][H], [4H], gate order i, o, f, c
};

Direction random_direction(int hidden, uint32_t seed, float scale) {
  test::Xorshift rng(seed);
  auto uniform = [&] { return scale * (static_cast<float>(rng.below(20001)) / 10000.f - 1.f); };
  Direction d;
  d.hidden = hidden;
  d.r.resize(static_cast<size_t>(4) * hidden * hidden);
  d.bias.resize(4 * hidden);
  for (float& x : d.r) x = uniform();
  for (float& x : d.bias) x = uniform();
  return d;
}

// Sequences laid out as the segmentation engine lays out one direction of a bidirectional layer:
// gate rows 2 x 4H apart, hidden rows 2H apart, both directions of a row side by side.
struct Sequences {
  int count, steps, hidden;
  std::vector<float> gates, out, cell;
  size_t gates_step() const { return 8 * static_cast<size_t>(hidden); }
  size_t gates_sequence() const { return gates_step() * steps; }
  size_t hidden_step() const { return 2 * static_cast<size_t>(hidden); }
  size_t hidden_sequence() const { return hidden_step() * steps; }
};

Sequences random_sequences(int count, int steps, int hidden, uint32_t seed) {
  Sequences s{count, steps, hidden, {}, {}, {}};
  test::Xorshift rng(seed);
  s.gates.resize(s.gates_sequence() * count);
  for (float& x : s.gates) x = 2.f * (static_cast<float>(rng.below(20001)) / 10000.f - 1.f);
  s.out.assign(s.hidden_sequence() * count, NAN);
  s.cell.assign(static_cast<size_t>(count) * hidden, NAN);
  return s;
}

cpu::LstmRecurrenceJob job_for(const cpu::PackedLstmWeights& w, Sequences& s, int direction) {
  cpu::LstmRecurrenceJob job;
  job.weights = &w;
  job.gates = s.gates.data() + static_cast<size_t>(direction) * 4 * s.hidden;
  job.gates_sequence = s.gates_sequence();
  job.gates_step = s.gates_step();
  job.hidden = s.out.data() + static_cast<size_t>(direction) * s.hidden;
  job.hidden_sequence = s.hidden_sequence();
  job.hidden_step = s.hidden_step();
  job.cell = s.cell.data();
  job.sequences = s.count;
  job.reverse = direction == 1;
  return job;
}

// h(t) of sequence b, direction d, in double with libm's exp and tanh; with `rounded`, the
// products take bf16 weights and a bf16 h(t-1), as the bf16 kernel's do.
std::vector<double> reference(const Direction& w, const Sequences& s, int b, int d, bool rounded) {
  const int H = w.hidden;
  auto r = [&](size_t i) {
    return rounded ? test::bf16_rounded(w.r[i]) : static_cast<double>(w.r[i]);
  };
  std::vector<double> h(H, 0.0), c(H, 0.0), out(static_cast<size_t>(s.steps) * H);
  auto sigmoid = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  for (int step = 0; step < s.steps; ++step) {
    const int t = d == 0 ? step : s.steps - 1 - step;
    const float* pre = s.gates.data() + b * s.gates_sequence() + t * s.gates_step() + d * 4 * H;
    std::vector<double> next(H);
    for (int j = 0; j < H; ++j) {
      double g[4];
      for (int q = 0; q < 4; ++q) {
        double sum = static_cast<double>(pre[q * H + j]) + w.bias[q * H + j];
        for (int k = 0; k < H; ++k)
          sum += r((static_cast<size_t>(q) * H + j) * H + k) *
                 (rounded ? test::bf16_rounded(h[k]) : h[k]);
        g[q] = sum;
      }
      c[j] = sigmoid(g[2]) * c[j] + sigmoid(g[0]) * std::tanh(g[3]);
      next[j] = sigmoid(g[1]) * std::tanh(c[j]);
    }
    h = next;
    for (int j = 0; j < H; ++j) out[static_cast<size_t>(t) * H + j] = h[j];
  }
  return out;
}

double worst_error(const Direction& w, const Sequences& s, int d, bool rounded) {
  double worst = 0;
  for (int b = 0; b < s.count; ++b) {
    const std::vector<double> want = reference(w, s, b, d, rounded);
    for (int t = 0; t < s.steps; ++t)
      for (int j = 0; j < w.hidden; ++j) {
        const float got = s.out[b * s.hidden_sequence() + t * s.hidden_step() + d * w.hidden + j];
        const double e = std::fabs(got - want[static_cast<size_t>(t) * w.hidden + j]);
        worst = std::isnan(got) ? INFINITY : std::max(worst, e);
      }
  }
  return worst;
}

class LstmRecurrence : public ::testing::TestWithParam<LstmIsa> {
 protected:
  void SetUp() override {
    if (!cpu::lstm_isa_supported(GetParam()))
      GTEST_SKIP() << "this CPU does not run the " << cpu::lstm_isa_name(GetParam()) << " kernel";
  }
  // Runs both directions of `s` through `w` (one per direction) and checks them.
  void check(const Direction (&w)[2], Sequences& s, const std::string& what,
             double tolerance = 2e-5) {
    const cpu::PackedLstmWeights packed[2] = {
        {w[0].r.data(), w[0].bias.data(), w[0].hidden, GetParam()},
        {w[1].r.data(), w[1].bias.data(), w[1].hidden, GetParam()}};
    std::vector<float> cell1(s.cell.size());
    cpu::LstmRecurrenceJob jobs[2] = {job_for(packed[0], s, 0), job_for(packed[1], s, 1)};
    jobs[1].cell = cell1.data();
    cpu::run_lstm_recurrence(jobs, 2, s.steps);
    // bf16: against the reference that rounds as the kernel does. The reference rounds h(t-1)
    // from double, the kernel from float, so a value next to a rounding edge can land one bf16
    // step (2^-9 of it) apart, and the difference then carries on: up to ~5e-4 seen.
    const bool bf16 = GetParam() == LstmIsa::kAvx512Bf16;
    if (bf16) tolerance = std::max(tolerance, 2e-3);
    for (int d = 0; d < 2; ++d) {
      const double error = worst_error(w[d], s, d, bf16);
      EXPECT_LT(error, tolerance) << what << ", " << s.count << " sequences, direction " << d;
      if (bf16)
        std::printf(
            "[ bf16     ] %s, %d sequences, direction %d: %.2g from the rounded "
            "reference, %.2g from the fp32 one\n",
            what.c_str(), s.count, d, error, worst_error(w[d], s, d, false));
    }
  }
};

TEST_P(LstmRecurrence, MatchesAPlainLstmOnRandomWeights) {
  for (int hidden : {128, 256}) {
    const Direction w[2] = {random_direction(hidden, 11, 0.15f),
                            random_direction(hidden, 12, 0.15f)};
    for (int count = 1; count <= 7; ++count) {
      Sequences s = random_sequences(count, 9, hidden, 100 + count);
      check(w, s, "hidden " + std::to_string(hidden));
    }
  }
}

TEST_P(LstmRecurrence, MatchesAPlainLstmOnTheRealNetworks) {
  // Fed random gate inputs, the trained layers amplify a difference of one bf16 step in h(t-1)
  // (the reference rounds from double, the kernel from float) to 0.1 within 40 steps: no
  // reference rounding can follow that. bf16 on the real networks is measured end to end
  // instead (EngineBf16 in engine_parity, VoiceEncoder.Bf16PartialsStayNearTheOriginalWeights).
  if (GetParam() == LstmIsa::kAvx512Bf16) GTEST_SKIP() << "bf16: checked end to end instead";
  const auto seg = SegmentationModel::load_onnx(test::env_path("SPEAKERSEG_MODEL"));
  for (int layer : {0, 3}) {
    Direction w[2];
    for (int d = 0; d < 2; ++d) {
      const size_t n = static_cast<size_t>(kLstmGates) * kLstmHidden;
      w[d].hidden = kLstmHidden;
      w[d].r.assign(seg->lstm[layer].r.begin() + d * n, seg->lstm[layer].r.begin() + (d + 1) * n);
      w[d].bias.assign(seg->lstm[layer].bias.begin() + d * kLstmGates,
                       seg->lstm[layer].bias.begin() + (d + 1) * kLstmGates);
    }
    // The trained weights are larger than the random ones: float sums of 128 products over 40
    // steps drift by up to ~3e-5 from the double reference (the sgemm path did the same).
    Sequences s = random_sequences(3, 40, kLstmHidden, 7);
    check(w, s, "segmentation-3.0 layer " + std::to_string(layer), 1e-4);
  }
  const std::string voice = test::env_path("SPEAKERSEG_VOICE_MODEL");
  const auto ge2e = VoiceModel::load_onnx(voice);
  Direction w[2];
  for (int d = 0; d < 2; ++d) w[d] = {kVoiceHidden, ge2e->lstm[2 - d].r, ge2e->lstm[2 - d].bias};
  Sequences s = random_sequences(2, 40, kVoiceHidden, 8);
  check(w, s, "GE2E layers 3 and 2", 1e-4);
}

// The engines batch windows of different streams together, and step directions and groups in
// lockstep: none of that may change a sequence's numbers, not even in the last bit.
TEST_P(LstmRecurrence, ASequenceDoesNotDependOnItsCompany) {
  const int hidden = 128, steps = 11;
  const Direction w = random_direction(hidden, 21, 0.2f);
  const cpu::PackedLstmWeights packed(w.r.data(), w.bias.data(), hidden, GetParam());
  Sequences all = random_sequences(7, steps, hidden, 5);
  cpu::LstmRecurrenceJob job = job_for(packed, all, 0);
  cpu::run_lstm_recurrence(&job, 1, steps);
  for (int b = 0; b < 7; ++b) {
    Sequences one{1, steps, hidden, {}, {}, {}};
    one.gates.assign(all.gates.begin() + b * all.gates_sequence(),
                     all.gates.begin() + (b + 1) * all.gates_sequence());
    one.out.assign(one.hidden_sequence(), NAN);
    one.cell.assign(hidden, NAN);
    // Stepped in lockstep with an unrelated reverse job.
    Sequences other = random_sequences(2, steps, hidden, 99);
    cpu::LstmRecurrenceJob jobs[2] = {job_for(packed, one, 0), job_for(packed, other, 1)};
    cpu::run_lstm_recurrence(jobs, 2, steps);
    for (int t = 0; t < steps; ++t)
      ASSERT_EQ(0, std::memcmp(&one.out[t * one.hidden_step()],
                               &all.out[b * all.hidden_sequence() + t * all.hidden_step()],
                               hidden * sizeof(float)))
          << "sequence " << b << " of 7 differs from itself alone at step " << t;
  }
}

// The voice encoder splits a few partials' hidden units across threads that meet after every
// step: the same numbers, bit for bit, for every share (even and uneven, more threads than cores),
// one sequence or several, both directions. A part that read h(t-1) before its peers had written it
// would differ.
TEST_P(LstmRecurrence, SequencesSplitAcrossThreadsAreTheSameBitForBit) {
  const int steps = 23;
  for (int hidden : {96, 256}) {
    const Direction w = random_direction(hidden, 31, 0.2f);
    const cpu::PackedLstmWeights packed(w.r.data(), w.bias.data(), hidden, GetParam());
    for (int d = 0; d < 2; ++d)
      for (int count : {1, 3}) {
        Sequences whole = random_sequences(count, steps, hidden, 40 + d + count);
        cpu::LstmRecurrenceJob job = job_for(packed, whole, d);
        cpu::run_lstm_recurrence(&job, 1, steps);
        for (int threads : {2, 3, 5}) {
          Sequences split = whole;
          std::fill(split.out.begin(), split.out.end(), NAN);
          std::fill(split.cell.begin(), split.cell.end(), NAN);
          cpu::run_lstm_recurrence_split(job_for(packed, split, d), steps, threads);
          ASSERT_EQ(
              0, std::memcmp(split.out.data(), whole.out.data(), split.out.size() * sizeof(float)))
              << "hidden " << hidden << ", direction " << d << ", " << count << " sequences, "
              << threads << " threads";
        }
      }
  }
}

TEST_P(LstmRecurrence, RefusesAHiddenSizeItsLanesDoNotDivide) {
  const Direction w = random_direction(12, 3, 0.1f);
  if (GetParam() == LstmIsa::kScalar) {
    EXPECT_NO_THROW(cpu::PackedLstmWeights(w.r.data(), w.bias.data(), 12, GetParam()));
  } else {
    EXPECT_THROW(cpu::PackedLstmWeights(w.r.data(), w.bias.data(), 12, GetParam()),
                 std::invalid_argument);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryInstructionSet, LstmRecurrence,
                         ::testing::Values(LstmIsa::kAvx512, LstmIsa::kAvx2, LstmIsa::kScalar,
                                           LstmIsa::kAvx512Bf16),
                         [](const auto& info) {
                           std::string name = cpu::lstm_isa_name(info.param);
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

TEST(LstmIsa, TheChosenSetRunsOnThisCpu) {
  EXPECT_TRUE(cpu::lstm_isa_supported(cpu::lstm_isa())) << cpu::lstm_isa_name(cpu::lstm_isa());
  std::printf("[ isa      ] LSTM kernel: %s\n", cpu::lstm_isa_name(cpu::lstm_isa()));
}

}  // namespace
}  // namespace speakerseg
