// Buffers for graph nodes on any device.
#pragma once
#include <memory>

#include "pyflame/tensor.h"

namespace pyflame {

// CPU: 64-byte aligned host memory. GPU: the device's caching allocator.
std::shared_ptr<Buffer> allocate(Device device, size_t bytes);

}  // namespace pyflame
