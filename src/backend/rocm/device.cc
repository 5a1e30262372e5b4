// Device discovery and management (spec: pyflame::backend::rocm).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>

#include "backend/rocm/context.h"
#include "backend/rocm/gpu/platform.h"
#include "pyflame/backend/rocm.h"
#include "pyflame/errors.h"

namespace pyflame::backend::rocm {

namespace {
std::atomic<int> g_current{-1};

void check_index(int device_id, const char* fn) {
  int n = get_device_count();
  if (n == 0) throw RuntimeError(errmsg(fn, "ROCm is not available: no GPU was found"));
  if (device_id < 0 || device_id >= n) {
    throw RuntimeError(errmsg(fn, "invalid device id " + std::to_string(device_id) + " (" +
                                      std::to_string(n) + " device(s) available)"));
  }
}
}  // namespace

bool compiled() { return true; }
const char* platform() { return gpu::platform_name(); }

int get_device_count() {
  // Counted once: a machine without a driver or GPU reports an error here,
  // which means zero devices (and must not linger as the last error).
  static const int count = [] {
#if defined(PYFLAME_GPU_CUDA)
    // HIP_VISIBLE_DEVICES selects GPUs on NVIDIA too (the HIP runtime reads it on AMD): it becomes
    // CUDA_VISIBLE_DEVICES unless that is set, before the CUDA runtime first counts devices.
    if (const char* hip = std::getenv("HIP_VISIBLE_DEVICES"); hip && !std::getenv("CUDA_VISIBLE_DEVICES")) {
      setenv("CUDA_VISIBLE_DEVICES", hip, 0);
    }
#endif
    int n = 0;
    if (hipGetDeviceCount(&n) != hipSuccess) {
      (void)hipGetLastError();
      n = 0;
    }
    return std::min(n, kMaxDevices);  // the contexts' fixed tables (context.h)
  }();
  return count;
}

bool is_available() { return get_device_count() > 0; }

int get_current_device() { return g_current.load(); }

void set_device(int device_id) {
  check_index(device_id, "rocm_set_device");
  PF_HIP_CHECK(hipSetDevice(device_id));
  g_current = device_id;
}

void synchronize() {
  int dev = get_current_device();
  check_index(dev < 0 ? 0 : dev, "rocm_synchronize");
  DeviceContext& ctx = context(dev < 0 ? 0 : dev);
  PF_HIP_CHECK(hipStreamSynchronize(ctx.stream));
}

DeviceInfo get_device_info(int device_id) {
  check_index(device_id, "rocm_get_device_info");
  DeviceGuard g(device_id);
  DeviceInfo info;
  info.device_id = device_id;
  info.name = gpu::device_name(device_id);
  info.architecture = gpu::device_arch(device_id);
  info.platform = gpu::platform_name();
  PF_HIP_CHECK(hipMemGetInfo(&info.free_memory, &info.total_memory));
  info.compute_units = gpu::device_attribute(hipDeviceAttributeMultiprocessorCount, device_id);
  info.wave_size = gpu::device_wave_size(device_id);
  return info;
}

}  // namespace pyflame::backend::rocm
