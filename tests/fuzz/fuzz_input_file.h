// The readers under test take paths, as their callers do: each input is written to one scratch
// file per process (in $TMPDIR, default /tmp) and read back from there.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace speakerseg::fuzz {

inline std::string write_input(const uint8_t* data, size_t size, const char* suffix) {
  static const std::string path = [&] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/speakerseg-fuzz-" +
           std::to_string(getpid()) + suffix;
  }();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace speakerseg::fuzz
