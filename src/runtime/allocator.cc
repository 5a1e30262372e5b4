#include "runtime/allocator.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "pyflame/errors.h"
#include "runtime/backend.h"

namespace pyflame {

namespace {
std::atomic<size_t> g_host_allocated{0};
std::atomic<size_t> g_host_peak{0};

// Large host buffers are fresh pages from the system on every allocation:
// with 4 KiB pages their first touch costs more than the arithmetic (a
// 64 MiB result takes 16k page faults). They are aligned to 2 MiB and
// marked for transparent huge pages, as NumPy does.
constexpr size_t kHugeAlign = size_t(2) << 20;
constexpr size_t kHugeFrom = size_t(4) << 20;

// Even with huge pages, a fresh 64 MiB result costs the kernel 32 faults
// that zero it: about 8 ms of system time, a fifth of a bandwidth-bound
// elementwise op over it on two cores, and more in a process whose address
// space is large or under memory pressure (PyTorch loaded next to us). A
// step repeated (eager loops, training, benchmarks) frees a result of the
// size the next one needs, so a few large blocks freed are kept and handed
// back for the same size: warm pages, no system call, no fault. Bounded
// (kCacheBlocks blocks, kCacheBytes in all); release_host_cache() returns
// them to the system.
constexpr size_t kCacheBlocks = 4;
constexpr size_t kCacheBytes = size_t(256) << 20;

struct HostCache {
  std::mutex mu;
  std::vector<std::pair<void*, size_t>> blocks;  // (memory, rounded size)
  size_t bytes = 0;
};
HostCache& host_cache() {
  static HostCache* c = new HostCache;  // never destroyed: buffers may die at exit
  return *c;
}

// A kept block of exactly `rounded` bytes, or null.
void* take_cached(size_t rounded) {
  HostCache& c = host_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  for (size_t i = c.blocks.size(); i-- > 0;) {
    if (c.blocks[i].second != rounded) continue;
    void* p = c.blocks[i].first;
    c.blocks.erase(c.blocks.begin() + static_cast<std::ptrdiff_t>(i));
    c.bytes -= rounded;
    return p;
  }
  return nullptr;
}

// Keeps a freed large block if there is room; false: the caller frees it.
bool keep_cached(void* p, size_t rounded) {
  HostCache& c = host_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.blocks.size() >= kCacheBlocks || c.bytes + rounded > kCacheBytes) return false;
  c.blocks.emplace_back(p, rounded);
  c.bytes += rounded;
  return true;
}

// ctx carries the rounded size, for the statistics.
void free_host(void* p, void* ctx) {
  const size_t rounded = reinterpret_cast<uintptr_t>(ctx);
  g_host_allocated.fetch_sub(rounded, std::memory_order_relaxed);
  if (rounded >= kHugeFrom && keep_cached(p, rounded)) return;
  std::free(p);
}

void count_host(size_t bytes) {
  size_t now = g_host_allocated.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  size_t peak = g_host_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_host_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void* host_alloc(size_t rounded) {
  if (rounded < kHugeFrom) return std::aligned_alloc(64, rounded);
  if (void* kept = take_cached(rounded)) return kept;
  void* p = std::aligned_alloc(kHugeAlign, rounded);
  if (!p && release_host_cache()) p = std::aligned_alloc(kHugeAlign, rounded);  // kept blocks of other sizes
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

size_t release_host_cache() {
  HostCache& c = host_cache();
  std::vector<std::pair<void*, size_t>> blocks;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    blocks.swap(c.blocks);
    c.bytes = 0;
  }
  size_t bytes = 0;
  for (const auto& [p, n] : blocks) {
    std::free(p);
    bytes += n;
  }
  return bytes;
}

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
