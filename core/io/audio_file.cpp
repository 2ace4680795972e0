#include "io/audio_file.h"

#include <sndfile.h>

#include <memory>

#include "model/model_spec.h"

namespace speakerseg {

std::vector<float> read_mono_16k(const std::string& path) {
  SF_INFO info{};
  std::unique_ptr<SNDFILE, int (*)(SNDFILE*)> file(sf_open(path.c_str(), SFM_READ, &info),
                                                   sf_close);
  if (!file) throw AudioFileError("cannot read audio file '" + path + "': " + sf_strerror(nullptr));
  const std::string convert =
      ". Convert it first, e.g. `sox IN -r 16000 -c 1 OUT.wav` or with gst-launch-1.0 "
      "(audioconvert ! audioresample ! audio/x-raw,rate=16000,channels=1)";
  if (info.samplerate != kSampleRate)
    throw AudioFileError("audio file '" + path + "' has a sample rate of " +
                         std::to_string(info.samplerate) + " Hz; segmentation-3.0 needs 16000 Hz" +
                         convert);
  if (info.channels != 1)
    throw AudioFileError("audio file '" + path + "' has " + std::to_string(info.channels) +
                         " channels; segmentation-3.0 needs mono" + convert);
  std::vector<float> samples(static_cast<size_t>(info.frames));
  const sf_count_t got = sf_readf_float(file.get(), samples.data(), info.frames);
  if (got != info.frames)
    throw AudioFileError("audio file '" + path + "' is truncated: read " + std::to_string(got) +
                         " of " + std::to_string(info.frames) + " samples");
  return samples;
}

}  // namespace speakerseg
