// Reads the mono 16 kHz recordings the engine takes. Anything else is refused with a message that
// says how to convert it; resampling belongs to the media framework, not here.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace speakerseg {

class AudioFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Samples as float in [-1, 1). Throws AudioFileError for unreadable files and other formats.
std::vector<float> read_mono_16k(const std::string& path);

}  // namespace speakerseg
