#include "backend/rocm/memory.h"

#include <cstdint>
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "backend/rocm/context.h"
#include "pyflame/backend/rocm.h"
#include "pyflame/errors.h"

namespace pyflame::backend::rocm {

namespace {
constexpr size_t kSmall = 1u << 20;

std::string mib(size_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1024.0 * 1024.0));
  return buf;
}
}  // namespace

ROCmMemoryManager::ROCmMemoryManager(Config config, int device) : config_(config), device_(device) {}

// Blocks still live at destruction belong to tensors being torn down with the
// process; the driver reclaims them.
ROCmMemoryManager::~ROCmMemoryManager() = default;

size_t ROCmMemoryManager::round_size(size_t bytes) {
  // Small requests round to 512 B, large to 1 MiB, so freed blocks fit
  // later requests of nearly the same size.
  size_t q = bytes < kSmall ? 512 : kSmall;
  if (bytes > (SIZE_MAX >> 1)) {  // no device has this much; rounding would wrap
    throw OutOfMemoryError(errmsg("allocate", "cannot allocate " + std::to_string(bytes) + " bytes on the GPU"));
  }
  return (std::max<size_t>(bytes, 1) + q - 1) / q * q;
}

hipStream_t ROCmMemoryManager::compute_stream() const { return context(device_).stream; }

void* ROCmMemoryManager::take_cached(size_t size, hipStream_t stream) {
  auto fl = free_.find(stream);
  if (fl == free_.end()) return nullptr;
  auto it = fl->second.lower_bound(size);
  // Do not hand out a block far larger than asked: it would stay pinned to a small tensor.
  if (it == fl->second.end() || it->first > std::max(2 * size, size + 2 * kSmall)) return nullptr;
  void* p = it->second;
  stats_.cached_bytes -= it->first;
  live_[p] = Block{it->first, stream};
  fl->second.erase(it);
  return p;
}

void ROCmMemoryManager::release_cache_locked() {
  if (stats_.cached_bytes == 0) return;
  DeviceGuard g(device_);
  // Cached blocks may still be read by queued work on their stream.
  for (auto& [stream, blocks] : free_) {
    (void)hipStreamSynchronize(stream);
    for (auto& [size, p] : blocks) (void)hipFree(p);
  }
  free_.clear();
  stats_.cached_bytes = 0;
}

void ROCmMemoryManager::trim_locked() {
  const size_t limit = config_.max_pool_size_mb << 20;
  if (stats_.cached_bytes > limit) release_cache_locked();
}

void* ROCmMemoryManager::driver_alloc(size_t size) {
  DeviceGuard g(device_);
  void* p = nullptr;
  hipError_t err = hipMalloc(&p, size);
  if (err == hipErrorOutOfMemory) {
    (void)hipGetLastError();
    release_cache_locked();
    err = hipMalloc(&p, size);
  }
  if (err != hipSuccess) {
    (void)hipGetLastError();
    size_t free_b = 0, total_b = 0;
    (void)hipMemGetInfo(&free_b, &total_b);
    throw OutOfMemoryError(errmsg("allocate", "out of GPU memory on rocm:" + std::to_string(device_) +
                                                  ": tried to allocate " + mib(size) + ", " + mib(free_b) +
                                                  " free of " + mib(total_b) + ", " +
                                                  mib(stats_.total_allocated) + " held by tensors"));
  }
  return p;
}

void* ROCmMemoryManager::allocate_async(size_t bytes, hipStream_t stream) {
  const size_t size = round_size(bytes);
  std::lock_guard lk(mu_);
  void* p = config_.enable_pooling ? take_cached(size, stream) : nullptr;
  if (p) {
    ++stats_.cache_hits;
  } else {
    ++stats_.cache_misses;
    p = driver_alloc(size);
    live_[p] = Block{size, stream};
  }
  ++stats_.total_allocations;
  stats_.total_allocated += live_[p].size;
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.total_allocated);
  return p;
}

void* ROCmMemoryManager::allocate(size_t bytes) { return allocate_async(bytes, compute_stream()); }

void ROCmMemoryManager::deallocate_async(void* ptr, hipStream_t stream) {
  if (!ptr) return;
  std::lock_guard lk(mu_);
  auto it = live_.find(ptr);
  if (it == live_.end()) {
    throw ValueError(errmsg("deallocate", "pointer was not allocated by this memory manager"));
  }
  const size_t size = it->second.size;
  live_.erase(it);
  ++stats_.total_deallocations;
  stats_.total_allocated -= size;
  if (!config_.enable_pooling) {
    DeviceGuard g(device_);
    (void)hipStreamSynchronize(stream);
    PF_HIP_CHECK(hipFree(ptr));
    return;
  }
  free_[stream].emplace(size, ptr);
  stats_.cached_bytes += size;
  trim_locked();
}

