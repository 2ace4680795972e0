// The LSTM algorithm names, in core proper: the tools, the plugin and the CUDA module all use them.
#include "engines/cuda/cuda_engine.h"
#include "engines/setting_names.h"

namespace speakerseg {

const char* lstm_algorithm_name(LstmAlgorithm algorithm) {
  switch (algorithm) {
    case LstmAlgorithm::kStandard:
      return "standard";
    case LstmAlgorithm::kPersistStaticSmallH:
      return "persist-static-small-h";
    case LstmAlgorithm::kPersistDynamic:
      return "persist-dynamic";
    case LstmAlgorithm::kAuto:
      return "auto";
  }
  return "?";
}

bool parse_lstm_algorithm(const std::string& name, LstmAlgorithm* out) {
  constexpr LstmAlgorithm kAlgorithms[] = {LstmAlgorithm::kStandard,
                                           LstmAlgorithm::kPersistStaticSmallH,
                                           LstmAlgorithm::kPersistDynamic, LstmAlgorithm::kAuto};
  return parse_setting_name(name, kAlgorithms, lstm_algorithm_name, out);
}

}  // namespace speakerseg
