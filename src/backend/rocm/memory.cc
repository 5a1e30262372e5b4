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

StreamPool& ROCmMemoryManager::pool(hipStream_t stream) {
  std::lock_guard lk(pools_mu_);
  StreamPool*& p = pools_[stream];
  if (!p) {
    p = new StreamPool;
    p->stream = stream;
  }
  return *p;
}

void* ROCmMemoryManager::take_cached(StreamPool& pool, size_t size) {
  auto it = pool.free.lower_bound(size);
  // Do not hand out a block far larger than asked: it would stay pinned to a small tensor.
  if (it == pool.free.end() || it->first > std::max(2 * size, size + 2 * kSmall)) return nullptr;
  void* p = it->second;
  pool.live[p] = it->first;
  pool.free.erase(it);
  return p;
}

namespace {
std::atomic<uint64_t> g_release_epoch{0};
}

uint64_t release_epoch() { return g_release_epoch.load(std::memory_order_acquire); }

void ROCmMemoryManager::release_cache() {
  std::lock_guard reg(pools_mu_);
  if (stats_.cached.load() == 0) return;
  g_release_epoch.fetch_add(1, std::memory_order_acq_rel);  // captured graphs' memory may go
  DeviceGuard g(device_);
  for (auto& [stream, pool] : pools_) {
    std::lock_guard lk(pool->mu);
    if (pool->free.empty()) continue;
    // Cached blocks may still be read by queued work on their stream.
    (void)hipStreamSynchronize(stream);
    for (auto& [size, p] : pool->free) {
      (void)hipFree(p);
      stats_.cached -= size;
    }
    pool->free.clear();
  }
}

void* ROCmMemoryManager::driver_alloc(size_t size) {
  DeviceGuard g(device_);
  void* p = nullptr;
  hipError_t err = hipMalloc(&p, size);
  if (err == hipErrorOutOfMemory) {
    (void)hipGetLastError();
    release_cache();
    err = hipMalloc(&p, size);
  }
  if (err != hipSuccess) {
    (void)hipGetLastError();
    size_t free_b = 0, total_b = 0;
    (void)hipMemGetInfo(&free_b, &total_b);
    throw OutOfMemoryError(errmsg("allocate", "out of GPU memory on rocm:" + std::to_string(device_) +
                                                  ": tried to allocate " + mib(size) + ", " + mib(free_b) +
                                                  " free of " + mib(total_b) + ", " +
                                                  mib(stats_.allocated.load()) + " held by tensors"));
  }
  return p;
}

