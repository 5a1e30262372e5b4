#include "pyflame/device.h"

#include <charconv>
#include <atomic>

#include "pyflame/backend/rocm.h"
#include "pyflame/errors.h"

namespace pyflame {

namespace {
// Read by every creation op: an atomic, not a lock (8 bytes, lock-free).
std::atomic<Device> g_default{Device::cpu()};

bool is_gpu_alias(std::string_view s) {
  return s == "rocm" || s == "gpu" || s == "hip" || s == "cuda";
}

Device checked_gpu(int index, const char* fn) {
  namespace r = backend::rocm;
  if (!r::is_available()) {
    throw RuntimeError(errmsg(fn, std::string("no ROCm GPU is available (") +
                                      (r::compiled() ? "no device found"
                                                     : "this build has no GPU backend") +
                                      "); use 'cpu' or 'auto'"));
  }
  int n = r::get_device_count();
  if (index < 0 || index >= n) {
    throw RuntimeError(errmsg(fn, "invalid ROCm device index " + std::to_string(index) +
                                      " (" + std::to_string(n) + " device(s) available)"));
  }
  return Device::rocm(index);
}
}  // namespace

Device Device::parse(std::string_view spec, const char* fn) {
  if (spec == "cpu") return cpu();
  if (spec == "auto") return best_device();
  if (spec == "cerebras" || spec == "cerebras:simulator") {
    throw RuntimeError(errmsg(fn, "device '" + std::string(spec) +
                                      "' is not available in this build"));
  }
  auto colon = spec.find(':');
  std::string_view kind = spec.substr(0, colon);
  if (is_gpu_alias(kind)) {
    if (colon == std::string_view::npos) {
      int cur = backend::rocm::is_available() ? backend::rocm::get_current_device() : 0;
      return checked_gpu(cur < 0 ? 0 : cur, fn);
    }
    std::string_view num = spec.substr(colon + 1);
    int index = -1;
    auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), index);
    if (num.empty() || ec != std::errc() || p != num.data() + num.size()) {
      throw ValueError(errmsg(fn, "invalid device string '" + std::string(spec) +
                                      "' (expected 'rocm:N' with an integer N)"));
    }
    return checked_gpu(index, fn);
  }
  throw ValueError(errmsg(fn, "invalid device string '" + std::string(spec) +
                                  "' (expected 'cpu', 'rocm', 'rocm:N' or 'auto')"));
}

std::string Device::str() const {
  return is_cpu() ? "cpu" : "rocm:" + std::to_string(index);
}

Device default_device() { return g_default.load(std::memory_order_relaxed); }

void set_default_device(Device d) {
  if (d.is_gpu()) backend::rocm::set_device(d.index);
  g_default.store(d, std::memory_order_relaxed);
}

Device best_device() {
  if (backend::rocm::is_available()) {
    int cur = backend::rocm::get_current_device();
    return Device::rocm(cur < 0 ? 0 : cur);
  }
  return Device::cpu();
}

}  // namespace pyflame
