// The ONNX loaders of both networks (core/model): any bytes either load as the network they must
// be or are refused with ModelError. Any other exception, a crash, a leak or undefined behaviour
// is a finding. The first byte chooses the loader (even: segmentation-3.0, odd: the voice
// encoder); the rest is the file.
#include <cstdint>
#include <cstdlib>
#include <exception>

#include "fuzz_input_file.h"
#include "model/segmentation_model.h"
#include "model/voice_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string path = speakerseg::fuzz::write_input(data + 1, size - 1, ".onnx");
  try {
    if (data[0] % 2 == 0)
      speakerseg::SegmentationModel::load_onnx(path);
    else
      speakerseg::VoiceModel::load_onnx(path);
  } catch (const speakerseg::ModelError&) {
    // the refusal the contract asks for
  }
  return 0;
}