void ROCmMemoryManager::deallocate(void* ptr) {
  hipStream_t s;
  {
    std::lock_guard lk(mu_);
    auto it = live_.find(ptr);
    s = it == live_.end() ? compute_stream() : it->second.stream;
  }
  deallocate_async(ptr, s);
}

void ROCmMemoryManager::copy_host_to_device_async(void* dst, const void* src, size_t bytes, hipStream_t s) {
  PF_HIP_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyHostToDevice, s));
}
void ROCmMemoryManager::copy_device_to_host_async(void* dst, const void* src, size_t bytes, hipStream_t s) {
  PF_HIP_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToHost, s));
}
void ROCmMemoryManager::copy_device_to_device_async(void* dst, const void* src, size_t bytes, hipStream_t s) {
  PF_HIP_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToDevice, s));
}
void ROCmMemoryManager::memset_async(void* ptr, int value, size_t bytes, hipStream_t s) {
  PF_HIP_CHECK(hipMemsetAsync(ptr, value, bytes, s));
}

void ROCmMemoryManager::copy_host_to_device(void* dst, const void* src, size_t bytes) {
  hipStream_t s = compute_stream();
  copy_host_to_device_async(dst, src, bytes, s);
  PF_HIP_CHECK(hipStreamSynchronize(s));
}
void ROCmMemoryManager::copy_device_to_host(void* dst, const void* src, size_t bytes) {
  hipStream_t s = compute_stream();
  copy_device_to_host_async(dst, src, bytes, s);
  PF_HIP_CHECK(hipStreamSynchronize(s));
}
void ROCmMemoryManager::copy_device_to_device(void* dst, const void* src, size_t bytes) {
  hipStream_t s = compute_stream();
  copy_device_to_device_async(dst, src, bytes, s);
  PF_HIP_CHECK(hipStreamSynchronize(s));
}
void ROCmMemoryManager::memset(void* ptr, int value, size_t bytes) {
  hipStream_t s = compute_stream();
  memset_async(ptr, value, bytes, s);
  PF_HIP_CHECK(hipStreamSynchronize(s));
}

void* ROCmMemoryManager::allocate_pinned(size_t bytes) { return get_pinned_pool().acquire(bytes); }
void ROCmMemoryManager::deallocate_pinned(void* ptr) { get_pinned_pool().release(ptr); }

MemoryStats ROCmMemoryManager::get_stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

void ROCmMemoryManager::reset_stats() {
  std::lock_guard lk(mu_);
  MemoryStats s;
  s.total_allocated = stats_.total_allocated;
  s.peak_allocated = stats_.total_allocated;
  s.cached_bytes = stats_.cached_bytes;
  stats_ = s;
}

void ROCmMemoryManager::clear_pool() {
  std::lock_guard lk(mu_);
  release_cache_locked();
}

void ROCmMemoryManager::get_memory_info(size_t* free_b, size_t* total_b) const {
  DeviceGuard g(device_);
  PF_HIP_CHECK(hipMemGetInfo(free_b, total_b));
}

void ROCmMemoryManager::warmup(const std::vector<size_t>& sizes) {
  std::vector<void*> ps;
  for (size_t s : sizes) ps.push_back(allocate(s));
  for (void* p : ps) deallocate(p);
}

ROCmMemoryManager& get_memory_manager(int device) {
  static std::mutex mu;
  static std::vector<ROCmMemoryManager*> managers;  // process lifetime, like the contexts
  if (device < 0) device = std::max(0, get_current_device());
  if (device >= get_device_count()) {
    throw RuntimeError(errmsg("get_memory_manager", "no ROCm device " + std::to_string(device) + " (" +
                                                        std::to_string(get_device_count()) + " available)"));
  }
  std::lock_guard lk(mu);
  if (managers.size() <= static_cast<size_t>(device)) managers.resize(device + 1, nullptr);
  if (!managers[device]) managers[device] = new ROCmMemoryManager({}, device);
  return *managers[device];
}

// ---- pinned host pool ----

