#include "runtime/allocator.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

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

// Large host buffers are fresh pages from the system on every allocation:
// with 4 KiB pages their first touch costs more than the arithmetic (a
// 64 MiB result takes 16k page faults). They are aligned to 2 MiB and
// marked for transparent huge pages, as NumPy does.
constexpr size_t kHugeAlign = size_t(2) << 20;
constexpr size_t kHugeFrom = size_t(4) << 20;

void* host_alloc(size_t rounded) {
  if (rounded < kHugeFrom) return std::aligned_alloc(64, rounded);
  void* p = std::aligned_alloc(kHugeAlign, rounded);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (p) (void)madvise(p, rounded, MADV_HUGEPAGE);  // advice only: failure changes nothing
#endif
  return p;
}
}  // namespace

HostMemoryStats host_memory_stats() {
  return {g_host_allocated.load(std::memory_order_relaxed), g_host_peak.load(std::memory_order_relaxed)};
}

void reset_host_peak_memory() { g_host_peak = g_host_allocated.load(std::memory_order_relaxed); }

std::shared_ptr<Buffer> allocate(Device device, size_t bytes) {
  if (device.is_gpu()) return runtime::allocate_gpu(device.index, bytes);
  const size_t align = bytes >= kHugeFrom ? kHugeAlign : 64;
  const bool fits = bytes <= SIZE_MAX - align;
  const size_t rounded = fits ? (bytes + align - 1) / align * align : 0;
  void* p = rounded ? host_alloc(rounded) : nullptr;
  if (!fits || (rounded && !p)) {
    throw OutOfMemoryError(errmsg("allocate", "out of host memory allocating " +
                                                  std::to_string(bytes) + " bytes"));
  }
  count_host(rounded);
  return std::make_shared<Buffer>(p, bytes, device, &free_host, reinterpret_cast<void*>(rounded));
}

}  // namespace pyflame
