// Stream ordering for DLPack exchange with other GPU frameworks (the
// platform side of python/src/dlpack.cc).
#include <cstdint>

#include "backend/rocm/context.h"
#include "pyflame/backend/rocm.h"

namespace pyflame::backend::rocm {

int dlpack_device_type() {
#if defined(__HIP_PLATFORM_AMD__)
  return 10;  // kDLROCM
#else
  return 2;  // kDLCUDA
#endif
}

uintptr_t stream_handle(int device) { return reinterpret_cast<uintptr_t>(current_stream(device)); }

void make_stream_wait(int device, uintptr_t consumer) {
  DeviceGuard g(device);
  // The protocol's 1 and 2 are cudaStreamLegacy and cudaStreamPerThread, and
  // 0 is HIP's null stream: each is a valid handle as it is.
  order_streams(current_stream(device), reinterpret_cast<hipStream_t>(consumer));
}

void synchronize_streams(int device) {
  DeviceGuard g(device);
  hipStream_t cur = current_stream(device);
  PF_HIP_CHECK(hipStreamSynchronize(cur));
  hipStream_t shared = shared_context(device).stream;
  if (shared != cur) PF_HIP_CHECK(hipStreamSynchronize(shared));
}

}  // namespace pyflame::backend::rocm
