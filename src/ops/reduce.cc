// Reductions and softmax.
#include <algorithm>
#include <cmath>

#include "ops/op_utils.h"

namespace pyflame {

namespace {

std::vector<int> normalize_axes(const Axes& axes, int ndim, const char* fn) {
  std::vector<int> out;
  if (axes.empty()) {
    for (int i = 0; i < ndim; ++i) out.push_back(i);
    return out;
  }
  for (int a : axes) out.push_back(normalize_axis(a, ndim, fn));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) {
    throw ValueError(errmsg(fn, "repeated axis"));
  }
  return out;
}

Dtype reduce_dtype(ReduceOp op, Dtype in) {
  if (is_floating(in)) return in;
  if (op == ReduceOp::Sum || op == ReduceOp::Prod) return Dtype::Int64;
  if (op == ReduceOp::Mean) return Dtype::Float32;
  return in;
}

Tensor reduce(ReduceOp op, const Tensor& x, const Axes& axes, bool keepdim) {
  auto prim = std::make_shared<Reduce>(op, std::vector<int>{});
  const char* fn = prim->name();
  check_defined(x, fn);
  const std::vector<int> red = normalize_axes(axes, x.ndim(), fn);
  prim->axes = red;
  Shape kept = x.shape();
  for (int a : red) kept[a] = 1;
  bool empty_reduction = x.size() == 0 && shape_size(kept) > 0;
  // As NumPy: any empty reduced axis, even where the result is empty too
  // (max over axis 0 of a (0, 0) tensor).
  const bool empty_axis = std::any_of(red.begin(), red.end(), [&](int a) { return x.shape()[a] == 0; });
  if (empty_axis && (op == ReduceOp::Max || op == ReduceOp::Min)) {
    throw ValueError(errmsg(fn, "zero-size array to reduction operation " + std::string(fn) +
                                    " which has no identity (a reduced axis is empty)"));
  }
  Dtype dt = reduce_dtype(op, x.dtype());
  Tensor out;
  if (empty_reduction) {  // sum 0, prod 1, mean NaN: no kernel sees an empty input
    double v = op == ReduceOp::Prod ? 1.0 : op == ReduceOp::Mean ? NAN : 0.0;
    // x stays an input (Full ignores it) so autograd gives it a zero gradient.
    out = Tensor::make(kept, dt, x.device(), std::make_shared<Full>(v), {x});
  } else {
    out = Tensor::make(kept, dt, x.device(), std::move(prim), {x});
  }
  if (keepdim) return out;
  Shape s;
  for (int i = 0; i < x.ndim(); ++i) {
    if (!std::binary_search(red.begin(), red.end(), i)) s.push_back(x.shape()[i]);
  }
  return reshape(out, s);
}

Tensor softmax_impl(const Tensor& x, int axis, bool log) {
  const char* fn = log ? "log_softmax" : "softmax";
  check_defined(x, fn);
  if (x.ndim() == 0) throw ValueError(errmsg(fn, "needs at least a 1-d tensor"));
  int a = normalize_axis(axis, x.ndim(), fn);
  Tensor in = is_floating(x.dtype()) ? x : astype(x, Dtype::Float32);
  if (a != x.ndim() - 1) in = swapaxes(in, a, -1);
  in = contiguous(in);
  Tensor out = Tensor::make(in.shape(), in.dtype(), in.device(), std::make_shared<Softmax>(log), {in});
  return a != x.ndim() - 1 ? swapaxes(out, a, -1) : out;
}

}  // namespace

Tensor sum(const Tensor& x, Axes axes, bool keepdim) { return reduce(ReduceOp::Sum, x, axes, keepdim); }
Tensor mean(const Tensor& x, Axes axes, bool keepdim) { return reduce(ReduceOp::Mean, x, axes, keepdim); }
Tensor max(const Tensor& x, Axes axes, bool keepdim) { return reduce(ReduceOp::Max, x, axes, keepdim); }
Tensor min(const Tensor& x, Axes axes, bool keepdim) { return reduce(ReduceOp::Min, x, axes, keepdim); }
Tensor prod(const Tensor& x, Axes axes, bool keepdim) { return reduce(ReduceOp::Prod, x, axes, keepdim); }

Tensor softmax(const Tensor& x, int axis) { return softmax_impl(x, axis, false); }
Tensor log_softmax(const Tensor& x, int axis) { return softmax_impl(x, axis, true); }

}  // namespace pyflame
