// The voice encoder's reference data (tests/reference/make_voice_reference.py writes it into
// $SPEAKERSEG_VOICE_REFERENCE_DIR): the CPU and the CUDA suites read the same cases.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include "common/test_env.h"

namespace speakerseg::test {

inline std::string voice_reference(const std::string& name) {
  return env_path("SPEAKERSEG_VOICE_REFERENCE_DIR") + "/" + name;
}

// The cases the reference generator wrote (shared recordings, or synthesised speech without them).
inline std::vector<std::string> voice_cases() {
  std::ifstream manifest(voice_reference("manifest.txt"));
  std::vector<std::string> out;
  std::string line;
  while (std::getline(manifest, line))
    if (line.rfind("case ", 0) == 0) out.push_back(line.substr(5, line.find(' ', 5) - 5));
  EXPECT_FALSE(out.empty()) << "no cases in " << voice_reference("manifest.txt");
  return out;
}

}  // namespace speakerseg::test
