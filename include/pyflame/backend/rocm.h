// GPU device management (spec: pyflame::backend::rocm). In a build without a
// GPU backend these report no devices and raise RuntimeError where a device
// is required.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "pyflame/tensor.h"

namespace pyflame::backend::rocm {

struct DeviceInfo {
  int device_id = 0;
  std::string name;
  std::string architecture;  // "gfx90a" on AMD, "sm_90" on NVIDIA
  std::string platform;      // "amd" or "nvidia"
  size_t total_memory = 0;
  size_t free_memory = 0;
  int compute_units = 0;
  int wave_size = 0;
};

bool compiled();  // true when this build has a GPU backend
const char* platform();  // "amd", "nvidia" or "none"
bool is_available();
int get_device_count();
int get_current_device();  // -1 before any device is selected
void set_device(int device_id);
void synchronize();
DeviceInfo get_device_info(int device_id);

// Device memory for a graph node on GPU `device_id`.
std::shared_ptr<Buffer> allocate_buffer(int device_id, size_t bytes);

// Copies an evaluated GPU tensor (any layout) row-major into host memory,
// waiting only on the stream that produced it.
void copy_to_host(const Tensor& src, void* dst);

}  // namespace pyflame::backend::rocm
