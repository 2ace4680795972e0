// The voiceprints file (round trip, refinement, every kind of bad file), the registry of voices
// (nearest match, what it forgets and what it never forgets) and the audio history.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "common/temp_dir.h"
#include "identity/audio_history.h"
#include "identity/voice_registry.h"
#include "identity/voiceprints.h"
#include "model/voice_model.h"

namespace speakerseg {
namespace {

std::vector<float> unit(int hot, float other = 0.f) {
  std::vector<float> v(kEmbeddingDim, other);
  v[hot] = 1.f;
  double norm = 0;
  for (float x : v) norm += x * x;
  for (float& x : v) x = static_cast<float>(x / std::sqrt(norm));
  return v;
}

std::string embedding_json(const std::vector<float>& e) {
  std::string s = "[";
  for (size_t i = 0; i < e.size(); ++i) s += (i ? "," : "") + std::to_string(e[i]);
  return s + "]";
}

std::string file_with(const std::string& name, const std::string& header,
                      const std::string& speakers) {
  return test::scratch().file(name, "{" + header + ", \"speakers\": [" + speakers + "]}");
}

const std::string kHeader =
    "\"format\": \"speakerchange-voiceprints\", \"version\": 1, \"encoder\": "
    "\"resemblyzer-ge2e-0.1.4\", \"dimension\": 256";

void expect_error(const std::string& path, const std::string& what) {
  try {
    Voiceprints::load(path);
    ADD_FAILURE() << path << " loaded but should not have";
  } catch (const VoiceprintsError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << "message does not name the file: " << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << "expected '" << what << "' in: " << msg;
    EXPECT_NE(msg.find("speakerseg enroll"), std::string::npos) << "no way to fix it: " << msg;
  }
}

TEST(Voiceprints, RoundTripAndRefinement) {
  Voiceprints p;
  p.enroll("Alice", unit(0), 4);
  p.enroll("Bob", unit(1), 2);
  p.enroll("Alice", unit(2), 4);  // a second clip of Alice: folded in, weighted by seconds
  const std::string path = test::scratch().path() + "/prints.json";
  p.save(path);
  auto q = Voiceprints::load(path);
  ASSERT_EQ(q->speakers.size(), 2u);
  EXPECT_EQ(q->speakers[0].name, "Alice");
  EXPECT_DOUBLE_EQ(q->speakers[0].seconds, 8);
  EXPECT_NEAR(q->speakers[0].embedding[0], std::sqrt(0.5), 1e-6);
  EXPECT_NEAR(q->speakers[0].embedding[2], std::sqrt(0.5), 1e-6);
  EXPECT_EQ(q->speakers[1].embedding, unit(1));
}

// How much of an enrolment was telephone band travels with it: written, read back, folded by
// seconds; a file from before the field reads as wideband.
TEST(Voiceprints, KeepTheTelephoneBandOfTheirSpeech) {
  Voiceprints p;
  p.enroll("Caller", unit(0), 4, true);
  p.enroll("Host", unit(1), 6);
  p.enroll("Host", unit(1), 2, true);
  const std::string path = test::scratch().path() + "/narrow.json";
  p.save(path);
  auto q = Voiceprints::load(path);
  ASSERT_EQ(q->speakers.size(), 2u);
  EXPECT_DOUBLE_EQ(q->speakers[0].narrowband, 4);
  EXPECT_TRUE(q->speakers[0].is_narrowband());
  EXPECT_DOUBLE_EQ(q->speakers[1].narrowband, 2);
  EXPECT_FALSE(q->speakers[1].is_narrowband());  // 2 of 8 s
  auto old = Voiceprints::load(file_with(
      "old.json", kHeader,
      "{\"name\": \"A\", \"seconds\": 3, \"embedding\": " + embedding_json(unit(0)) + "}"));
  EXPECT_DOUBLE_EQ(old->speakers[0].narrowband, 0);
  VoiceRegistry r(8);
  const int caller = r.enroll("Caller", unit(0), true);
  const int host = r.enroll("Host", unit(1));
  EXPECT_TRUE(r.find(caller)->narrowband());
  EXPECT_FALSE(r.find(host)->narrowband());
  const auto scores = r.scores(unit(0), [](int) { return true; });
  ASSERT_EQ(scores.size(), 2u);
  EXPECT_TRUE(scores[0].narrowband && scores[0].enrolled);
  EXPECT_FALSE(scores[1].narrowband);
}

// When a turn's evidence last named an enrolled person, apart from when they were last heard
// (continuity and merges make them heard, not named); a new time line has named nobody.
TEST(VoiceRegistry, RemembersWhenEvidenceLastNamedSomebody) {
  VoiceRegistry r(8);
  const int host = r.enroll("Host", unit(0));
  EXPECT_EQ(r.find(host)->last_named, -1);
  r.heard(host, 16000);
  EXPECT_EQ(r.find(host)->last_named, -1);
  r.named(host, 32000);
  r.named(host, 8000);
  EXPECT_EQ(r.find(host)->last_named, 32000);
  const int guest = r.add(unit(1), 3, 48000);
  EXPECT_EQ(r.find(guest)->first_heard, 48000);
  r.reset();
  EXPECT_EQ(r.find(host)->last_named, -1);
}

TEST(Voiceprints, RefusesBadFiles) {
  const std::string good =
      "{\"name\": \"A\", \"seconds\": 3, \"embedding\": " + embedding_json(unit(0)) + "}";
  expect_error(test::scratch().path() + "/none.json", "cannot be opened");
  expect_error(test::scratch().path(), "is not a regular file");
  expect_error(test::scratch().file("broken.json", "{\"format\": "), "is not valid JSON");
  expect_error(test::scratch().file("other.json", "{\"name\": 1}"), "is not a voiceprints file");
  expect_error(file_with("v2.json",
                         "\"format\": \"speakerchange-voiceprints\", \"version\": 2, \"encoder\": "
                         "\"resemblyzer-ge2e-0.1.4\", \"dimension\": 256",
                         good),
               "has version 2");
  expect_error(file_with("enc.json",
                         "\"format\": \"speakerchange-voiceprints\", \"version\": 1, \"encoder\": "
                         "\"wespeaker-resnet34\", \"dimension\": 256",
                         good),
               "was made with encoder 'wespeaker-resnet34'");
  expect_error(file_with("dim.json",
                         "\"format\": \"speakerchange-voiceprints\", \"version\": 1, \"encoder\": "
                         "\"resemblyzer-ge2e-0.1.4\", \"dimension\": 192",
                         good),
               "has dimension 192");
  expect_error(file_with("short.json", kHeader,
                         "{\"name\": \"A\", \"embedding\": " +
                             embedding_json(std::vector<float>(192, 0.072f)) + "}"),
               "has 192 values");
  expect_error(file_with("twice.json", kHeader, good + "," + good), "names 'A' twice");
  expect_error(file_with("negative.json", kHeader,
                         "{\"name\": \"A\", \"seconds\": -1, \"embedding\": " +
                             embedding_json(unit(0)) + "}"),
               "negative or non-numeric \"seconds\"");
  expect_error(file_with("narrow.json", kHeader,
                         "{\"name\": \"A\", \"seconds\": 3, \"narrowband\": 4, \"embedding\": " +
                             embedding_json(unit(0)) + "}"),
               "\"narrowband\" outside");
  std::vector<float> not_unit = unit(0);
  not_unit[0] = 2;
  expect_error(file_with("norm.json", kHeader,
                         "{\"name\": \"A\", \"embedding\": " + embedding_json(not_unit) + "}"),
               "no unit-length embedding");
  expect_error(file_with("noname.json", kHeader, "{\"embedding\": [1]}"), "is malformed");
}

TEST(VoiceRegistry, ScoresTheAllowedVoicesWithAVoiceprint) {
  VoiceRegistry r(10);
  const int alice = r.enroll("Alice", unit(0));
  const int a = r.add(unit(1), 3, 0);
  const int b = r.add({}, 0, 0);  // provisional: no voiceprint, never a match
  EXPECT_EQ(r.names()[a], "speaker-0");
  EXPECT_EQ(r.names()[b], "speaker-1");
  const auto all = r.scores(unit(1, 0.1f), [](int) { return true; });
  ASSERT_EQ(all.size(), 2u);  // not the provisional voice
  EXPECT_EQ(all[0].id, alice);
  EXPECT_TRUE(all[0].enrolled);
  EXPECT_EQ(all[1].id, a);
  EXPECT_GT(all[1].score, all[0].score);
  const auto others = r.scores(unit(1, 0.1f), [&](int id) { return id != a; });
  ASSERT_EQ(others.size(), 1u);
  EXPECT_EQ(others[0].id, alice);
  EXPECT_TRUE(r.scores(unit(5), [&](int id) { return id == b; }).empty());
  // A voiceprint of telephone speech is narrowband while most of its seconds are.
  const int c = r.add(unit(4), 2, 0);
  r.learn(c, unit(4), 3, 0, true);
  EXPECT_TRUE(r.scores(unit(4), [&](int id) { return id == c; })[0].narrowband);
  // Learning moves a voiceprint; an enrolled one stays as enrolled.
  r.learn(a, unit(2), 3, 1);
  EXPECT_NEAR(r.score(a, unit(2)), std::sqrt(0.5), 1e-5);
  r.learn(alice, unit(3), 100, 1);
  EXPECT_NEAR(r.score(alice, unit(0)), 1.0, 1e-6);
}

TEST(VoiceRegistry, ForgetsTheLeastRecentlyHeardButNeverTheEnrolled) {
  VoiceRegistry r(3);
  const int alice = r.enroll("Alice", unit(0));
  const int first = r.add(unit(1), 1, 100);
  const int second = r.add(unit(2), 1, 200);
  r.heard(first, 300);  // `second` is now the least recently heard
  const int third = r.add(unit(3), 1, 400);
  EXPECT_EQ(r.size(), 3u);
  EXPECT_NE(r.find(alice), nullptr);
  EXPECT_NE(r.find(first), nullptr);
  EXPECT_EQ(r.find(second), nullptr);
  EXPECT_NE(r.find(third), nullptr);
  EXPECT_EQ(r.names()[second], "speaker-1");  // old turns still name it
  r.reset();
  EXPECT_EQ(r.size(), 1u);
  EXPECT_EQ(r.add({}, 0, 0), 1);  // enrolled ids stay, anonymous numbering restarts
  EXPECT_EQ(r.names()[1], "speaker-0");
}

TEST(AudioHistory, KeepsWhatIsNewAndDropsWhatIsRead) {
  AudioHistory h;
  std::vector<float> window(100);
  for (int i = 0; i < 100; ++i) window[i] = static_cast<float>(i);
  h.add(-20, window.data(), 100);  // a left-padded first window: stream samples 0..79
  std::vector<float> out;
  EXPECT_EQ(h.copy(-5, 3, out), 3);
  EXPECT_EQ(out, (std::vector<float>{20, 21, 22}));
  h.add(30, window.data(), 100);  // overlaps: only 80..129 are new
  EXPECT_EQ(h.end(), 130);
  out.clear();
  h.copy(79, 81, out);
  EXPECT_EQ(out, (std::vector<float>{99, 50}));
  h.drop_before(100);
  out.clear();
  EXPECT_EQ(h.copy(90, 102, out), 2);
  EXPECT_EQ(out, (std::vector<float>{70, 71}));
}

TEST(AudioHistory, GivesTheStreamBackWhileItsRingWrapsAndGrows) {
  // Overlapping windows of a stream whose sample s is s itself; what is read grows from 3 000 to
  // 14 750 samples (the ring doubles from 4 096 to 32 768, twice while its contents wrap) and is
  // read back across the wrap.
  AudioHistory h;
  std::vector<float> window(5000);
  int64_t kept = 3000;
  for (int64_t start = -1000; start < 400000; start += 1700, kept += 50) {
    for (int i = 0; i < 5000; ++i) window[i] = static_cast<float>(start + i);
    h.add(start, window.data(), 5000);
    ASSERT_EQ(h.end(), start + 5000);
    const int64_t from = std::max<int64_t>(0, h.end() - kept);
    std::vector<float> out = {-1};  // appended to, not replaced
    ASSERT_EQ(h.copy(from, h.end() + 7, out), h.end() - from);
    ASSERT_EQ(out.front(), -1);
    for (size_t i = 1; i < out.size(); ++i)
      ASSERT_EQ(out[i], static_cast<float>(from + static_cast<int64_t>(i) - 1)) << start;
    h.drop_before(from);
  }
}

TEST(AudioHistory, PutsWhatFollowsAGapAtItsOwnPlace) {
  // Windows dropped between two that are kept: the samples after the gap are where they belong,
  // the gap is silence, and what was held before it is still there. A gap longer than a window
  // starts the history again.
  AudioHistory h;
  std::vector<float> window(3000);
  const auto push = [&](int64_t start) {
    for (int i = 0; i < 3000; ++i) window[i] = static_cast<float>(start + i);
    h.add(start, window.data(), 3000);
  };
  push(0);
  push(1000);  // held: 0..3999
  push(9000);  // a gap of 5 000
  EXPECT_EQ(h.end(), 12000);
  std::vector<float> out;
  EXPECT_EQ(h.copy(3998, 4002, out), 4);
  EXPECT_EQ(out, (std::vector<float>{3998, 3999, 0, 0}));
  out.clear();
  EXPECT_EQ(h.copy(8999, 9002, out), 3);
  EXPECT_EQ(out, (std::vector<float>{0, 9000, 9001}));
  out.clear();
  push(200000);  // longer than a window
  EXPECT_EQ(h.copy(0, 200002, out), 2);
  EXPECT_EQ(out, (std::vector<float>{200000, 200001}));
}

}  // namespace
}  // namespace speakerseg
