// Vector-Jacobian products of reductions and softmax. A Reduce output keeps
// its reduced axes as size 1, so its cotangent broadcasts straight back.
#include "autograd/vjp_utils.h"

namespace pyflame {

std::vector<Tensor> Reduce::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor& out,
                                const std::vector<int>&) {
  const Tensor& x = in[0];
  Tensor cb = broadcast_to(c, x.shape());
  switch (op) {
    case ReduceOp::Sum: return {cb};
    case ReduceOp::Mean: {
      double n = static_cast<double>(x.size()) / std::max<int64_t>(out.size(), 1);
      return {div(cb, like_scalar(n, c))};
    }
    case ReduceOp::Max:
    case ReduceOp::Min: {  // ties share the cotangent evenly (as PyTorch's amax)
      Tensor hit = astype(eq(x, broadcast_to(out, x.shape())), c.dtype());
      Tensor count = sum(hit, axes, /*keepdim=*/true);
      return {mul(cb, div(hit, broadcast_to(count, x.shape())))};
    }
    case ReduceOp::Prod:  // out / x, exact for inputs without zeros
      return {mul(cb, div(broadcast_to(out, x.shape()), x))};
  }
  throw RuntimeError("[backward] unknown reduction");
}

std::vector<Tensor> Softmax::vjp(const std::vector<Tensor>&, const Tensor& c, const Tensor& y,
                                 const std::vector<int>&) {
  if (log) {  // c - softmax(x) * sum(c)
    return {sub(c, mul(exp(y), sum(c, {-1}, true)))};
  }
  Tensor cy = mul(c, y);  // y * (c - sum(c * y))
  return {sub(cy, mul(y, sum(cy, {-1}, true)))};
}

std::vector<Tensor> Matmul::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                                const std::vector<int>& argnums) {
  return for_each_arg(argnums, [&](int i) {
    return i == 0 ? matmul(c, swapaxes(in[1], -1, -2)) : matmul(swapaxes(in[0], -1, -2), c);
  });
}

}  // namespace pyflame
