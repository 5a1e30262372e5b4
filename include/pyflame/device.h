// Device values: 'cpu', 'rocm', 'rocm:N' (aliases 'gpu', 'hip', 'cuda'),
// 'auto' (best available).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace pyflame {

enum class DeviceType : uint8_t { CPU, ROCm };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device rocm(int i = 0) { return {DeviceType::ROCm, i}; }
  // Raises ValueError for unknown strings and RuntimeError for devices this
  // build cannot reach ('cerebras', 'rocm' without a GPU, a bad index).
  static Device parse(std::string_view spec, const char* fn = "device");

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_gpu() const { return type == DeviceType::ROCm; }
  std::string str() const;  // "cpu" or "rocm:N"
  bool operator==(const Device&) const = default;
};

// Process-wide default device for creation ops.
Device default_device();
void set_default_device(Device d);

// The best available device: the current GPU if one is usable, else the CPU.
Device best_device();

}  // namespace pyflame
