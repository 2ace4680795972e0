#include "io/audio_file.h"

#include <mpg123.h>
#include <sndfile.h>

#include <algorithm>
#include <memory>

#include "model/model_spec.h"

namespace speakerseg {

namespace {

void require_mono_16k(const std::string& path, long rate, int channels) {
  const std::string convert =
      ". Convert it first, e.g. `sox IN -r 16000 -c 1 OUT.wav` or with gst-launch-1.0 "
      "(audioconvert ! audioresample ! audio/x-raw,rate=16000,channels=1)";
  if (rate != kSampleRate)
    throw AudioFileError("audio file '" + path + "' has a sample rate of " + std::to_string(rate) +
                         " Hz; segmentation-3.0 needs 16000 Hz" + convert);
  if (channels != 1)
    throw AudioFileError("audio file '" + path + "' has " + std::to_string(channels) +
                         " channels; segmentation-3.0 needs mono" + convert);
}

// libsndfile's MPEG reader stops at the frame count it estimates from the first frame's bitrate
// (a 30 s MP3 can read as 23 s, with no error), so MPEG audio is decoded with mpg123 to the end
// of the stream instead.
std::vector<float> read_mpeg(const std::string& path) {
  int err = MPG123_OK;
  std::unique_ptr<mpg123_handle, void (*)(mpg123_handle*)> mh(mpg123_new(nullptr, &err),
                                                              mpg123_delete);
  const auto fail = [&](const std::string& what) {
    return AudioFileError("cannot decode MPEG audio file '" + path + "': " + what + ": " +
                          (mh ? mpg123_strerror(mh.get()) : mpg123_plain_strerror(err)));
  };
  if (!mh) throw fail("mpg123_new");
  // Float output at whatever rate and layout the stream has; require_mono_16k() judges them.
  mpg123_format_none(mh.get());
  const long* rates = nullptr;
  size_t n_rates = 0;
  mpg123_rates(&rates, &n_rates);
  for (size_t i = 0; i < n_rates; ++i)
    mpg123_format(mh.get(), rates[i], MPG123_MONO | MPG123_STEREO, MPG123_ENC_FLOAT_32);
  if (mpg123_open(mh.get(), path.c_str()) != MPG123_OK) throw fail("open");
  long rate = 0;
  int channels = 0, encoding = 0;
  if (mpg123_getformat(mh.get(), &rate, &channels, &encoding) != MPG123_OK)
    throw fail("reading the stream format");
  require_mono_16k(path, rate, channels);

  std::vector<float> samples;
  std::vector<float> chunk(1 << 14);
  for (;;) {
    size_t bytes = 0;
    err = mpg123_read(mh.get(), chunk.data(), chunk.size() * sizeof(float), &bytes);
    samples.insert(samples.end(), chunk.begin(), chunk.begin() + bytes / sizeof(float));
    if (err == MPG123_DONE) break;
    if (err == MPG123_NEW_FORMAT) {
      long r = 0;
      int c = 0, e = 0;
      mpg123_getformat(mh.get(), &r, &c, &e);
      if (r != rate || c != channels)
        throw AudioFileError("MPEG audio file '" + path + "' changes its format after " +
                             std::to_string(samples.size()) + " samples");
      continue;
    }
    if (err != MPG123_OK)
      throw fail("decoding after " + std::to_string(samples.size()) + " samples");
  }
  mpg123_close(mh.get());
  return samples;
}

}  // namespace

std::vector<float> read_mono_16k(const std::string& path) {
  SF_INFO info{};
  std::unique_ptr<SNDFILE, int (*)(SNDFILE*)> file(sf_open(path.c_str(), SFM_READ, &info),
                                                   sf_close);
  if (!file) throw AudioFileError("cannot read audio file '" + path + "': " + sf_strerror(nullptr));
  if ((info.format & SF_FORMAT_TYPEMASK) == SF_FORMAT_MPEG) return read_mpeg(path);
  require_mono_16k(path, info.samplerate, info.channels);

  // Read to the end of the stream rather than to the header's count, so that nothing past a
  // wrong count is lost; a stream shorter than its header says is truncated.
  std::vector<float> samples;
  // The header's count is a claim, not a size to allocate: a 55-byte FLAC header can claim 16 GB
  // of samples (found by tests/fuzz). Reserve at most ten minutes; longer files grow as read.
  constexpr sf_count_t kMostReserved = 600 * kSampleRate;
  samples.reserve(static_cast<size_t>(std::clamp<sf_count_t>(info.frames, 0, kMostReserved)));
  constexpr sf_count_t kChunk = 1 << 16;
  std::vector<float> chunk(kChunk);
  for (;;) {
    const sf_count_t got = sf_readf_float(file.get(), chunk.data(), kChunk);
    if (got <= 0) break;
    samples.insert(samples.end(), chunk.begin(), chunk.begin() + got);
  }
  if (sf_error(file.get()) != SF_ERR_NO_ERROR)
    throw AudioFileError("audio file '" + path + "' could not be decoded to the end (read " +
                         std::to_string(samples.size()) + " samples): " + sf_strerror(file.get()));
  if (static_cast<sf_count_t>(samples.size()) < info.frames)
    throw AudioFileError("audio file '" + path + "' is truncated: read " +
                         std::to_string(samples.size()) + " of " + std::to_string(info.frames) +
                         " samples");
  return samples;
}

}  // namespace speakerseg
