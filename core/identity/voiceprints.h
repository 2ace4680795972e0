// The voiceprints file: the people a stream should know by name. JSON, versioned, naming the
// encoder and its dimension so that a file made with another voice model is refused instead of
// matched meaninglessly:
//
//   {"format": "speakerchange-voiceprints", "version": 1,
//    "encoder": "resemblyzer-ge2e-0.1.4", "dimension": 256,
//    "speakers": [{"name": "Alice", "seconds": 14.2, "narrowband": 0, "embedding": [0.031, ...]},
//                 ...]}
//
// `embedding` is a unit vector (the utterance embedding of the enrolment audio, or the
// seconds-weighted mean of several, renormalised); `seconds` is how much speech it rests on,
// `narrowband` how much of that was telephone band (high_band_ratio() under kNarrowbandRatio:
// such a voiceprint is scored as the telephone voice it is; absent in files made before it: 0).
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace speakerseg {

class VoiceprintsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Voiceprint {
  std::string name;
  double seconds = 0;
  double narrowband = 0;  // seconds of `seconds` that were telephone band
  std::vector<float> embedding;
  bool is_narrowband() const { return 2 * narrowband > seconds; }
};

struct Voiceprints {
  std::vector<Voiceprint> speakers;

  // Reads `path`; throws VoiceprintsError naming the file, what is wrong and how to fix it.
  static std::shared_ptr<const Voiceprints> load(const std::string& path);
  // Writes atomically (a temporary file renamed over `path`).
  void save(const std::string& path) const;
  // Adds `name`, or folds the new embedding into theirs, weighted by seconds of speech
  // (`narrowband`: the clip's speech was telephone band).
  void enroll(const std::string& name, const std::vector<float>& embedding, double seconds,
              bool narrowband = false);
};

}  // namespace speakerseg
