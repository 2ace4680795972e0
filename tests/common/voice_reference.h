// The voice encoder's reference data (tests/reference/make_voice_reference.py writes it into
// $SPEAKERSEG_VOICE_REFERENCE_DIR): the CPU and the CUDA suites read the same cases.
#pragma once

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common/test_env.h"
#include "engines/voice_encoder.h"
#include "features/mel_spectrogram.h"
#include "identity/utterance_embedding.h"
#include "io/npy.h"

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

// Every partial of every reference case through `e` against the original weights' embeddings:
// each case's least cosine is at least `bound`.
inline void expect_partials_match(VoiceEncoder& e, float bound, const char* tag) {
  const MelSpectrogram mel;
  for (const std::string& c : voice_cases()) {
    const NpyArray audio = read_npy(voice_reference(c + ".audio.npy"));
    const NpyArray want = read_npy(voice_reference(c + ".partials.npy"));
    const std::vector<float> got = embed_partials(
        e, mel, audio.data.data(), static_cast<int64_t>(audio.data.size()), kPartialStep);
    ASSERT_EQ(got.size(), want.data.size()) << c;
    float least = 1;
    for (size_t p = 0; p < got.size() / kEmbeddingDim; ++p)
      least = std::min(least, cosine(&got[p * kEmbeddingDim], &want.data[p * kEmbeddingDim]));
    std::printf("[ %-8s ] %-11s %lld partials: least cosine %.8f\n", tag, c.c_str(),
                static_cast<long long>(want.shape[0]), least);
    EXPECT_GE(least, bound) << c;
  }
}

}  // namespace speakerseg::test
