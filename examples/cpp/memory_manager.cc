// The GPU memory manager (ROCmMemoryManager): allocation through the caching
// pool, host/device transfers, memset, the pinned pool and statistics. Needs
// a GPU build; on a machine without a GPU it says so and exits 0.
#include <cstdio>
#include <numeric>
#include <vector>

#include "pyflame/backend/rocm/api.h"

namespace rocm = pyflame::backend::rocm;

int main() {
  if (!rocm::is_available()) {
    std::printf("no GPU: nothing to run\n");
    return 0;
  }
  rocm::set_device(0);
  auto& mm = rocm::get_memory_manager();
  mm.reset_stats();
  rocm::get_pinned_pool().warmup({1 << 20});

  const size_t n = 1 << 20;
  std::vector<int> host(n), back(n);
  std::iota(host.begin(), host.end(), 0);
  bool ok = true;
  for (int round = 0; round < 3; ++round) {  // later rounds reuse the cached block
    void* d = mm.allocate(n * sizeof(int));
    mm.copy_host_to_device(d, host.data(), n * sizeof(int));
    mm.copy_device_to_host(back.data(), d, n * sizeof(int));
    ok = ok && back == host;
    mm.memset(d, 0, n * sizeof(int));
    mm.copy_device_to_host(back.data(), d, n * sizeof(int));
    ok = ok && back == std::vector<int>(n, 0);
    mm.deallocate(d);
  }
  const rocm::MemoryStats s = mm.get_stats();
  size_t free_b = 0, total_b = 0;
  mm.get_memory_info(&free_b, &total_b);
  std::printf("allocations %zu, deallocations %zu, cache hits %zu, misses %zu, peak %zu bytes\n",
              s.total_allocations, s.total_deallocations, s.cache_hits, s.cache_misses, s.peak_allocated);
  std::printf("device memory: %.1f of %.1f GiB free\n", free_b / 1073741824.0, total_b / 1073741824.0);
  ok = ok && s.total_allocations == 3 && s.cache_hits >= 2;
  mm.clear_pool();
  std::printf("%s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
