#include "runtime/allocator.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "pyflame/errors.h"
#include "runtime/backend.h"

namespace pyflame {

namespace {
std::atomic<size_t> g_host_allocated{0};
std::atomic<size_t> g_host_peak{0};

// ctx carries the rounded size, for the statistics.
void free_host(void* p, void* ctx) {
  g_host_allocated.fetch_sub(reinterpret_cast<uintptr_t>(ctx), std::memory_order_relaxed);
  std::free(p);
}

void count_host(size_t bytes) {
  size_t now = g_host_allocated.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  size_t peak = g_host_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_host_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}
}  // namespace

HostMemoryStats host_memory_stats() {
  return {g_host_allocated.load(std::memory_order_relaxed), g_host_peak.load(std::memory_order_relaxed)};
}

void reset_host_peak_memory() { g_host_peak = g_host_allocated.load(std::memory_order_relaxed); }

std::shared_ptr<Buffer> allocate(Device device, size_t bytes) {
  if (device.is_gpu()) return runtime::allocate_gpu(device.index, bytes);
  size_t rounded = (bytes + 63) / 64 * 64;
  void* p = rounded ? std::aligned_alloc(64, rounded) : nullptr;
  if (rounded && !p) {
    throw OutOfMemoryError(errmsg("allocate", "out of host memory allocating " +
                                                  std::to_string(bytes) + " bytes"));
  }
  count_host(rounded);
  return std::make_shared<Buffer>(p, bytes, device, &free_host, reinterpret_cast<void*>(rounded));
}

}  // namespace pyflame
