// Everyone a stream has heard or been told about: a voiceprint per person (the mean of their
// utterance embeddings, or an enrolled one), a name, and when they were last heard. Bounded: past
// `capacity` people the one heard least recently is forgotten (enrolled people never are).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace speakerseg {

struct Voice {
  int id = -1;       // stable for the stream's life; frames and turns use it
  std::string name;  // "speaker-3", or an enrolled name
  bool enrolled = false;
  std::vector<float> sum;  // weighted sum of embeddings; empty: no voice heard yet
  double weight = 0;       // seconds of clean speech behind `sum`
  double narrow = 0;       // ... of it narrowband (telephone)
  int64_t last_heard = 0;  // stream sample position
  int64_t first_heard = 0;
  int64_t last_named = -1;  // enrolled: when a turn's evidence last gave or kept their name
  bool has_voiceprint() const { return weight > 0; }
  bool narrowband() const { return 2 * narrow > weight; }
};

struct Match {
  int id = -1;  // -1: nobody
  float score = 0;
  bool enrolled = false;
  bool narrowband = false;  // the voice's speech was mostly telephone band
  double seconds = 0;       // speech behind the voiceprint (enrolled: kEnrolledSeconds)
};
// An enrolled voiceprint is made from a clip chosen for it: counted as much speech as any.
constexpr double kEnrolledSeconds = 1e9;

class VoiceRegistry {
 public:
  explicit VoiceRegistry(size_t capacity) : capacity_(capacity) {}

  // An enrolled person, with a fixed voiceprint (a unit vector); `narrowband`: made from
  // telephone-band speech.
  int enroll(const std::string& name, const std::vector<float>& embedding, bool narrowband = false);
  // A new anonymous person, "speaker-N"; `embedding` may be empty (no voice yet).
  int add(const std::vector<float>& embedding, double seconds, int64_t now);

  // Adds an utterance embedding of `seconds` of clean speech (`narrowband`: telephone band) to
  // `id`'s voiceprint (enrolled voiceprints stay as enrolled).
  void learn(int id, const std::vector<float>& embedding, double seconds, int64_t now,
             bool narrowband = false);
  void heard(int id, int64_t now);
  // A turn's evidence gave or kept `id`'s name at `now`.
  void named(int id, int64_t now);

  // Every voiceprint `allowed` lets through, scored against `embedding`.
  std::vector<Match> scores(const std::vector<float>& embedding,
                            const std::function<bool(int id)>& allowed) const;
  // Cosine of `embedding` with `id`'s voiceprint (0 without one).
  float score(int id, const std::vector<float>& embedding) const;
  // Cosine of two voices' voiceprints (0 where either has none).
  float similarity(int a, int b) const;

  const Voice* find(int id) const;
  // Name of every id ever given, indexed by id (forgotten ones keep theirs: old turns name them).
  const std::vector<std::string>& names() const { return names_; }
  size_t size() const { return voices_.size(); }
  size_t anonymous() const { return anonymous_; }
  void forget(int id);
  void reset();

 private:
  Voice* get(int id);
  void make_room();

  size_t capacity_;
  std::vector<Voice> voices_;
  std::vector<std::string> names_;
  size_t anonymous_ = 0;  // anonymous voices made so far: the next is "speaker-<anonymous_>"
};

}  // namespace speakerseg
