// Device memory (spec: ROCmMemoryManager, MemoryStats, PinnedMemoryPool).
//
// The caching allocator keeps freed blocks in per-stream pools: a block is
// reused only by work on the stream that freed it, which the stream orders
// after the block's last use, so reuse needs no synchronization. Each pool
// has its own lock and the statistics are atomic, so evaluations on
// different streams (multi_stream) never wait for each other here; an
// execution context keeps its stream's pool, resolved once (context.h).
// On allocation failure the cache is released and the allocation retried;
// a second failure raises pf.OutOfMemoryError with the sizes.
#pragma once
#include <atomic>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/rocm/gpu/runtime.h"
#include "pyflame/backend/rocm.h"

namespace pyflame::backend::rocm {


// (Outside the class: a nested struct with member initializers cannot be a
// default argument of its enclosing class's constructor.)
struct MemoryManagerConfig {
  bool enable_pooling = true;
  size_t pool_size_mb = 256;       // warm-up size of the pool
  size_t max_pool_size_mb = 4096;  // cached bytes above this are returned to the driver
  bool use_pinned_host = true;
};

// The blocks of one stream: those in use (for their sizes) and the cached
// free ones by size. Lives as long as its manager.
struct StreamPool {
  hipStream_t stream = nullptr;
  std::mutex mu;
  std::unordered_map<void*, size_t> live;
  std::multimap<size_t, void*> free;
};

class ROCmMemoryManager {
 public:
  using Config = MemoryManagerConfig;

  explicit ROCmMemoryManager(Config config = {}, int device = 0);
  ~ROCmMemoryManager();
  ROCmMemoryManager(const ROCmMemoryManager&) = delete;
  ROCmMemoryManager& operator=(const ROCmMemoryManager&) = delete;

  // GPU memory. The synchronous forms use the device's compute stream.
  void* allocate(size_t bytes);
  void* allocate_async(size_t bytes, hipStream_t stream);
  void deallocate(void* ptr);
  void deallocate_async(void* ptr, hipStream_t stream);

  // Transfers. Synchronous forms wait for the copy (and only for it).
  void copy_host_to_device(void* dst, const void* src, size_t bytes);
  void copy_device_to_host(void* dst, const void* src, size_t bytes);
  void copy_device_to_device(void* dst, const void* src, size_t bytes);
  void copy_host_to_device_async(void* dst, const void* src, size_t bytes, hipStream_t stream);
  void copy_device_to_host_async(void* dst, const void* src, size_t bytes, hipStream_t stream);
  void copy_device_to_device_async(void* dst, const void* src, size_t bytes, hipStream_t stream);
  void memset(void* ptr, int value, size_t bytes);
  void memset_async(void* ptr, int value, size_t bytes, hipStream_t stream);

  // Pinned host memory (through the global PinnedMemoryPool).
  void* allocate_pinned(size_t bytes);
  void deallocate_pinned(void* ptr);

  MemoryStats get_stats() const;
  void reset_stats();
  // Returns every cached block to the driver (waits for the device first).
  void clear_pool();
  void get_memory_info(size_t* free, size_t* total) const;
  // Pre-allocates blocks of these sizes into the cache of the compute stream.
  void warmup(const std::vector<size_t>& sizes);
  int device() const { return device_; }

  // The pool of `stream`, created on first use (takes the registry lock:
  // callers on a hot path keep the reference).
  StreamPool& pool(hipStream_t stream);
  // A block of at least `bytes` for work on the pool's stream, and its
  // return to the same pool. Only the pool's own lock is taken.
  void* allocate_in(StreamPool& pool, size_t bytes);
  void deallocate_in(StreamPool& pool, void* ptr);

 private:
  struct Stats {
    std::atomic<size_t> allocated{0}, peak{0}, allocations{0}, deallocations{0}, hits{0}, misses{0},
        cached{0};
  };
  static size_t round_size(size_t bytes);
  static void* take_cached(StreamPool& pool, size_t size);  // caller holds pool.mu
  void* driver_alloc(size_t size);  // frees the cache and retries once; holds no pool lock
  void release_cache();             // every pool's cached blocks back to the driver
  void free_block(StreamPool& from, void* ptr, StreamPool& to);
  // The pool a raw-API block came from, forgetting the block (ValueError if unknown).
  StreamPool& take_raw_owner(void* ptr);
  void count_allocation(size_t size, bool hit);
  hipStream_t compute_stream() const;

  Config config_;
  int device_;
  // Lock order: pools_mu_, then one pool's mu. A pool's lock is held only
  // for its own lists, never while taking another lock.
  std::mutex pools_mu_;  // the two maps below
  std::map<hipStream_t, StreamPool*> pools_;            // leaked with the manager (process lifetime)
  std::unordered_map<void*, StreamPool*> raw_owner_;    // blocks handed out through the raw API
  Stats stats_;
};

// The manager of `device` (the current device when -1).
ROCmMemoryManager& get_memory_manager(int device = -1);

// Page-locked host buffers for uploads and downloads. A buffer released
// "after" a stream returns to the pool once the stream passes that point.
//
// The process pool (get_pinned_pool()) keeps a small cache per thread: a
// thread reuses its own blocks, reclaims those released after a stream by
// querying only its own events (reused, never made per release), and takes
// the pool's lock only to grow (hipHostMalloc), to hand surplus blocks back,
// or for a block another thread acquired. Each thread cache has a lock of
// its own, which only its thread takes in steady state (clear() and
// cached_bytes() take them all). Other instances use the shared lists only.
class PinnedMemoryPool {
 public:
  PinnedMemoryPool() = default;
  ~PinnedMemoryPool();
  PinnedMemoryPool(const PinnedMemoryPool&) = delete;
  PinnedMemoryPool& operator=(const PinnedMemoryPool&) = delete;

  void* acquire(size_t bytes);
  void release(void* ptr);
  void release_after(void* ptr, hipStream_t stream);
  void warmup(const std::vector<size_t>& sizes);
  void clear();
  size_t cached_bytes() const;

  struct Block {
    void* ptr;
    size_t size;
  };
  struct Pending {
    Block block;
    hipEvent_t event;
    int device;
  };
  struct ThreadCache;
  // A thread ends: its cache's blocks go to the shared lists (internal).
  void detach(ThreadCache* c);

 private:
  friend PinnedMemoryPool& get_pinned_pool();
  explicit PinnedMemoryPool(bool thread_caches) : thread_caches_(thread_caches) {}
  ThreadCache* thread_cache();
  Block acquire_shared(size_t size);
  Block forget_foreign(void* ptr);  // a block another thread acquired
  void give_back_shared(const std::vector<Block>& blocks);
  void reclaim_locked();

  const bool thread_caches_ = false;
  mutable std::mutex mu_;  // the lists below and the registry
  std::unordered_map<void*, size_t> sizes_;  // every block this pool made
  std::multimap<size_t, void*> free_;
  std::vector<Pending> pending_;
  std::vector<ThreadCache*> caches_;  // the live threads' caches
};

PinnedMemoryPool& get_pinned_pool();

// Counts the times any manager returned cached blocks to the driver
// (clear_pool, out-of-memory recovery, trimming): a captured graph whose
// memory was cached then is void (graph.cc).
uint64_t release_epoch();


}  // namespace pyflame::backend::rocm
