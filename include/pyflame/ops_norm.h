// Ops of the 'norm' family (see ops.h for the contract).
//
// Statistics accumulate in float (double on the CPU); 16-bit inputs compute in
// float and round once on output. Weights and biases of any float dtype are
// applied in float; the result has the input's dtype.
#pragma once
#include <optional>

#include "pyflame/ops.h"

namespace pyflame {

// Normalizes over the trailing dims `normalized_shape` (which must equal the
// last dims of x): (x - mean) / sqrt(var + eps) * weight + bias, with the
// biased variance. weight and bias have shape normalized_shape.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape,
                  const std::optional<Tensor>& weight = {}, const std::optional<Tensor>& bias = {},
                  double eps = 1e-5);

// x of shape (N, C, *): channels split into num_groups groups (C divisible by
// num_groups); each (sample, group) is normalized over its channels and the
// spatial dims. weight and bias have shape (C,).
Tensor group_norm(const Tensor& x, int64_t num_groups, const std::optional<Tensor>& weight = {},
                  const std::optional<Tensor>& bias = {}, double eps = 1e-5);

// Over the last dim: x / sqrt(mean(x^2) + eps) * weight; weight of shape (D,).
Tensor rms_norm(const Tensor& x, const std::optional<Tensor>& weight = {}, double eps = 1e-6);

}  // namespace pyflame
