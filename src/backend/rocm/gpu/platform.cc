#include "backend/rocm/gpu/platform.h"

namespace pyflame::gpu {

const char* platform_name() noexcept {
#if defined(__HIP_PLATFORM_AMD__)
  return "amd";
#else
  return "nvidia";
#endif
}

int device_attribute(hipDeviceAttribute_t attr, int device) {
  int value = 0;
  PF_HIP_CHECK(hipDeviceGetAttribute(&value, attr, device));
  return value;
}

std::string device_name(int device) {
#if defined(__HIP_PLATFORM_AMD__)
  char name[256] = {};
  PF_HIP_CHECK(hipDeviceGetName(name, sizeof(name), device));
  return name;
#else
  // Only the name field is read; it exists in every CUDA version's cudaDeviceProp.
  cudaDeviceProp prop{};
  PF_HIP_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.name;
#endif
}

std::string device_arch(int device) {
#if defined(__HIP_PLATFORM_AMD__)
  // The gfx target is only exposed through the property struct (gcnArchName).
  hipDeviceProp_t prop{};
  PF_HIP_CHECK(hipGetDeviceProperties(&prop, device));
  std::string arch = prop.gcnArchName;
  return arch.substr(0, arch.find(':'));
#else
  return "sm_" +
         std::to_string(device_attribute(hipDeviceAttributeComputeCapabilityMajor, device)) +
         std::to_string(device_attribute(hipDeviceAttributeComputeCapabilityMinor, device));
#endif
}

int device_wave_size(int device) { return device_attribute(hipDeviceAttributeWarpSize, device); }

}  // namespace pyflame::gpu
