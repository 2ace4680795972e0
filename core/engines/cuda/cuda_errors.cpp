#include "engines/cuda/cuda_errors.h"

#include <dlfcn.h>

#include <cstdio>

#include "engines/cuda/plan_policy.h"

namespace speakerseg::cuda {

// plan_policy.h keeps these as numbers so that its host test needs no CUDA header.
static_assert(kCudaErrorMemoryAllocation == cudaErrorMemoryAllocation);
static_assert(kCublasStatusAllocFailed == CUBLAS_STATUS_ALLOC_FAILED);
static_assert(kCudnnStatusHostAllocationFailed ==
              CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED);
static_assert(kCudnnStatusDeviceAllocationFailed ==
              CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED);

namespace {
constexpr int kMinComputeCapability = 75;  // the oldest architecture meson.build compiles for
}

std::string cuda_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

std::string cudnn_text(cudnnStatus_t s) {
  std::string text = cudnnGetErrorString(s);
  char detail[512] = {0};
  cudnnGetLastErrorString(detail, sizeof detail);
  if (detail[0]) text += std::string(": ") + detail;
  return text;
}

void fail(const std::string& what) {
  cudaGetLastError();
  throw EngineError("CUDA engine: " + what);
}

void out_of_memory(const std::string& what, size_t asked) {
  cudaGetLastError();
  size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  int device = 0;
  cudaDeviceProp prop{};
  std::string name = "the GPU";
  if (cudaGetDevice(&device) == cudaSuccess &&
      cudaGetDeviceProperties(&prop, device) == cudaSuccess)
    name = prop.name;
  cudaGetLastError();
  throw OutOfDeviceMemory("CUDA engine: " +
                          out_of_memory_message(what, asked, free_bytes, total_bytes, name));
}

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  if (e == cudaErrorMemoryAllocation) out_of_memory(what, 0);
  fail(std::string(what) + " failed: " + cuda_text(e));
}

void check_alloc(cudaError_t e, const char* what, size_t bytes) {
  if (e == cudaErrorMemoryAllocation) out_of_memory(what, bytes);
  check(e, what);
}

void check(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  if (s == CUBLAS_STATUS_ALLOC_FAILED) out_of_memory(std::string("cuBLAS ") + what, 0);
  fail(std::string("cuBLAS ") + what + " failed: " + cublasGetStatusName(s) + " (" +
       cublasGetStatusString(s) + ")");
}

void check(cudnnStatus_t s, const char* what) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  if (cudnn_status_is_out_of_memory(s))
    out_of_memory(std::string("cuDNN ") + what + " (" + cudnnGetErrorString(s) + ")", 0);
  fail(std::string("cuDNN ") + what + " failed: " + cudnn_text(s));
}

void check_device_index(int device) {
  std::string why;
  const int count = device_count(&why);
  if (count == 0) throw EngineError("no CUDA device found: " + why);
  if (device < 0 || device >= count)
    fail("CUDA device " + std::to_string(device) + " does not exist (" + std::to_string(count) +
         " device" + (count > 1 ? "s" : "") + " found)");
}

std::string select_device(int device) {
  check(cudaSetDevice(device), "cudaSetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  const int cc = prop.major * 10 + prop.minor;
  if (cc < kMinComputeCapability)
    fail(std::string(prop.name) + " has compute capability " + std::to_string(prop.major) + "." +
         std::to_string(prop.minor) + "; this build needs 7.5 or newer");
  return prop.name;
}

std::string cudnn_version() {
  const size_t v = cudnnGetVersion();
  const std::string text = std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
                           std::to_string(v % 100);
  if (v / 10000 < 9) fail("cuDNN " + text + " was loaded; the engine needs cuDNN 9");
  return text;
}

std::string engine_description(const std::string& device_name, int device,
                               const std::string& cudnn_version, const char* lstm_algorithm,
                               bool graphs, const char* math, size_t classes,
                               double startup_seconds) {
  return "cuda (" + device_name + ", device " + std::to_string(device) + ", cuDNN " +
         cudnn_version + ", lstm " + lstm_algorithm + (graphs ? ", graphs" : ", no graphs") + ", " +
         math + ", " + std::to_string(classes) + " batch classes ready in " +
         seconds_text(startup_seconds) + ")";
}

void warn_on_stderr(const std::string& message) {
  std::fprintf(stderr, "speakerseg: warning: %s\n", message.c_str());
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

// RTLD_NODELETE: NVRTC carries its own libstdc++, whose start-up allocation would otherwise leak
// at dlclose.
std::string nvrtc_found() {
  for (const char* name : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) {
    void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!lib) continue;
    using VersionFn = int (*)(int*, int*);
    auto fn = reinterpret_cast<VersionFn>(dlsym(lib, "nvrtcVersion"));
    int a = 0, b = 0;
    const bool ok = fn && fn(&a, &b) == 0;
    dlclose(lib);
    if (ok) return std::to_string(a) + "." + std::to_string(b) + " (" + name + ")";
  }
  return "";
}

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (why)
      *why = "cudaGetDeviceCount: " + cuda_text(e) +
             (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver
                  ? "; is an NVIDIA GPU present with its driver loaded (nvidia-smi)?"
                  : "");
    return 0;
  }
  if (n == 0 && why) *why = "the CUDA driver reports no device";
  return n;
}

std::string environment() {
  std::string out;
  auto line = [&](const std::string& s) { out += s + "\n"; };
  std::string why;
  const int n = device_count(&why);
  if (n == 0) line("GPU: none (" + why + ")");
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) == cudaSuccess)
      line("GPU " + std::to_string(d) + ": " + prop.name + " (compute capability " +
           std::to_string(prop.major) + "." + std::to_string(prop.minor) + ", " +
           mib(prop.totalGlobalMem) + ")");
  }
  int v = 0;
  auto version = [](int x) {
    return std::to_string(x / 1000) + "." + std::to_string(x % 1000 / 10);
  };
  line("CUDA driver: " + (cudaDriverGetVersion(&v) == cudaSuccess && v ? version(v) : "none"));
  line("CUDA runtime: " + (cudaRuntimeGetVersion(&v) == cudaSuccess ? version(v) : "?"));
  int major = 0, minor = 0, patch = 0;
  cublasGetProperty(MAJOR_VERSION, &major);
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  line("cuBLAS: " + std::to_string(major) + "." + std::to_string(minor) + "." +
       std::to_string(patch));
  const size_t c = cudnnGetVersion();
  line("cuDNN: " + std::to_string(c / 10000) + "." + std::to_string(c / 100 % 100) + "." +
       std::to_string(c % 100));
  const std::string nvrtc = nvrtc_found();
  line("NVRTC: " + (nvrtc.empty() ? "not found (persist-dynamic will fall back or fail)" : nvrtc));
  cudaGetLastError();
  return out;
}

}  // namespace speakerseg::cuda