void PinnedMemoryPool::reclaim_locked() {
  auto done = [](auto& e) { return hipEventQuery(e.second) != hipErrorNotReady; };
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (done(*it)) {
      (void)hipEventDestroy(it->second);
      free_.emplace(sizes_[it->first], it->first);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
}

void* PinnedMemoryPool::acquire(size_t bytes) {
  if (bytes > (SIZE_MAX >> 1)) {
    throw OutOfMemoryError(errmsg("pinned_pool", "cannot allocate " + std::to_string(bytes) + " pinned bytes"));
  }
  size_t size = (std::max<size_t>(bytes, 1) + 4095) / 4096 * 4096;
  std::lock_guard lk(mu_);
  reclaim_locked();
  auto it = free_.lower_bound(size);
  if (it != free_.end() && it->first <= 2 * size) {
    void* p = it->second;
    free_.erase(it);
    return p;
  }
  void* p = nullptr;
  hipError_t err = hipHostMalloc(&p, size, hipHostMallocDefault);
  if (err == hipErrorOutOfMemory) {
    (void)hipGetLastError();  // clear the sticky error so the context stays usable
    throw OutOfMemoryError(errmsg("pinned_pool", "out of pinned host memory allocating " +
                                                     std::to_string(size) + " bytes"));
  }
  PF_HIP_CHECK(err);
  sizes_[p] = size;
  return p;
}

void PinnedMemoryPool::release(void* ptr) {
  std::lock_guard lk(mu_);
  auto it = sizes_.find(ptr);
  if (it == sizes_.end()) throw ValueError(errmsg("pinned_pool.release", "unknown pointer"));
  free_.emplace(it->second, ptr);
}

void PinnedMemoryPool::release_after(void* ptr, hipStream_t stream) {
  hipEvent_t ev;
  PF_HIP_CHECK(hipEventCreateWithFlags(&ev, hipEventDisableTiming));
  PF_HIP_CHECK(hipEventRecord(ev, stream));
  std::lock_guard lk(mu_);
  pending_.emplace_back(ptr, ev);
}

void PinnedMemoryPool::warmup(const std::vector<size_t>& sizes) {
  std::vector<void*> ps;
  for (size_t s : sizes) ps.push_back(acquire(s));
  for (void* p : ps) release(p);
}

void PinnedMemoryPool::clear() {
  std::lock_guard lk(mu_);
  for (auto& [p, ev] : pending_) {
    (void)hipEventSynchronize(ev);
    (void)hipEventDestroy(ev);
    free_.emplace(sizes_[p], p);
  }
  pending_.clear();
  for (auto& [size, p] : free_) {
    (void)hipHostFree(p);
    sizes_.erase(p);
  }
  free_.clear();
}

size_t PinnedMemoryPool::cached_bytes() const {
  std::lock_guard lk(mu_);
  size_t n = 0;
  for (auto& [size, p] : free_) n += size;
  return n;
}

PinnedMemoryPool& get_pinned_pool() {
  static auto* pool = new PinnedMemoryPool;  // process lifetime
  return *pool;
}

void warmup_memory_pool(int batch_size, const std::string& model_size) {
  size_t width;
  if (model_size == "small") width = 256;
  else if (model_size == "medium") width = 1024;
  else if (model_size == "large") width = 4096;
  else throw ValueError(errmsg("warmup_memory_pool", "model_size must be 'small', 'medium' or 'large'"));
  if (batch_size <= 0) throw ValueError(errmsg("warmup_memory_pool", "batch_size must be positive"));
  // Activations of a few layers, fp32, plus an input batch.
  size_t act = size_t(batch_size) * width * 4;
  get_memory_manager().warmup({act, act, act, act, width * width * 4});
  get_pinned_pool().warmup({act});
}

}  // namespace pyflame::backend::rocm

namespace pyflame::backend::rocm {

MemoryStats memory_stats(int device) { return get_memory_manager(device).get_stats(); }
void reset_memory_stats(int device) { get_memory_manager(device).reset_stats(); }
void clear_memory_pool(int device) { get_memory_manager(device).clear_pool(); }
void memory_info(int device, size_t* free_b, size_t* total_b) {
  get_memory_manager(device).get_memory_info(free_b, total_b);
}
void pinned_pool_warmup(const std::vector<size_t>& sizes) { get_pinned_pool().warmup(sizes); }
void pinned_pool_clear() { get_pinned_pool().clear(); }
size_t pinned_pool_cached_bytes() { return get_pinned_pool().cached_bytes(); }

}  // namespace pyflame::backend::rocm
