// Autocast (automatic mixed precision). While a thread has an autocast
// dtype (float16 or bfloat16), matmul, the convolutions and attention cast
// their floating-point inputs to it, as PyTorch's autocast does for its
// lower-precision op list: the result stays in that dtype and the gradient
// flows back to float32 tensors through the casts. Other ops are unchanged.
// The backward pass runs with autocast off.
#pragma once
#include <optional>

#include "pyflame/tensor.h"

namespace pyflame {

std::optional<Dtype> autocast_dtype();  // per thread; none by default
void set_autocast_dtype(std::optional<Dtype> dtype);

// Scoped autocast state: AutocastGuard off(std::nullopt); ...
class AutocastGuard {
 public:
  explicit AutocastGuard(std::optional<Dtype> dtype) : prev_(autocast_dtype()) {
    set_autocast_dtype(dtype);
  }
  ~AutocastGuard() { set_autocast_dtype(prev_); }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  std::optional<Dtype> prev_;
};

// x cast to `dtype` if it is a floating-point tensor of another dtype;
// otherwise x unchanged (undefined and integer tensors included).
Tensor autocast_cast(const Tensor& x, Dtype dtype);
std::optional<Tensor> autocast_cast(const std::optional<Tensor>& x, Dtype dtype);

}  // namespace pyflame
