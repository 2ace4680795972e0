// The audio file reader (core/io/audio_file.h: libsndfile, and mpg123 for MPEG audio): any bytes
// give the samples of a 16 kHz mono file or AudioFileError.
#include <cstdint>
#include <cstdlib>

#include "fuzz_input_file.h"
#include "io/audio_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = speakerseg::fuzz::write_input(data, size, ".audio");
  try {
    speakerseg::read_mono_16k(path);
  } catch (const speakerseg::AudioFileError&) {
    // the refusal the contract asks for
  }
  return 0;
}
