#include "backend/rocm/gpu/rtc.h"

#include "backend/rocm/gpu/platform.h"
#include "pyflame/errors.h"

#if defined(__HIP_PLATFORM_AMD__)
#include <hip/hiprtc.h>
#else
#include <cuda_runtime.h>
#include <nvrtc.h>
#endif

namespace pyflame::gpu {

#if defined(__HIP_PLATFORM_AMD__)

std::string rtc_arch(int device) {
  hipDeviceProp_t prop{};  // gcnArchName exists only in the property struct
  PF_HIP_CHECK(hipGetDeviceProperties(&prop, device));
  return prop.gcnArchName;
}

std::string rtc_compiler_version() {
  int v = 0;
  PF_HIP_CHECK(hipRuntimeGetVersion(&v));
  return "hiprtc " + std::to_string(v);
}

std::vector<std::string> rtc_options(const std::string& arch) {
  return {"--offload-arch=" + arch, "-O3", "-std=c++17"};
}

bool rtc_compile(const std::string& source, const std::vector<std::string>& options, std::string* code,
                 std::string* error) {
  hiprtcProgram prog;
  if (hiprtcCreateProgram(&prog, source.c_str(), "fused.hip", 0, nullptr, nullptr) != HIPRTC_SUCCESS) {
    *error = "hiprtcCreateProgram failed";
    return false;
  }
  std::vector<const char*> opts;
  for (const auto& o : options) opts.push_back(o.c_str());
  const hiprtcResult rc = hiprtcCompileProgram(prog, int(opts.size()), opts.data());
  size_t n = 0;
  if (rc != HIPRTC_SUCCESS) {
    hiprtcGetProgramLogSize(prog, &n);
    std::string log(n, '\0');
    if (n) hiprtcGetProgramLog(prog, log.data());
    *error = std::string(hiprtcGetErrorString(rc)) + ": " + log;
    hiprtcDestroyProgram(&prog);
    return false;
  }
  hiprtcGetCodeSize(prog, &n);
  code->assign(n, '\0');
  hiprtcGetCode(prog, code->data());
  hiprtcDestroyProgram(&prog);
  return true;
}

void* rtc_load(const std::string& code, const std::string& name, std::string* error) {
  hipModule_t module;
  hipFunction_t fn;
  if (hipModuleLoadData(&module, code.data()) != hipSuccess) {
    *error = "hipModuleLoadData failed";
    return nullptr;
  }
  if (hipModuleGetFunction(&fn, module, name.c_str()) != hipSuccess) {
    *error = "hipModuleGetFunction failed for " + name;
    return nullptr;
  }
  return reinterpret_cast<void*>(fn);  // the module stays loaded for the process
}

void rtc_launch(void* kernel, unsigned grid, unsigned block, void* args, size_t bytes, hipStream_t stream) {
  void* params[] = {args};
  (void)bytes;
  PF_HIP_CHECK(hipModuleLaunchKernel(reinterpret_cast<hipFunction_t>(kernel), grid, 1, 1, block, 1, 1, 0, stream,
                                     params, nullptr));
}

#else  // NVIDIA

std::string rtc_arch(int device) { return device_arch(device); }

std::string rtc_compiler_version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "nvrtc ?";
  return "nvrtc " + std::to_string(major) + "." + std::to_string(minor);
}

// nvcc's defaults, as the prebuilt kernels get them: --fmad=true, IEEE
// division and square root, no flush to zero.
std::vector<std::string> rtc_options(const std::string& arch) {
  return {"--gpu-architecture=" + arch, "--std=c++17", "--fmad=true", "--prec-div=true", "--prec-sqrt=true",
          "--ftz=false"};
}

bool rtc_compile(const std::string& source, const std::vector<std::string>& options, std::string* code,
                 std::string* error) {
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, source.c_str(), "fused.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS) {
    *error = "nvrtcCreateProgram failed";
    return false;
  }
  std::vector<const char*> opts;
  for (const auto& o : options) opts.push_back(o.c_str());
  const nvrtcResult rc = nvrtcCompileProgram(prog, int(opts.size()), opts.data());
  size_t n = 0;
  if (rc != NVRTC_SUCCESS) {
    nvrtcGetProgramLogSize(prog, &n);
    std::string log(n, '\0');
    if (n) nvrtcGetProgramLog(prog, log.data());
    *error = std::string(nvrtcGetErrorString(rc)) + ": " + log;
    nvrtcDestroyProgram(&prog);
    return false;
  }
  nvrtcGetCUBINSize(prog, &n);
  code->assign(n, '\0');
  nvrtcGetCUBIN(prog, code->data());
  nvrtcDestroyProgram(&prog);
  return true;
}

void* rtc_load(const std::string& code, const std::string& name, std::string* error) {
  // The runtime's library API (CUDA 12+), not the driver API: linking
  // libcuda itself would make the library unloadable where no driver is
  // installed (CPU-only machines running a CUDA build).
  cudaLibrary_t library;
  cudaKernel_t fn;
  if (cudaError_t r = cudaLibraryLoadData(&library, code.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
      r != cudaSuccess) {
    *error = std::string("cudaLibraryLoadData: ") + cudaGetErrorString(r);
    return nullptr;
  }
  if (cudaLibraryGetKernel(&fn, library, name.c_str()) != cudaSuccess) {
    *error = "cudaLibraryGetKernel failed for " + name;
    return nullptr;
  }
  return reinterpret_cast<void*>(fn);  // the library stays loaded for the process
}

void rtc_launch(void* kernel, unsigned grid, unsigned block, void* args, size_t bytes, hipStream_t stream) {
  void* params[] = {args};
  (void)bytes;
  // A cudaKernel_t is launched like a kernel function pointer.
  cudaError_t r = cudaLaunchKernel(static_cast<const void*>(kernel), dim3(grid), dim3(block), params, 0,
                                   reinterpret_cast<cudaStream_t>(stream));
  if (r != cudaSuccess) {
    throw RuntimeError(std::string("[fused] kernel launch failed: ") + cudaGetErrorString(r));
  }
}

#endif

}  // namespace pyflame::gpu
