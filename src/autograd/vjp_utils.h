// Helpers for writing vector-Jacobian products with ops.
#pragma once
#include <vector>

#include "ir/primitives.h"
#include "pyflame/ops.h"

namespace pyflame {

// A 0-d constant matching t's dtype and device (broadcasts in binary ops).
inline Tensor like_scalar(double v, const Tensor& t) { return scalar(v, t.dtype(), t.device()); }

inline Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype(), t.device()); }

// Sums a cotangent of shape `from` down to `to` (NumPy broadcasting rules).
Tensor sum_to_shape(const Tensor& g, const Shape& to);

// Runs f(i) for each requested input and collects the cotangents in order.
template <typename F>
std::vector<Tensor> for_each_arg(const std::vector<int>& argnums, F&& f) {
  std::vector<Tensor> out;
  out.reserve(argnums.size());
  for (int i : argnums) out.push_back(f(i));
  return out;
}

}  // namespace pyflame
