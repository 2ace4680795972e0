#include "engines/cuda/plan_policy.h"

#include <cstdio>

#include "engines/cuda/cuda_voice_encoder.h"
#include "model/model_spec.h"
#include "model/voice_model.h"

namespace speakerseg::cuda {

std::string mib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / 1048576.0);
  return buf;
}

bool cudnn_status_is_out_of_memory(int status) {
  return status == kCudnnStatusHostAllocationFailed || status == kCudnnStatusDeviceAllocationFailed;
}

std::string out_of_memory_message(const std::string& what, size_t asked, size_t free_bytes,
                                  size_t total_bytes, const std::string& device) {
  return "out of device memory: " + what +
         (asked ? " needs " + mib(asked) : std::string(" could not allocate")) + " on " + device +
         " (" + mib(free_bytes) + " free of " + mib(total_bytes) +
         "): lower the batch size (the element's batch-size, speakerseg --batch) or the number of "
         "channels and engines sharing this GPU";
}

LstmAlgorithm wanted_lstm_algorithm(LstmAlgorithm requested, int batch) {
  if (requested != LstmAlgorithm::kAuto) return requested;
  // The fastest per class in the first GPU run's table (an H200, graphs on): persist-dynamic at 1
  // and 2, persist-static-small-h at 4 to 128, standard at 512. 256 was not measured; it gets
  // standard, the choice of the nearest measured class above it: standard runs at every size
  // without a probe or an NVRTC build, so a wrong guess there costs speed, never a fallback. The
  // GPU check's long table has a 256 row to settle it.
  if (batch <= 2) return LstmAlgorithm::kPersistDynamic;
  if (batch <= 128) return LstmAlgorithm::kPersistStaticSmallH;
  return LstmAlgorithm::kStandard;
}

// What cuDNN was seen to do for these two widths: a model of another width asks the question anew.
static_assert(kLstmHidden == 128 && kVoiceHidden == 256,
              "check_voice_lstm_algorithm and wanted_voice_lstm_algorithm are decided for hidden "
              "sizes 128 (segmentation) and 256 (voice encoder)");

void check_voice_lstm_algorithm(LstmAlgorithm requested) {
  if (requested != LstmAlgorithm::kPersistStaticSmallH) return;
  throw EngineError("the voice encoder's " + std::to_string(kVoiceHidden) +
                    "-wide LSTM cannot run lstm-algorithm persist-static-small-h (cuDNN's "
                    "persistent kernel for small hidden sizes refused it on an H200: "
                    "cudnnGetRNNTempSpaceSizes: CUDNN_STATUS_NOT_SUPPORTED; the segmentation "
                    "LSTM's " +
                    std::to_string(kLstmHidden) +
                    " runs it): use lstm-algorithm auto, standard or persist-dynamic for the "
                    "voice encoder");
}

LstmAlgorithm wanted_voice_lstm_algorithm(LstmAlgorithm requested, int batch) {
  check_voice_lstm_algorithm(requested);
  const LstmAlgorithm wanted = wanted_lstm_algorithm(requested, batch);
  // Where the segmentation engine would take persist-static-small-h, standard is the algorithm
  // that runs: the voice encoder's own speeds were not measured per algorithm.
  return wanted == LstmAlgorithm::kPersistStaticSmallH ? LstmAlgorithm::kStandard : wanted;
}

LstmAlgorithm set_up_rnn(LstmAlgorithm requested, LstmAlgorithm wanted, int batch,
                         RnnSetupSteps& steps,
                         const std::function<void(const std::string&)>& warn) {
  const bool probe = requested == LstmAlgorithm::kAuto && wanted != LstmAlgorithm::kStandard;
  try {
    steps.setup(wanted);
    // Its OutOfDeviceMemory is no RnnUnavailable: it leaves here as it came.
    steps.place();
    if (probe) steps.probe();
    return wanted;
  } catch (const RnnUnavailable& e) {
    if (requested != LstmAlgorithm::kAuto || wanted == LstmAlgorithm::kStandard) throw;
    warn(std::string(e.what()) + "; batch " + std::to_string(batch) +
         " falls back to lstm-algorithm standard");
  }
  steps.setup(LstmAlgorithm::kStandard);
  steps.place();
  return LstmAlgorithm::kStandard;
}

PassMode run_pass(GraphSlot& slot, int batch, const std::function<bool(std::string* why)>& launch,
                  const std::function<void()>& eager, const std::function<void()>& retire,
                  const std::function<void(const std::string&)>& warn) {
  if (slot.captured && !slot.failed) {
    std::string why;
    if (launch(&why)) return PassMode::kReplay;
    retire();
    slot.captured = false;
    slot.failed = true;
    warn("the CUDA graph of batch " + std::to_string(batch) + " failed to launch (" + why +
         "): retired, that batch runs without a graph from now on");
  }
  eager();
  return PassMode::kEager;
}

std::vector<int> batch_classes(int max_batch) {
  std::vector<int> classes;
  for (int c = 1; c < max_batch; c *= 2) classes.push_back(c);
  if (max_batch >= 1) classes.push_back(max_batch);
  return classes;
}

int batch_class_for(const std::vector<int>& classes, int batch) {
  for (int c : classes)
    if (c >= batch) return c;
  throw EngineError("batch " + std::to_string(batch) + " is larger than the largest class " +
                    (classes.empty() ? std::string("(none)") : std::to_string(classes.back())));
}

int max_cudnn_window_samples() {
  // frames_for_samples is monotonic: search the last sample count that still fits.
  int64_t lo = kSincKernel, hi = int64_t{kCudnnMaxSteps + 2} * 400;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (frames_for_samples(mid) <= kCudnnMaxSteps)
      lo = mid;
    else
      hi = mid - 1;
  }
  return static_cast<int>(lo);
}

void check_cudnn_window(int samples) {
  const int frames = frames_for_samples(samples);
  if (frames <= kCudnnMaxSteps) return;
  const int longest = max_cudnn_window_samples();
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.1f s", static_cast<double>(longest) / kSampleRate);
  throw EngineError("a window of " + std::to_string(samples) + " samples is " +
                    std::to_string(frames) + " frames, more than the " +
                    std::to_string(kCudnnMaxSteps) +
                    " steps cuDNN's LSTM takes: the CUDA engine runs windows of at most " +
                    std::to_string(longest) + " samples (" + seconds +
                    "); use shorter windows or the CPU engine");
}

}  // namespace speakerseg::cuda

namespace speakerseg {

LstmAlgorithm voice_lstm_algorithm(LstmAlgorithm segmentation, std::string* note) {
  if (note) note->clear();
  if (segmentation != LstmAlgorithm::kPersistStaticSmallH) return segmentation;
  if (note)
    *note =
        "lstm-algorithm persist-static-small-h is for the segmentation LSTM; the voice "
        "encoder's " +
        std::to_string(kVoiceHidden) + "-wide LSTM cannot run it and uses auto";
  return LstmAlgorithm::kAuto;
}

}  // namespace speakerseg
