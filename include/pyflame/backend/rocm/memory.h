// The spec's memory management: ROCmMemoryManager (the caching allocator of
// one device: allocation, transfers, memset, pinned host memory, statistics),
// get_memory_manager(), PinnedMemoryPool, get_pinned_pool(), MemoryStats and
// warmup_memory_pool(). These are the backend's own classes, the ones every
// tensor on the GPU allocates through. Thread-safe (per-stream pool locks, per-thread
// pinned caches: src/backend/rocm/memory.h).
#pragma once
#include "pyflame/backend/rocm/gpu_build.h"
#include "backend/rocm/memory.h"  // NOLINT(build/include_order)
#include "pyflame/backend/rocm.h"
