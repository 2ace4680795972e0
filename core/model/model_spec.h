// Fixed facts of the pyannote segmentation-3.0 architecture ("PyanNet"). The loader checks a model
// file against these once; the engines rely on them without re-checking.
#pragma once

#include <cstdint>

namespace speakerseg {

constexpr int kSampleRate = 16000;
constexpr int kWindowSamples = 160000;  // 10 s
constexpr int kClasses = 7;             // powerset: {}, {0}, {1}, {2}, {0,1}, {0,2}, {1,2}
constexpr int kLocalSpeakers = 3;

constexpr int kSincFilters = 80;  // 40 cosine ("even") then 40 sine ("odd") band-pass filters
constexpr int kSincKernel = 251;
constexpr int kSincStride = 10;
constexpr int kConvChannels = 60;
constexpr int kConvKernel = 5;
constexpr int kPool = 3;  // MaxPool1d(3, 3) after each of the three convolutions

constexpr int kLstmLayers = 4;
constexpr int kLstmHidden = 128;
constexpr int kLstmGates = 4 * kLstmHidden;
constexpr int kLstmOutput = 2 * kLstmHidden;  // bidirectional, forward half first
constexpr int kHeadHidden = 128;

constexpr double kFrameStepSeconds = 270.0 / kSampleRate;       // 0.016875 s
constexpr double kReceptiveFieldSeconds = 991.0 / kSampleRate;  // 0.0619375 s
constexpr double kFrameCentreOffsetSeconds = kReceptiveFieldSeconds / 2.0;

// Sequence lengths after each stage, for a window of `samples` samples. Zero or less means the
// window is too short to produce a frame.
struct StageLengths {
  int sinc;   // after the SincNet convolution
  int pool0;  // after stage 0 pooling
  int conv1;
  int pool1;
  int conv2;
  int frames;  // after stage 2 pooling: what the LSTM and the head see
};

constexpr StageLengths stage_lengths(int64_t samples) {
  StageLengths s{};
  s.sinc = samples >= kSincKernel ? static_cast<int>((samples - kSincKernel) / kSincStride + 1) : 0;
  s.pool0 = s.sinc / kPool;
  s.conv1 = s.pool0 - (kConvKernel - 1);
  s.pool1 = s.conv1 > 0 ? s.conv1 / kPool : 0;
  s.conv2 = s.pool1 - (kConvKernel - 1);
  s.frames = s.conv2 > 0 ? s.conv2 / kPool : 0;
  return s;
}

constexpr int frames_for_samples(int64_t samples) {
  return stage_lengths(samples).frames;
}

static_assert(frames_for_samples(kWindowSamples) == 589, "10 s gives 589 frames");
static_assert(frames_for_samples(kWindowSamples / 2) == 293, "5 s gives 293 frames");

}  // namespace speakerseg
