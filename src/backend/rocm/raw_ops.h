// Pointer-level entry points of the C++ API (the launch_* kernels, ROCmDNN's
// activation, softmax and reduction) run the backend's own ops on device
// memory the caller owns: inputs are wrapped as evaluated tensors (no copy,
// no ownership), the op graph is evaluated by the usual eval loop, and the
// result is copied into the caller's output. Ordering with the caller's
// stream: the work starts after what that stream holds at the call, and the
// stream waits for the output, as if the work had been queued on it.
#pragma once
#include <cstdint>

#include "backend/rocm/gpu/runtime.h"
#include "pyflame/backend/rocm/op_type.h"
#include "pyflame/tensor.h"

namespace pyflame::backend::rocm::raw {

class Call {
 public:
  // On the current device (device 0 before any is selected).
  Call(hipStream_t caller, const char* fn);
  // `p` holds a dense row-major array; null only when the shape is empty.
  Tensor input(const void* p, const Shape& shape, Dtype dtype) const;
  // Evaluates `result` and copies it row-major into `dst`, then orders the
  // caller's stream after the copy.
  void output(const Tensor& result, void* dst) const;
  // For work queued directly on the device's compute stream: orders the
  // caller's stream after it.
  void finish() const;
  int device() const { return device_; }

 private:
  hipStream_t caller_;
  const char* fn_;
  int device_;
};

// Checks a launch's element count; ValueError when negative.
Shape vector_shape(int64_t numel, const char* fn);

}  // namespace pyflame::backend::rocm::raw

namespace pyflame::backend::rocm {
// The op of a unary OpType (ValueError naming `fn` for any other).
Tensor unary_op(ir::OpType op, const Tensor& x, const char* fn);
}  // namespace pyflame::backend::rocm