void ROCmMemoryManager::count_allocation(size_t size, bool hit) {
  ++(hit ? stats_.hits : stats_.misses);
  ++stats_.allocations;
  const size_t now = stats_.allocated += size;
  size_t peak = stats_.peak.load(std::memory_order_relaxed);
  while (now > peak && !stats_.peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void* ROCmMemoryManager::allocate_in(StreamPool& pool, size_t bytes) {
  const size_t size = round_size(bytes);
  if (config_.enable_pooling) {
    std::lock_guard lk(pool.mu);
    if (void* p = take_cached(pool, size)) {
      stats_.cached -= pool.live[p];
      count_allocation(pool.live[p], true);
      return p;
    }
  }
  void* p = driver_alloc(size);  // outside the pool's lock: it may release every pool's cache
  {
    std::lock_guard lk(pool.mu);
    pool.live[p] = size;
  }
  count_allocation(size, false);
  return p;
}

void ROCmMemoryManager::free_block(StreamPool& from, void* ptr, StreamPool& to) {
  size_t size;
  {
    std::lock_guard lk(from.mu);
    auto it = from.live.find(ptr);
    if (it == from.live.end()) {
      throw ValueError(errmsg("deallocate", "pointer was not allocated by this memory manager"));
    }
    size = it->second;
    from.live.erase(it);
  }
  ++stats_.deallocations;
  stats_.allocated -= size;
  if (!config_.enable_pooling) {
    DeviceGuard g(device_);
    (void)hipStreamSynchronize(to.stream);
    PF_HIP_CHECK(hipFree(ptr));
    return;
  }
  {
    std::lock_guard lk(to.mu);
    to.free.emplace(size, ptr);
  }
  // Cached bytes above the limit go back to the driver.
  if ((stats_.cached += size) > (config_.max_pool_size_mb << 20)) release_cache();
}

void ROCmMemoryManager::deallocate_in(StreamPool& pool, void* ptr) {
  if (ptr) free_block(pool, ptr, pool);
}

// The raw API (spec: ROCmMemoryManager) remembers which pool each of its
// blocks came from; the eval path does not need to.
void* ROCmMemoryManager::allocate_async(size_t bytes, hipStream_t stream) {
  StreamPool& p = pool(stream);
  void* ptr = allocate_in(p, bytes);
  std::lock_guard lk(pools_mu_);
  raw_owner_[ptr] = &p;
  return ptr;
}

void* ROCmMemoryManager::allocate(size_t bytes) { return allocate_async(bytes, compute_stream()); }

StreamPool& ROCmMemoryManager::take_raw_owner(void* ptr) {
  std::lock_guard lk(pools_mu_);
  auto it = raw_owner_.find(ptr);
  if (it == raw_owner_.end()) {
    throw ValueError(errmsg("deallocate", "pointer was not allocated by this memory manager"));
  }
  StreamPool* from = it->second;
  raw_owner_.erase(it);
  return *from;
}

void ROCmMemoryManager::deallocate_async(void* ptr, hipStream_t stream) {
  if (!ptr) return;
  StreamPool& from = take_raw_owner(ptr);
  free_block(from, ptr, pool(stream));
}

void ROCmMemoryManager::deallocate(void* ptr) {
  if (!ptr) return;
  StreamPool& from = take_raw_owner(ptr);
  free_block(from, ptr, from);
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
  MemoryStats s;
  s.total_allocated = stats_.allocated.load();
  s.peak_allocated = stats_.peak.load();
  s.total_allocations = stats_.allocations.load();
  s.total_deallocations = stats_.deallocations.load();
  s.cache_hits = stats_.hits.load();
  s.cache_misses = stats_.misses.load();
  s.cached_bytes = stats_.cached.load();
  return s;
}

void ROCmMemoryManager::reset_stats() {
  stats_.peak = stats_.allocated.load();
  stats_.allocations = 0;
  stats_.deallocations = 0;
  stats_.hits = 0;
  stats_.misses = 0;
}

void ROCmMemoryManager::clear_pool() { release_cache(); }

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
  // Process lifetime, like the contexts; found without a lock once made.
  static std::atomic<ROCmMemoryManager*> managers[kMaxDevices];
  static std::mutex mu;
  if (device < 0) device = std::max(0, get_current_device());
  if (device >= get_device_count()) {
    throw RuntimeError(errmsg("get_memory_manager", "no ROCm device " + std::to_string(device) + " (" +
                                                        std::to_string(get_device_count()) + " available)"));
  }
  if (ROCmMemoryManager* m = managers[device].load(std::memory_order_acquire)) return *m;
  std::lock_guard lk(mu);
  if (!managers[device].load()) managers[device].store(new ROCmMemoryManager({}, device), std::memory_order_release);
  return *managers[device].load();
}

// ---- pinned host pool ----

namespace {
// What one thread keeps for itself: enough blocks for a few transfers in
// flight at the sizes it uses; more go back to the shared lists.
constexpr size_t kThreadBlocks = 16;
constexpr size_t kThreadBytes = 64u << 20;

size_t pinned_size(size_t bytes) {
  if (bytes > (SIZE_MAX >> 1)) {
    throw OutOfMemoryError(errmsg("pinned_pool", "cannot allocate " + std::to_string(bytes) + " pinned bytes"));
  }
  return (std::max<size_t>(bytes, 1) + 4095) / 4096 * 4096;
}

// A cached block fits a request if it is not more than twice as large.
bool fits(size_t block, size_t size) { return block >= size && block <= 2 * size; }

template <class V, class F>
bool take_first(V& v, F&& pred, typename V::value_type* out) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (pred(v[i])) {
      *out = v[i];
      v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
      return true;
    }
  }
  return false;
}
}  // namespace

struct PinnedMemoryPool::ThreadCache {
  PinnedMemoryPool* pool;
  std::mutex mu;  // its thread's, except for clear(), cached_bytes() and a foreign release
  std::vector<Block> free;     // oldest first
  std::vector<Block> held;     // acquired here, not released yet
  std::vector<Pending> pending;  // released after a stream, in release order
  std::vector<std::pair<int, hipEvent_t>> events;  // spare, with their device

