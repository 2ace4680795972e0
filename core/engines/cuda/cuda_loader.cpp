// Opens the CUDA engine module (cuda_module.h) on first use and forwards to it. No NVIDIA driver,
// a module that is missing, or one whose libraries (libcudart, libcublas, libcudnn) the dynamic
// loader cannot find, becomes "no CUDA device" with the reason, and an EngineError that says how
// to fix it when the CUDA engine is asked for; the CPU engine is unaffected.
#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <map>
#include <mutex>

#include "engines/cuda/cuda_engine.h"
#include "engines/cuda/cuda_module.h"
#include "engines/cuda/cuda_voice_encoder.h"
#include "engines/cuda/plan_policy.h"

namespace speakerseg {
namespace {

struct Loaded {
  const cuda_module::Api* api = nullptr;
  std::string error;  // why api is null
};

bool exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

// The module at `path`, opened once per path for the life of the process (it is never closed:
// cuDNN and the CUDA runtime keep threads and state that outlive any one engine). A copy (a pointer
// and a string), not a reference into the map: the callers pass a temporary path, and GCC 13's
// -Wdangling-reference cannot tell a reference into the static map from one to that temporary.
Loaded load(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, Loaded> modules;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = modules.find(path);
  if (it != modules.end()) return it->second;
  Loaded& m = modules[path];
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!handle) {
    const char* e = dlerror();
    m.error = std::string("cannot load the CUDA engine module: ") + (e ? e : path);
    return m;
  }
  auto entry = reinterpret_cast<cuda_module::EntryPoint>(dlsym(handle, cuda_module::kEntryPoint));
  const cuda_module::Api* api = entry ? entry() : nullptr;
  if (!api || api->abi != cuda_module::kAbi || api->size != sizeof(cuda_module::Api)) {
    m.error = path + " is not a CUDA engine module of this build (rebuild and reinstall)";
    return m;
  }
  m.api = api;
  return m;
}

// Whether the NVIDIA driver's library is there at all. Checked before the module is loaded, so that
// a machine without a driver never maps the CUDA runtime, cuBLAS and cuDNN (hundreds of MiB of
// address space and their start-up work) just to count zero devices.
bool driver_present(std::string* why) {
  static const std::string error = [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (lib) return std::string();
    const char* e = dlerror();
    return std::string("no NVIDIA driver (") + (e ? e : "libcuda.so.1 not found") +
           "); is an NVIDIA GPU present with its driver installed (nvidia-smi)?";
  }();
  if (!error.empty() && why) *why = error;
  return error.empty();
}

const char* kHowToFix =
    " (the module needs the NVIDIA driver, the CUDA 13 runtime, cuBLAS and cuDNN 9 where the "
    "dynamic loader finds them, e.g. LD_LIBRARY_PATH=/usr/local/cuda/lib64; "
    "SPEAKERSEG_CUDA_MODULE names the module file); or use the CPU engine";

}  // namespace

std::string cuda_module_path() {
  if (const char* env = std::getenv("SPEAKERSEG_CUDA_MODULE"); env && *env) return env;
  if (exists(SPEAKERSEG_CUDA_MODULE_BUILD)) return SPEAKERSEG_CUDA_MODULE_BUILD;
  return SPEAKERSEG_CUDA_MODULE_INSTALLED;
}

int cuda_device_count(std::string* why) {
  if (!driver_present(why)) return 0;
  const Loaded m = load(cuda_module_path());
  if (!m.api) {
    if (why) *why = m.error;
    return 0;
  }
  return m.api->device_count(why);
}

std::string cuda_environment() {
  const std::string path = cuda_module_path();
  const Loaded m = load(path);
  if (!m.api) return "CUDA engine module: " + m.error + "\n";
  return "CUDA engine module: " + path + "\n" + m.api->environment();
}

std::unique_ptr<SegmentationEngine> make_cuda_engine(std::shared_ptr<const SegmentationModel> model,
                                                     const CudaEngineOptions& options) {
  std::string why;
  if (!driver_present(&why)) throw EngineError("no CUDA device found: " + why);
  const Loaded m = load(cuda_module_path());
  if (!m.api) throw EngineError(m.error + kHowToFix);
  return m.api->make_engine(std::move(model), options);
}

std::unique_ptr<VoiceEncoder> make_cuda_voice_encoder(std::shared_ptr<const VoiceModel> model,
                                                      const CudaVoiceEncoderOptions& options) {
  // Before the driver is looked for: an algorithm this encoder can never run is the caller's to
  // fix on any machine, with or without a GPU.
  cuda::check_voice_lstm_algorithm(options.lstm_algorithm);
  std::string why;
  if (!driver_present(&why)) throw EngineError("no CUDA device found: " + why);
  const Loaded m = load(cuda_module_path());
  if (!m.api) throw EngineError(m.error + kHowToFix);
  return m.api->make_voice_encoder(std::move(model), options);
}

}  // namespace speakerseg
