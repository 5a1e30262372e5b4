// Buffers for graph nodes on any device.
#pragma once
#include <memory>

#include "pyflame/tensor.h"

namespace pyflame {

// CPU: 64-byte aligned host memory. GPU: the device's caching allocator.
std::shared_ptr<Buffer> allocate(Device device, size_t bytes);

// Host buffers currently allocated and the peak since the last reset, in
// bytes (what tensors hold on the CPU device).
struct HostMemoryStats {
  size_t allocated = 0, peak = 0;
};
HostMemoryStats host_memory_stats();
void reset_host_peak_memory();
// Large host blocks freed are kept (a few) for the next allocation of the
// same size: warm pages instead of fresh ones. Returns them to the system;
// the bytes released.
size_t release_host_cache();

}  // namespace pyflame