  // Blocks whose stream has passed the release point go back to `free`,
  // their events to the spares. Queries only this thread's few events.
  void reclaim() {
    size_t kept = 0;
    for (Pending& p : pending) {
      if (gpu::still_running(hipEventQuery(p.event))) {
        pending[kept++] = p;
      } else {
        free.push_back(p.block);
        events.emplace_back(p.device, p.event);
      }
    }
    pending.resize(kept);
  }
  hipEvent_t event_for(int device) {
    for (size_t i = 0; i < events.size(); ++i) {
      if (events[i].first == device) {
        const hipEvent_t e = events[i].second;
        events.erase(events.begin() + static_cast<std::ptrdiff_t>(i));
        return e;
      }
    }
    hipEvent_t e = nullptr;
    PF_HIP_CHECK(hipEventCreateWithFlags(&e, hipEventDisableTiming));
    return e;
  }
  // The blocks beyond this thread's share, oldest first, for the shared lists.
  std::vector<Block> surplus() {
    size_t bytes = 0;
    for (const Block& b : free) bytes += b.size;
    size_t n = 0;
    while (n < free.size() && (free.size() - n > kThreadBlocks || bytes > kThreadBytes)) bytes -= free[n++].size;
    std::vector<Block> out(free.begin(), free.begin() + static_cast<std::ptrdiff_t>(n));
    free.erase(free.begin(), free.begin() + static_cast<std::ptrdiff_t>(n));
    return out;
  }
};

namespace {
// Hands a thread's cache back to its pool when the thread ends.
struct CacheHolder {
  PinnedMemoryPool::ThreadCache* cache = nullptr;
  ~CacheHolder();
};
thread_local CacheHolder t_pinned;
}  // namespace

PinnedMemoryPool::ThreadCache* PinnedMemoryPool::thread_cache() {
  if (!thread_caches_) return nullptr;
  if (!t_pinned.cache) {
    auto* c = new ThreadCache{this, {}, {}, {}, {}, {}};
    std::lock_guard lk(mu_);
    caches_.push_back(c);
    t_pinned.cache = c;
  }
  return t_pinned.cache;
}

CacheHolder::~CacheHolder() {
  if (!cache) return;
  try {
    cache->pool->detach(cache);
  } catch (...) {
  }
  delete cache;
}

void PinnedMemoryPool::detach(ThreadCache* c) {
  std::lock_guard lk(mu_);
  caches_.erase(std::remove(caches_.begin(), caches_.end(), c), caches_.end());
  std::lock_guard ck(c->mu);
  for (const Block& b : c->free) free_.emplace(b.size, b.ptr);
  pending_.insert(pending_.end(), c->pending.begin(), c->pending.end());  // reclaimed by the shared path
  for (auto& [device, e] : c->events) (void)hipEventDestroy(e);
  // Blocks it still holds stay known (sizes_): another thread may release them.
  c->free.clear();
  c->pending.clear();
  c->events.clear();
}

PinnedMemoryPool::~PinnedMemoryPool() {
  try {
    clear();
  } catch (...) {
  }
}

void PinnedMemoryPool::reclaim_locked() {
  size_t kept = 0;
  for (Pending& p : pending_) {
    if (gpu::still_running(hipEventQuery(p.event))) {
      pending_[kept++] = p;
    } else {
      (void)hipEventDestroy(p.event);
      free_.emplace(p.block.size, p.block.ptr);
    }
  }
  pending_.resize(kept);
}

PinnedMemoryPool::Block PinnedMemoryPool::acquire_shared(size_t size) {
  std::unique_lock lk(mu_);
  reclaim_locked();
  auto it = free_.lower_bound(size);
  if (it != free_.end() && fits(it->first, size)) {
    const Block b{it->second, it->first};
    free_.erase(it);
    return b;
  }
  lk.unlock();  // page-locking takes long: other threads go on meanwhile
  void* p = nullptr;
  hipError_t err = hipHostMalloc(&p, size, hipHostMallocDefault);
  if (err == hipErrorOutOfMemory) {
    (void)hipGetLastError();  // clear the sticky error so the context stays usable
    throw OutOfMemoryError(errmsg("pinned_pool", "out of pinned host memory allocating " +
                                                     std::to_string(size) + " bytes"));
  }
  PF_HIP_CHECK(err);
  lk.lock();
  sizes_[p] = size;
  return {p, size};
}

void* PinnedMemoryPool::acquire(size_t bytes) {
  const size_t size = pinned_size(bytes);
  ThreadCache* c = thread_cache();
  if (!c) return acquire_shared(size).ptr;
  {
    std::lock_guard lk(c->mu);
    c->reclaim();
    // The smallest fitting block, so a small request leaves the large ones.
    size_t best = c->free.size();
    for (size_t i = 0; i < c->free.size(); ++i) {
      if (fits(c->free[i].size, size) && (best == c->free.size() || c->free[i].size < c->free[best].size)) best = i;
    }
    if (best != c->free.size()) {
      const Block b = c->free[best];
      c->free.erase(c->free.begin() + static_cast<std::ptrdiff_t>(best));
      c->held.push_back(b);
      return b.ptr;
    }
  }
  const Block b = acquire_shared(size);
  std::lock_guard lk(c->mu);
  c->held.push_back(b);
  return b.ptr;
}

