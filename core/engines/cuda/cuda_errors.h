// Inside the CUDA module (cuda_module.h) only: every CUDA, cuBLAS and cuDNN status becomes an
// EngineError that names the call, out of memory says how much was asked and what to lower, and the
// facts both engines report about the machine (devices, NVRTC). Includes the CUDA headers.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <string>

namespace speakerseg::cuda {

std::string cuda_text(cudaError_t e);
std::string cudnn_text(cudnnStatus_t s);  // with cudnnGetLastErrorString's detail

// Throws EngineError("CUDA engine: " + what). Every failure also clears the runtime's last error:
// a non-sticky one (an allocation, an invalid argument) left pending would otherwise come back
// from the next kernel launch's cudaGetLastError() and fail a call that did nothing wrong.
[[noreturn]] void fail(const std::string& what);
// Throws OutOfDeviceMemory saying how much was asked for (0: unknown), how much is free and what
// to lower.
[[noreturn]] void out_of_memory(const std::string& what, size_t asked);

void check(cudaError_t e, const char* what);
void check(cublasStatus_t s, const char* what);
void check(cudnnStatus_t s, const char* what);
// A cudaMalloc of `bytes`.
void check_alloc(cudaError_t e, const char* what, size_t bytes);

// Throws EngineError where there is no device ("no CUDA device found: ...") or `device` is not one.
void check_device_index(int device);
// Makes `device` current and checks that this build can run on it; returns its name.
std::string select_device(int device);
// "9.x.y", after checking that cuDNN 9 or newer was loaded.
std::string cudnn_version();

// "cuda (NVIDIA H200, device 0, cuDNN 9.x, lstm auto, graphs, fp32, 6 batch classes ready in
// 1.23 s)": what both engines' description() says.
std::string engine_description(const std::string& device_name, int device,
                               const std::string& cudnn_version, const char* lstm_algorithm,
                               bool graphs, const char* math, size_t classes,
                               double startup_seconds);
// Where an engine's warnings go when its options name no place: stderr.
void warn_on_stderr(const std::string& message);

std::string seconds_text(double s);  // "1.23 s"

// NVRTC as cuDNN finds it (it dlopens the library when it builds persist-dynamic): its version and
// file name, or "" where the dynamic loader finds none.
std::string nvrtc_found();

// Devices this process can use; 0, with *why, where there is none or no usable driver.
int device_count(std::string* why);
// One line per fact: each GPU, driver, runtime, cuBLAS, cuDNN, NVRTC.
std::string environment();

}  // namespace speakerseg::cuda
