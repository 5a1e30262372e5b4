#include "runtime/allocator.h"

#include <cstdlib>
#include <new>

#include "pyflame/backend/rocm.h"
#include "pyflame/errors.h"

namespace pyflame {

namespace {
void free_host(void* p, void*) { std::free(p); }
}  // namespace

std::shared_ptr<Buffer> allocate(Device device, size_t bytes) {
  if (device.is_gpu()) return backend::rocm::allocate_buffer(device.index, bytes);
  size_t rounded = (bytes + 63) / 64 * 64;
  void* p = rounded ? std::aligned_alloc(64, rounded) : nullptr;
  if (rounded && !p) {
    throw OutOfMemoryError(errmsg("allocate", "out of host memory allocating " +
                                                  std::to_string(bytes) + " bytes"));
  }
  return std::make_shared<Buffer>(p, bytes, device, &free_host);
}

}  // namespace pyflame
