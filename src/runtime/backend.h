// The seam between the core (tensors, the eval loop, allocation) and the
// device backends: the core includes this header, never a backend's. The
// GPU backend (backend/rocm) implements it, or backend/no_gpu in a build
// without one; the CPU backend implements the host copy.
#pragma once
#include <cstddef>
#include <memory>

#include "pyflame/tensor.h"

namespace pyflame::runtime {

// One evaluation's GPU state on this thread (docs/design/eval_context.md).
// The eval loop holds one for the length of run(): while it lives, the
// kernels' context(device) resolves each device once (with multi_stream on,
// a bundle of this evaluation's own) and then reads it without a lock;
// range checks made by kernels wait for finish(). An evaluation nested in
// another (a custom backward evaluating inside backward()) shares the
// outer one's context.
class GpuEvaluation {
 public:
  GpuEvaluation();
  ~GpuEvaluation();  // after an error: drains the streams, drops the checks
  // Waits for what this evaluation queued where it has to (multi_stream
  // bundles, devices with pending checks) and raises the first failed
  // check's error.
  void finish();
  // How many range checks the kernels of this evaluation have made so far
  // (the eval loop notes which nodes rest on one).
  size_t checks_made() const;
  GpuEvaluation(const GpuEvaluation&) = delete;
  GpuEvaluation& operator=(const GpuEvaluation&) = delete;

 private:
  bool owner_ = false;
  bool finished_ = false;
};

// Device memory for a node on GPU `device`, on the current evaluation's
// stream for that device.
std::shared_ptr<Buffer> allocate_gpu(int device, size_t bytes);

// Copies a CPU tensor (any layout, evaluated) row-major into `dst`.
void copy_host_contiguous(const Tensor& src, void* dst);

}  // namespace pyflame::runtime
