// Identity by voice on real speech, end to end through the core (segmentation engine, stitcher,
// voice encoder, turn tracker): the two-speaker recording of the reference manifest (sample.wav,
// or the espeak-ng conversation), alone, twice with 30 s of silence between, and with its two
// speakers enrolled by name from their longest turns.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/rttm.h"
#include "common/run_detector.h"
#include "common/temp_dir.h"
#include "common/test_env.h"
#include "engines/cpu/cpu_engine.h"
#include "engines/cpu/cpu_voice_encoder.h"
#include "features/mel_spectrogram.h"
#include "identity/utterance_embedding.h"
#include "identity/voiceprints.h"
#include "io/audio_file.h"
#include "model/model_spec.h"
#include "streaming/speaker_change_detector.h"
#include "streaming/speaker_timeline.h"

namespace speakerseg {
namespace {

using test::Turn;

struct Fixture {
  std::vector<float> audio;
  std::vector<Turn> turns;
  std::unique_ptr<SegmentationEngine> engine;
  std::unique_ptr<VoiceEncoder> voice;
  Fixture() {
    std::ifstream m(test::reference_dir() + "/manifest.txt");
    std::map<std::string, std::string> manifest;
    std::string key, value;
    while (m >> key && std::getline(m >> std::ws, value)) manifest[key] = value;
    audio = read_mono_16k(manifest["recording"]);
    turns = test::read_rttm(manifest["rttm"]);
    // One thread each: meson runs test programs side by side on few cores.
    engine = make_cpu_engine(SegmentationModel::load_onnx(test::model_path()), {1});
    voice = make_cpu_voice_encoder(VoiceModel::load_onnx(test::env_path("SPEAKERSEG_VOICE_MODEL")),
                                   {1});
  }
};

std::vector<SpeakerChange> detect(Fixture& fx, const std::vector<float>& audio, bool reidentify,
                                  std::shared_ptr<const Voiceprints> enrolled = nullptr) {
  StreamSettings s;  // defaults: latency 2 s, step 1 s
  s.identity.enabled = reidentify;
  SpeakerChangeDetector d(*fx.engine, s, 1, reidentify ? fx.voice.get() : nullptr, enrolled);
  const std::vector<SpeakerChange> out = test::run_detector(d, audio);
  for (const auto& c : out)
    std::printf("[ %-8s ] %7.3f s  %-10s -> %-10s voice %.3f\n",
                c.revision   ? "revision"
                : reidentify ? "voice"
                             : "overlap",
                c.sample / double(kSampleRate), (c.revision ? c.was : c.previous).c_str(),
                c.speaker.c_str(), c.voice_score);
  return apply_revisions(out);
}

// The speakers announced for turns that begin in [from, to) seconds.
std::set<std::string> announced(const std::vector<SpeakerChange>& changes, double from, double to) {
  std::set<std::string> out;
  for (const auto& c : changes) {
    const double t = c.sample / double(kSampleRate);
    if (t >= from && t < to && !c.speaker.empty()) out.insert(c.speaker);
  }
  return out;
}

const SpeakerChange* first_after(const std::vector<SpeakerChange>& changes, double t) {
  for (const auto& c : changes)
    if (c.sample / double(kSampleRate) >= t && !c.speaker.empty()) return &c;
  return nullptr;
}

// The timeline in steps (as the shared scheduler drives it): while it waits for a voice it takes
// no window, no end of stream and no embedding of the wrong size, and loses nothing by refusing.
TEST(SpeakerIdentity, TimelineWaitingForAVoiceRefusesWhatWouldLoseItsPlace) {
  Fixture fx;
  StreamSettings s;
  s.identity.enabled = true;
  SpeakerTimeline steps(s), whole(s);
  const int frames = frames_for_samples(kWindowSamples);
  std::vector<float> logprobs(static_cast<size_t>(frames) * kClasses);
  std::vector<SpeakerChange> got;
  EXPECT_THROW(steps.give_voice(std::vector<float>(kEmbeddingDim)), std::logic_error);
  bool refused = false;
  int64_t start = 0;
  // 16 s hold the first decisions and evidence, at half the cost under the sanitizers.
  const int64_t end = std::min<int64_t>(static_cast<int64_t>(fx.audio.size()), 16 * kSampleRate);
  for (; start + kWindowSamples <= end; start += kSampleRate) {
    const float* audio = &fx.audio[static_cast<size_t>(start)];
    fx.engine->forward(audio, 1, kWindowSamples, logprobs.data());
    whole.add_window(start, start + kWindowSamples, logprobs.data(), frames, audio, fx.voice.get());
    steps.begin_window(start, start + kWindowSamples, logprobs.data(), frames, audio);
    while (const UtteranceRequest* r = steps.voice_request()) {
      if (!refused) {
        EXPECT_THROW(steps.begin_window(start + kSampleRate, start + kSampleRate + kWindowSamples,
                                        logprobs.data(), frames, audio),
                     std::logic_error);
        EXPECT_THROW(steps.begin_finish(start + kWindowSamples), std::logic_error);
        EXPECT_THROW(steps.give_voice(std::vector<float>(3)), std::invalid_argument);
        ASSERT_EQ(steps.voice_request(), r) << "a refused call ended the wait";
        refused = true;
      }
      std::vector<std::vector<float>> e;
      embed_utterances(*fx.voice, {r}, e);
      steps.give_voice(std::move(e[0]));
    }
  }
  ASSERT_TRUE(refused) << "no window waited for a voice";
  steps.finish(start + kWindowSamples - kSampleRate, fx.voice.get());
  whole.finish(start + kWindowSamples - kSampleRate, fx.voice.get());
  const auto a = steps.take_changes(), b = whole.take_changes();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].sample, b[i].sample) << "change " << i;
    EXPECT_EQ(a[i].speaker, b[i].speaker) << "change " << i;
    EXPECT_EQ(a[i].voice_score, b[i].voice_score) << "change " << i;
  }
  SpeakerTimeline plain{StreamSettings{}};
  EXPECT_THROW(plain.give_voice(std::vector<float>(kEmbeddingDim)), std::logic_error);
}