PinnedMemoryPool::Block PinnedMemoryPool::forget_foreign(void* ptr) {
  // Caller holds mu_.
  auto it = sizes_.find(ptr);
  if (it == sizes_.end()) throw ValueError(errmsg("pinned_pool.release", "unknown pointer"));
  for (ThreadCache* c : caches_) {
    std::lock_guard ck(c->mu);
    Block b{};
    if (take_first(c->held, [&](const Block& h) { return h.ptr == ptr; }, &b)) break;
  }
  return {ptr, it->second};
}

void PinnedMemoryPool::give_back_shared(const std::vector<Block>& blocks) {
  if (blocks.empty()) return;
  std::lock_guard lk(mu_);
  for (const Block& b : blocks) free_.emplace(b.size, b.ptr);
}

void PinnedMemoryPool::release(void* ptr) {
  if (ThreadCache* c = thread_cache()) {
    std::vector<Block> extra;
    bool mine = false;
    {
      std::lock_guard lk(c->mu);
      Block b{};
      if ((mine = take_first(c->held, [&](const Block& h) { return h.ptr == ptr; }, &b))) {
        c->free.push_back(b);
        extra = c->surplus();
      }
    }
    if (mine) {
      give_back_shared(extra);
      return;
    }
  }
  std::lock_guard lk(mu_);  // a block acquired elsewhere (another thread, or no thread caches)
  const Block b = forget_foreign(ptr);
  free_.emplace(b.size, b.ptr);
}

void PinnedMemoryPool::release_after(void* ptr, hipStream_t stream) {
  int device = 0;
  PF_HIP_CHECK(hipGetDevice(&device));  // the stream's, as the caller set it
  if (ThreadCache* c = thread_cache()) {
    std::lock_guard lk(c->mu);
    auto it = std::find_if(c->held.begin(), c->held.end(), [&](const Block& h) { return h.ptr == ptr; });
    if (it != c->held.end()) {
      const hipEvent_t e = c->event_for(device);
      const hipError_t err = hipEventRecord(e, stream);
      if (err != hipSuccess) {
        c->events.emplace_back(device, e);
        PF_HIP_CHECK(err);  // the block stays held: its copy may still be queued
      }
      c->pending.push_back({*it, e, device});
      c->held.erase(it);
      return;
    }
  }
  // A block acquired elsewhere (another thread, or a pool without thread caches).
  hipEvent_t e = nullptr;
  PF_HIP_CHECK(hipEventCreateWithFlags(&e, hipEventDisableTiming));
  const hipError_t err = hipEventRecord(e, stream);
  if (err != hipSuccess) (void)hipEventDestroy(e);
  PF_HIP_CHECK(err);
  std::lock_guard lk(mu_);
  const Block b = forget_foreign(ptr);
  pending_.push_back({b, e, device});
}

void PinnedMemoryPool::warmup(const std::vector<size_t>& sizes) {
  std::vector<void*> ps;
  for (size_t s : sizes) ps.push_back(acquire(s));
  for (void* p : ps) release(p);
}

void PinnedMemoryPool::clear() {
  std::lock_guard lk(mu_);
  auto drop = [&](const Block& b) {
    (void)hipHostFree(b.ptr);
    sizes_.erase(b.ptr);
  };
  for (ThreadCache* c : caches_) {
    std::lock_guard ck(c->mu);
    for (const Pending& p : c->pending) {
      (void)hipEventSynchronize(p.event);
      c->events.emplace_back(p.device, p.event);
      drop(p.block);
    }
    c->pending.clear();
    for (const Block& b : c->free) drop(b);
    c->free.clear();
  }
  for (const Pending& p : pending_) {
    (void)hipEventSynchronize(p.event);
    (void)hipEventDestroy(p.event);
    drop(p.block);
  }
  pending_.clear();
  for (auto& [size, p] : free_) drop({p, size});
  free_.clear();
}

size_t PinnedMemoryPool::cached_bytes() const {
  std::lock_guard lk(mu_);
  size_t n = 0;
  for (auto& [size, p] : free_) n += size;
  for (ThreadCache* c : caches_) {
    std::lock_guard ck(c->mu);
    for (const Block& b : c->free) n += b.size;
  }
  return n;
}

PinnedMemoryPool& get_pinned_pool() {
  static auto* pool = new PinnedMemoryPool(true);  // process lifetime; thread caches hold it
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
