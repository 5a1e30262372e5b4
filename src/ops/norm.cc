// Normalization ops: layer_norm, group_norm, rms_norm. Each makes its input
// row-major, turns weight/bias into contiguous float32 vectors and records one
// primitive; the kernels normalize contiguous rows.
#include <cmath>

#include "ops/op_utils.h"

namespace pyflame {

namespace {

void check_input(const Tensor& x, const char* fn) {
  check_defined(x, fn);
  if (!is_floating(x.dtype())) {
    throw ValueError(errmsg(fn, std::string("expected a floating-point input, got ") +
                                    dtype_name(x.dtype())));
  }
}

void check_eps(double eps, const char* fn) {
  if (!(eps >= 0.0) || !std::isfinite(eps)) {
    throw ValueError(errmsg(fn, "eps must be a finite non-negative number, got " + std::to_string(eps)));
  }
}

// A weight or bias of exactly `want` shape, as a contiguous float32 vector.
Tensor affine_param(const Tensor& p, const Tensor& x, const Shape& want, const char* fn,
                    const char* what) {
  check_defined(p, fn);
  check_same_device(x, p, fn);
  if (!is_floating(p.dtype())) {
    throw ValueError(errmsg(fn, std::string(what) + " must be a floating-point tensor, got " +
                                    dtype_name(p.dtype())));
  }
  if (p.shape() != want) {
    throw ValueError(errmsg(fn, std::string(what) + " must have shape " + shape_str(want) + ", got " +
                                    shape_str(p.shape())));
  }
  return reshape(contiguous(astype(p, Dtype::Float32)), {shape_size(want)});
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps) {
  const char* fn = "layer_norm";
  check_input(x, fn);
  check_eps(eps, fn);
  const int k = static_cast<int>(normalized_shape.size());
  if (k == 0) throw ValueError(errmsg(fn, "normalized_shape must have at least one dimension"));
  check_shape(normalized_shape, fn);
  bool match = k <= x.ndim();
  for (int i = 0; match && i < k; ++i) match = x.shape()[x.ndim() - k + i] == normalized_shape[i];
  if (!match) {
    throw ValueError(errmsg(fn, "normalized_shape " + shape_str(normalized_shape) +
                                    " does not match the trailing dims of input of shape " +
                                    shape_str(x.shape())));
  }
  std::vector<Tensor> in{contiguous(x)};
  if (weight) in.push_back(affine_param(*weight, x, normalized_shape, fn, "weight"));
  if (bias) in.push_back(affine_param(*bias, x, normalized_shape, fn, "bias"));
  auto prim = std::make_shared<LayerNorm>(shape_size(normalized_shape), eps, weight.has_value(),
                                          bias.has_value());
  return Tensor::make(x.shape(), x.dtype(), x.device(), std::move(prim), std::move(in));
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps) {
  const char* fn = "group_norm";
  check_input(x, fn);
  check_eps(eps, fn);
  if (x.ndim() < 2) {
    throw ValueError(errmsg(fn, "expected an input of shape (N, C, *), got " + shape_str(x.shape())));
  }
  if (num_groups <= 0) {
    throw ValueError(errmsg(fn, "num_groups must be positive, got " + std::to_string(num_groups)));
  }
  const int64_t C = x.shape()[1];
  if (C % num_groups != 0) {
    throw ValueError(errmsg(fn, "the number of channels (" + std::to_string(C) +
                                    ") must be divisible by num_groups (" +
                                    std::to_string(num_groups) + ")"));
  }
  std::vector<Tensor> in{contiguous(x)};
  if (weight) in.push_back(affine_param(*weight, x, {C}, fn, "weight"));
  if (bias) in.push_back(affine_param(*bias, x, {C}, fn, "bias"));
  auto prim = std::make_shared<GroupNorm>(num_groups, eps, weight.has_value(), bias.has_value());
  return Tensor::make(x.shape(), x.dtype(), x.device(), std::move(prim), std::move(in));
}

Tensor rms_norm(const Tensor& x, const std::optional<Tensor>& weight, double eps) {
  const char* fn = "rms_norm";
  check_input(x, fn);
  check_eps(eps, fn);
  if (x.ndim() == 0) throw ValueError(errmsg(fn, "expected at least a 1-d input, got a 0-d tensor"));
  std::vector<Tensor> in{contiguous(x)};
  if (weight) in.push_back(affine_param(*weight, x, {x.shape().back()}, fn, "weight"));
  auto prim = std::make_shared<RMSNorm>(eps, weight.has_value());
  return Tensor::make(x.shape(), x.dtype(), x.device(), std::move(prim), std::move(in));
}

}  // namespace pyflame