TEST(SpeakerIdentity, AloneItChangesNothing) {
  Fixture fx;
  const auto off = detect(fx, fx.audio, false);
  const auto on = detect(fx, fx.audio, true);
  ASSERT_EQ(on.size(), off.size());
  for (size_t i = 0; i < on.size(); ++i) {
    EXPECT_EQ(on[i].sample, off[i].sample) << i;
    EXPECT_EQ(on[i].speaker, off[i].speaker) << i;
  }
  EXPECT_EQ(announced(on, 0, 1e9).size(), 2u);  // two people, never one label
}

TEST(SpeakerIdentity, ASpeakerWhoComesBackAfterSilenceGetsTheirLabelBack) {
  Fixture fx;
  const double length = fx.audio.size() / double(kSampleRate);
  std::vector<float> twice(fx.audio);
  twice.resize(twice.size() + 30 * kSampleRate, 0.f);
  twice.insert(twice.end(), fx.audio.begin(), fx.audio.end());
  const double second = length + 30;

  const auto on = detect(fx, twice, true);
  const std::set<std::string> first_copy = announced(on, 0, length);
  const SpeakerChange* back = first_after(on, second);
  ASSERT_NE(back, nullptr);
  EXPECT_TRUE(first_copy.count(back->speaker)) << back->speaker << " is a new label";
  EXPECT_GT(back->voice_score, 0.75);
  // By the end of the second copy both are back under their first labels.
  for (const std::string& who : announced(on, second + length - 12, 1e9))
    EXPECT_TRUE(first_copy.count(who)) << who << " is a new label late in the second copy";

  // By overlap alone (the stitcher) the returning speaker is somebody new.
  const auto off = detect(fx, twice, false);
  const SpeakerChange* back_off = first_after(off, second);
  ASSERT_NE(back_off, nullptr);
  EXPECT_FALSE(announced(off, 0, length).count(back_off->speaker));
}

TEST(SpeakerIdentity, EnrolledSpeakersAreAnnouncedByName) {
  Fixture fx;
  // Each speaker's longest annotated turn, trimmed of where others overlap it, enrols them.
  std::map<std::string, Turn> longest;
  for (const Turn& t : fx.turns) {
    Turn alone = t;
    for (const Turn& o : fx.turns) {
      if (o.speaker == t.speaker || o.end <= alone.start || o.start >= alone.end) continue;
      if (o.start <= alone.start)
        alone.start = o.end;
      else if (o.end >= alone.end)
        alone.end = o.start;
      else
        alone.end = alone.start;  // someone speaks inside it: not alone anywhere long
    }
    auto it = longest.find(t.speaker);
    if (alone.end > alone.start &&
        (it == longest.end() || alone.end - alone.start > it->second.end - it->second.start))
      longest[t.speaker] = alone;
  }
  ASSERT_EQ(longest.size(), 2u);
  Voiceprints prints;
  const MelSpectrogram mel;
  std::map<std::string, std::string> name_of;
  for (const auto& [who, t] : longest) {
    const auto a = static_cast<size_t>(t.start * kSampleRate),
               b = static_cast<size_t>(t.end * kSampleRate);
    const auto e = utterance_embedding(*fx.voice, mel, &fx.audio[a], static_cast<int64_t>(b - a));
    ASSERT_FALSE(e.empty()) << who << "'s longest turn is too short to enrol";
    name_of[who] = name_of.empty() ? "Alice" : "Bob";
    prints.enroll(name_of[who], e, t.end - t.start);
  }
  const std::string path = test::scratch().path() + "/enrolled.json";
  prints.save(path);
  const auto changes = detect(fx, fx.audio, true, Voiceprints::load(path));
  // Once each has been heard alone long enough, turns carry their names, and only their names.
  const double length = fx.audio.size() / double(kSampleRate);
  const std::set<std::string> late = announced(changes, length * 0.6, 1e9);
  EXPECT_EQ(late, (std::set<std::string>{"Alice", "Bob"}));
  // Each name goes to its own speaker: the annotated speaker of a late turn is the one enrolled
  // under that name.
  for (const auto& c : changes) {
    const double t = c.sample / double(kSampleRate);
    if (t < length * 0.6 || c.speaker.empty()) continue;
    for (const Turn& turn : fx.turns)
      if (t >= turn.start - 0.5 && t < turn.start + 0.5) {
        EXPECT_EQ(name_of[turn.speaker], c.speaker) << "turn at " << t << " s";
        break;
      }
  }
}

