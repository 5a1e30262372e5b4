// Per-device execution context: the compute stream every kernel, copy and
// BLAS call of an evaluation runs on, and the BLAS handle bound to it.
// Contexts live for the whole process (never destroyed: tearing down streams
// after the runtime has shut down at exit would fail).
#pragma once
#include <mutex>

#include "backend/rocm/gpu/libs.h"
#include "backend/rocm/gpu/runtime.h"
#include "pyflame/backend/rocm.h"

namespace pyflame::backend::rocm {

struct DeviceContext {
  int device = 0;
  hipStream_t stream = nullptr;           // non-blocking: never the legacy null stream
  gpu::blas_handle_t blas = nullptr;      // bound to `stream`
  std::mutex blas_mu;                     // a BLAS handle is used by one thread at a time
  void* blas_workspace = nullptr;
  size_t blas_workspace_bytes = 0;
  int multiprocessors = 0;
  int wave_size = 32;
  bool bundle = false;  // a multi_stream bundle rather than the device's shared context
};

// The context this thread's work on `device` uses: inside an evaluation with
// multi_stream on, the evaluation's own bundle (taken on first use);
// otherwise the device's shared context, created on first use.
DeviceContext& context(int device);
DeviceContext& shared_context(int device);
// The stream context(device) would use, without taking a bundle.
hipStream_t current_stream(int device);
// Whether this thread is inside an evaluation that takes multi_stream bundles.
bool using_bundles();
// Orders everything later queued on `after` behind what `before` holds now.
void order_streams(hipStream_t before, hipStream_t after);

// Makes `device` current for this thread while in scope.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

// Grid size for a grid-stride loop over n elements with `threads` per block.
unsigned grid_for(const DeviceContext& ctx, int64_t n, int threads, int per_thread = 1);

// Poisoning of fresh device buffers (PYFLAME_GPU_POISON=1): catches kernels
// that leave outputs unwritten.
bool poison_allocations();

}  // namespace pyflame::backend::rocm
