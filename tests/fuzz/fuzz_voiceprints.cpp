// The voiceprints file reader (core/identity/voiceprints.h): any bytes load as voiceprints that
// hold the format's promises (unit vectors of the encoder's dimension, names, seconds >= 0) or
// are refused with VoiceprintsError.
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "fuzz_input_file.h"
#include "identity/voiceprints.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = speakerseg::fuzz::write_input(data, size, ".json");
  try {
    const auto prints = speakerseg::Voiceprints::load(path);
    for (const auto& p : prints->speakers) {
      double norm = 0;
      for (float v : p.embedding) norm += double(v) * v;
      if (p.embedding.size() != 256 || std::fabs(std::sqrt(norm) - 1.0) > 1e-3 || p.name.empty() ||
          !(p.seconds >= 0))
        std::abort();  // accepted, but not what the format promises
    }
  } catch (const speakerseg::VoiceprintsError&) {
  }
  return 0;
}