// The reference speaker who talks most within [a, b), or "" where nobody does.
std::string dominant(const std::vector<Turn>& turns, double a, double b) {
  std::map<std::string, double> talk;
  for (const Turn& t : turns)
    talk[t.speaker] += std::max(0.0, std::min(b, t.end) - std::max(a, t.start));
  std::string best;
  for (const auto& [who, seconds] : talk)
    if (seconds > 0 && (best.empty() || seconds > talk[best])) best = who;
  return best;
}

// sample.wav, then trn05 (other people, none of sample's), then sample.wav again. The stitcher
// carries sample's first label across the join onto trn05's main speaker; by voice, the newcomer
// must get a label of their own once the label's evidence has told them apart (two evidence
// embeddings of 3 s of clean speech: the announced turns from 15 s into trn05 on), and sample's
// speakers must come back under their first labels.
TEST(SpeakerIdentity, TwoPeopleAreNotMerged) {
  Fixture fx;
  std::ifstream m(test::reference_dir() + "/manifest.txt");
  std::map<std::string, std::string> manifest;
  std::string key, value;
  while (m >> key && std::getline(m >> std::ws, value)) manifest[key] = value;
  if (manifest["source"] != "shared")
    GTEST_SKIP() << "needs the shared AMI recordings (the references were synthesised)";
  const std::string& recording = manifest["recording"];
  const std::string folder = recording.substr(0, recording.rfind('/'));
  const std::vector<float> other = read_mono_16k(folder + "/trn05.wav");
  const double length = fx.audio.size() / double(kSampleRate);
  const double other_length = other.size() / double(kSampleRate);
  std::vector<float> joined(fx.audio);
  joined.insert(joined.end(), other.begin(), other.end());
  joined.insert(joined.end(), fx.audio.begin(), fx.audio.end());
  std::vector<Turn> reference = fx.turns;
  for (const Turn& t : test::read_rttm(folder + "/train.rttm", "trn05", length))
    reference.push_back(t);
  for (const Turn& t : fx.turns)
    reference.push_back(
        {t.speaker, t.start + length + other_length, t.end + length + other_length});

  const auto changes = detect(fx, joined, true);
  // Each announced turn, with the reference speaker who talks most in it.
  struct Announced {
    double start, end;
    std::string label, who;
  };
  std::vector<Announced> turns;
  for (size_t i = 0; i < changes.size(); ++i) {
    if (changes[i].speaker.empty()) continue;
    const double a = changes[i].sample / double(kSampleRate);
    const double b = i + 1 < changes.size() ? changes[i + 1].sample / double(kSampleRate)
                                            : joined.size() / double(kSampleRate);
    turns.push_back({a, b, changes[i].speaker, dominant(reference, a, b)});
  }
  std::set<std::string> sample_people, first_labels;
  for (const Turn& t : fx.turns) sample_people.insert(t.speaker);
  for (const auto& t : turns)
    if (t.end <= length && sample_people.count(t.who)) first_labels.insert(t.label);
  ASSERT_FALSE(first_labels.empty());
  // Within trn05, from 15 s on: the announced time of trn05's people, and how much of it went to a
  // label of sample's speakers.
  const double from = length + 15, to = length + other_length;
  double newcomer_seconds = 0, merged_seconds = 0;
  for (const auto& t : turns) {
    const double a = std::max(t.start, from), b = std::min(t.end, to);
    if (b <= a) continue;
    const std::string who = dominant(reference, a, b);
    if (who.empty() || sample_people.count(who)) continue;
    newcomer_seconds += b - a;
    if (first_labels.count(t.label)) {
      merged_seconds += b - a;
      ADD_FAILURE() << who << " (trn05) announced as " << t.label << ", a label of sample's "
                    << "speakers, at " << a << "-" << b << " s";
    }
  }
  std::printf(
      "[ identity ] trn05's people from 15 s on: %.1f s announced, %.1f s under a label of "
      "sample's speakers\n",
      newcomer_seconds, merged_seconds);
  EXPECT_GT(newcomer_seconds, 5.0) << "trn05's people were hardly announced at all";
  // sample's speakers in its second copy: under their first labels by its second half.
  for (const auto& t : turns) {
    if (t.start >= length + other_length + length / 2 && sample_people.count(t.who)) {
      EXPECT_TRUE(first_labels.count(t.label))
          << t.who << " came back as " << t.label << " at " << t.start << " s";
    }
  }
}

