#include "backend/rocm/raw_ops.h"

#include <algorithm>

#include "backend/rocm/context.h"
#include "pyflame/backend/rocm.h"
#include "pyflame/errors.h"
#include "pyflame/ops.h"

namespace pyflame::backend::rocm::raw {

Call::Call(hipStream_t caller, const char* fn)
    : caller_(caller), fn_(fn), device_(std::max(0, get_current_device())) {
  if (!is_available()) throw RuntimeError(errmsg(fn, "ROCm is not available: no GPU was found"));
  DeviceGuard g(device_);
  // With multi_stream on, the evaluation runs on a pooled stream that cannot
  // be ordered from here: wait for the caller's work instead.
  if (multi_stream()) PF_HIP_CHECK(hipStreamSynchronize(caller_));
  else if (caller_ != shared_context(device_).stream) order_streams(caller_, shared_context(device_).stream);
}

Tensor Call::input(const void* p, const Shape& shape, Dtype dtype) const {
  const size_t bytes = static_cast<size_t>(shape_size(shape)) * itemsize(dtype);
  if (!p && bytes) throw ValueError(errmsg(fn_, "a device pointer is null"));
  auto node = std::make_shared<Node>();
  node->shape = shape;
  node->strides = row_major_strides(shape);
  node->dtype = dtype;
  node->device = Device::rocm(device_);
  node->buffer = std::make_shared<Buffer>(const_cast<void*>(p), bytes, node->device, nullptr);
  return Tensor(node);
}

void Call::output(const Tensor& result, void* dst) const {
  if (!dst && result.nbytes()) throw ValueError(errmsg(fn_, "the output pointer is null"));
  Tensor r = contiguous(result);
  r.eval();
  DeviceGuard g(device_);
  DeviceContext& ctx = shared_context(device_);
  // Evaluation results are complete on the shared stream (in stream order)
  // or, with multi_stream, when eval returns.
  if (r.nbytes()) PF_HIP_CHECK(hipMemcpyAsync(dst, r.raw_data(), r.nbytes(), hipMemcpyDeviceToDevice, ctx.stream));
  finish();
}

void Call::finish() const {
  DeviceGuard g(device_);
  const hipStream_t stream = shared_context(device_).stream;
  if (caller_ != stream) order_streams(stream, caller_);
}

Shape vector_shape(int64_t numel, const char* fn) {
  if (numel < 0) throw ValueError(errmsg(fn, "numel must be >= 0, got " + std::to_string(numel)));
  return {numel};
}

}  // namespace pyflame::backend::rocm::raw
