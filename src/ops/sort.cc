// Sort family: argmax/argmin, argsort/sort/topk, cumsum, multinomial.
// Kernels see row-major inputs: the ops make the input contiguous (a no-op
// when it already is) and move the sorted axis last for argsort.
#include <algorithm>
#include <limits>

#include "backend/sampling.h"
#include "ops/op_utils.h"

namespace pyflame {

namespace {

Tensor arg_reduce(bool is_max, const Tensor& x_in, std::optional<int> axis, bool keepdim) {
  const char* fn = is_max ? "argmax" : "argmin";
  check_defined(x_in, fn);
  Tensor x = x_in;
  if (!axis) {  // over the flattened tensor
    if (x.size() == 0) throw ValueError(errmsg(fn, "attempt to take " + std::string(fn) + " of an empty tensor"));
    Tensor r = arg_reduce(is_max, reshape(contiguous(x), {x.size()}), 0, false);
    if (!keepdim) return r;
    return reshape(r, Shape(x.ndim(), 1));
  }
  if (x.ndim() == 0) x = reshape(x, {1});
  const int a = normalize_axis(*axis, x.ndim(), fn);
  if (x.shape()[a] == 0) {
    throw ValueError(errmsg(fn, "cannot take " + std::string(fn) + " over a zero-size axis " +
                                    std::to_string(a) + " of shape " + shape_str(x.shape())));
  }
  Shape kept = x.shape();
  kept[a] = 1;
  Tensor out = Tensor::make(kept, Dtype::Int64, x.device(), std::make_shared<ArgReduce>(is_max, a),
                            {contiguous(x)});
  if (keepdim) return x_in.ndim() == 0 ? reshape(out, {}) : out;
  Shape s = x_in.shape();
  if (x_in.ndim() > 0) s.erase(s.begin() + a);
  return reshape(out, s);
}

}  // namespace

Tensor argmax(const Tensor& x, std::optional<int> axis, bool keepdim) {
  return arg_reduce(true, x, axis, keepdim);
}

Tensor argmin(const Tensor& x, std::optional<int> axis, bool keepdim) {
  return arg_reduce(false, x, axis, keepdim);
}

Tensor argsort(const Tensor& x_in, int axis, bool descending, bool stable) {
  (void)stable;  // always stable
  const char* fn = "argsort";
  check_defined(x_in, fn);
  Tensor x = x_in.ndim() == 0 ? reshape(x_in, {1}) : x_in;
  const int a = normalize_axis(axis, x.ndim(), fn);
  const int last = x.ndim() - 1;
  if (x.shape()[a] > std::numeric_limits<int32_t>::max()) {
    throw ValueError(errmsg(fn, "axis of " + std::to_string(x.shape()[a]) + " entries is too long (2^31 - 1 at most)"));
  }
  Tensor xt = contiguous(a == last ? x : swapaxes(x, a, last));
  Tensor idx = xt.size() == 0 ? zeros(xt.shape(), Dtype::Int64, xt.device())
                              : Tensor::make(xt.shape(), Dtype::Int64, xt.device(),
                                             std::make_shared<ArgSort>(descending), {xt});
  if (a != last) idx = swapaxes(idx, a, last);
  return x_in.ndim() == 0 ? reshape(idx, {}) : idx;
}

ValuesIndices sort(const Tensor& x, int axis, bool descending, bool stable) {
  check_defined(x, "sort");
  normalize_axis(axis, std::max(x.ndim(), 1), "sort");  // errors under this op's name, not argsort's
  Tensor idx = argsort(x, axis, descending, stable);
  if (x.ndim() == 0) return {x, idx};
  const int a = normalize_axis(axis, x.ndim(), "sort");
  return {gather(x, a, idx), idx};
}

ValuesIndices topk(const Tensor& x, int64_t k, int axis, bool largest, bool sorted) {
  (void)sorted;  // always sorted
  const char* fn = "topk";
  check_defined(x, fn);
  const int nd = std::max(x.ndim(), 1);
  const int a = normalize_axis(axis, nd, fn);
  const int64_t n = x.ndim() == 0 ? 1 : x.shape()[a];
  if (k < 0 || k > n) {
    throw ValueError(errmsg(fn, "k (" + std::to_string(k) + ") must be in [0, " + std::to_string(n) +
                                    "], the size of axis " + std::to_string(a)));
  }
  if (x.ndim() == 0) {
    Tensor idx = zeros({}, Dtype::Int64, x.device());
    return {x, idx};
  }
  Tensor idx = argsort(x, a, largest);
  std::vector<int64_t> starts(nd, 0), stops(x.shape()), steps(nd, 1);
  stops[a] = k;
  idx = contiguous(slice(idx, starts, stops, steps));
  return {gather(x, a, idx), idx};
}

Tensor cumsum(const Tensor& x_in, int axis, std::optional<Dtype> dtype) {
  const char* fn = "cumsum";
  check_defined(x_in, fn);
  Dtype t = dtype ? *dtype : (is_floating(x_in.dtype()) ? x_in.dtype() : Dtype::Int64);
  if (t == Dtype::Bool) throw ValueError(errmsg(fn, "dtype bool cannot hold a running sum"));
  Tensor x = x_in.ndim() == 0 ? reshape(x_in, {1}) : x_in;
  const int a = normalize_axis(axis, x.ndim(), fn);
  x = contiguous(astype(x, t));
  Tensor out = x.size() == 0 ? x
                             : Tensor::make(x.shape(), t, x.device(), std::make_shared<Cumsum>(a, false), {x});
  return x_in.ndim() == 0 ? reshape(out, {}) : out;
}

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement) {
  const char* fn = "multinomial";
  check_defined(probs, fn);
  if (probs.ndim() != 1 && probs.ndim() != 2) {
    throw ValueError(errmsg(fn, "probs must be 1-d or 2-d, got shape " + shape_str(probs.shape())));
  }
  if (!is_floating(probs.dtype())) {
    throw ValueError(errmsg(fn, std::string("probs must be a floating-point tensor, got ") +
                                    dtype_name(probs.dtype())));
  }
  const int64_t V = probs.shape(-1);
  if (V == 0) throw ValueError(errmsg(fn, "probs has no categories (last axis of size 0)"));
  if (num_samples <= 0) {
    throw ValueError(errmsg(fn, "num_samples must be positive, got " + std::to_string(num_samples)));
  }
  if (!replacement && num_samples > V) {
    throw ValueError(errmsg(fn, "cannot draw " + std::to_string(num_samples) + " samples from " +
                                    std::to_string(V) + " categories without replacement"));
  }
  if (sampling::use_race(replacement, num_samples) && V > std::numeric_limits<int32_t>::max()) {
    throw ValueError(errmsg(fn, "cannot draw " + std::to_string(num_samples) + " samples without replacement from " +
                                    std::to_string(V) + " categories (2^31 - 1 at most; the race is a sort)"));
  }
  Tensor p = contiguous(probs.ndim() == 1 ? reshape(probs, {1, V}) : probs);
  const int64_t R = p.shape()[0];
  // The key a rand() call would take here, so pf.manual_seed decides it.
  Tensor r = rand({}, Dtype::Float32, probs.device());
  const uint64_t key = static_cast<Random*>(r.primitive())->key;
  Tensor out = R == 0 ? zeros({0, num_samples}, Dtype::Int64, probs.device())
                      : Tensor::make({R, num_samples}, Dtype::Int64, probs.device(),
                                     std::make_shared<Multinomial>(num_samples, replacement, key), {p});
  return probs.ndim() == 1 ? reshape(out, {num_samples}) : out;
}

}  // namespace pyflame