// A news-like stretch of LibriSpeech (../shared/data/librispeech): an anchor, reader 1688 of
// test-other, enrolled from two utterances of theirs, reads four more between three soundbites of
// other people (train-clean-100), 0.5 s apart. The stitcher carries labels across those gaps;
// by voice, every anchor turn after the soundbites is announced with the anchor's name, and no
// soundbite with it. (Before an enrolled name had to be the best match to stay, the third
// soundbite's first 2.6 s went out under the anchor's name.)
TEST(SpeakerIdentity, AnEnrolledAnchorIsNamedBetweenSoundbites) {
  const std::string dir = test::env_path("SPEAKERSEG_LIBRISPEECH_DIR");
  const auto flac = [&](const std::string& name) {
    const std::string reader = name.substr(0, name.find('-'));
    const std::string subset = reader == "1688" ? "test-other/" + reader : "train-clean-100";
    return dir + "/audio/" + subset + "/" + name + ".flac";
  };
  if (!std::ifstream(flac("1688-142285-0000")))
    GTEST_SKIP() << "needs ../shared/data/librispeech (" << dir << ")";
  Fixture fx;
  const MelSpectrogram mel;
  std::vector<float> enrolment;
  for (const char* name : {"1688-142285-0000", "1688-142285-0001"}) {
    const std::vector<float> x = read_mono_16k(flac(name));
    enrolment.insert(enrolment.end(), x.begin(), x.end());
  }
  Voiceprints prints;
  prints.enroll(
      "Anchor",
      utterance_embedding(*fx.voice, mel, enrolment.data(), static_cast<int64_t>(enrolment.size())),
      enrolment.size() / double(kSampleRate));
  const std::string path = test::scratch().path() + "/anchor.json";
  prints.save(path);

  struct Part {
    bool anchor;
    double start, end;
  };
  std::vector<Part> parts;
  std::vector<float> programme;
  for (const char* name :
       {"1688-142285-0003", "103-1240-0000", "1688-142285-0004", "1034-121119-0000",
        "1688-142285-0005", "1040-133433-0000", "1688-142285-0006"}) {
    const std::vector<float> x = read_mono_16k(flac(name));
    const double start = programme.size() / double(kSampleRate);
    parts.push_back(
        {std::string(name).rfind("1688", 0) == 0, start, start + x.size() / double(kSampleRate)});
    programme.insert(programme.end(), x.begin(), x.end());
    programme.resize(programme.size() + kSampleRate / 2, 0.f);
  }
  const auto changes = detect(fx, programme, true, Voiceprints::load(path));
  // Seconds of [a, b) announced with the anchor's name.
  const auto named = [&](double a, double b) {
    double out = 0;
    for (size_t i = 0; i < changes.size(); ++i) {
      if (changes[i].speaker != "Anchor") continue;
      const double from = changes[i].sample / double(kSampleRate);
      const double to = i + 1 < changes.size() ? changes[i + 1].sample / double(kSampleRate)
                                               : programme.size() / double(kSampleRate);
      out += std::max(0.0, std::min(b, to) - std::max(a, from));
    }
    return out;
  };
  for (const Part& part : parts) {
    const double share = named(part.start, part.end) / (part.end - part.start);
    std::printf("[ anchor   ] %s %6.2f-%6.2f s: %.2f named Anchor\n",
                part.anchor ? "anchor   " : "soundbite", part.start, part.end, share);
    // The utterances hold their reader's silence at either end: 0.77-0.88 of an anchor's is
    // announced with the name here.
    if (part.anchor)
      EXPECT_GE(share, 0.6) << "the anchor's turn at " << part.start << " s";
    else
      EXPECT_LE(share, 0.05) << "the soundbite at " << part.start << " s";
  }
}

}  // namespace
}  // namespace speakerseg
