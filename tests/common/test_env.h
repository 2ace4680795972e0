// Paths the test suites get from meson (see tests/meson.build).
#pragma once

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

namespace speakerseg::test {

inline std::string env_path(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) ADD_FAILURE() << name << " is not set; run the tests through `meson test`";
  return v ? v : "";
}

inline std::string model_path() {
  return env_path("SPEAKERSEG_MODEL");
}
inline std::string reference_dir() {
  return env_path("SPEAKERSEG_REFERENCE_DIR");
}

}  // namespace speakerseg::test
