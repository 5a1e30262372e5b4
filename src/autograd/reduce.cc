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
    case ReduceOp::Prod: {
      // out / x, except at zeros: a lone zero gets the product of the
      // others, and every element of a group with two zeros gets 0.
      Tensor zero = eq(x, like_scalar(0, x));
      Tensor others = prod(where(zero, like_scalar(1, x), x), axes, /*keepdim=*/true);
      Tensor zeros_in_group = sum(astype(zero, Dtype::Int32), axes, /*keepdim=*/true);
      Tensor at_zero = where(eq(zeros_in_group, scalar(1, Dtype::Int64, x.device())), others,
                             like_scalar(0, x));
      Tensor d = where(zero, broadcast_to(at_zero, x.shape()), div(broadcast_to(out, x.shape()), x));
      return {mul(cb, d)};
    }
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

namespace {
// A transposed view (x @ W.T): its gradient is computed transposed, so the
// Transpose vjp hands the parameter a row-major gradient.
bool column_major(const Tensor& t) {
  const int n = t.ndim();
  return n >= 2 && t.shape()[n - 1] > 1 && t.shape()[n - 2] > 1 && t.strides()[n - 2] == 1;
}
Tensor mT(const Tensor& t) { return swapaxes(t, -1, -2); }
}  // namespace

// dA = c B^T and dB = A^T c, each produced in its operand's memory order.
std::vector<Tensor> Matmul::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                                const std::vector<int>& argnums) {
  const Tensor &a = in[0], &b = in[1];
  return for_each_arg(argnums, [&](int i) {
    if (i == 0) return column_major(a) ? mT(matmul(b, mT(c))) : matmul(c, mT(b));
    return column_major(b) ? mT(matmul(mT(c), a)) : matmul(mT(a), c);
  });
}

// The unfused ops' gradients, from the output: relu's mask is out > 0,
// true exactly where the pre-activation was > 0 (NaN and -0 included), then
// the bias's sum over the rows and the product's two gradients.
std::vector<Tensor> FusedGemm::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor& out,
                                   const std::vector<int>& argnums) {
  const Tensor g = relu ? where(gt(out, like_scalar(0, out)), c, like_scalar(0, out)) : c;
  Matmul mm;
  return for_each_arg(argnums, [&](int i) {
    if (i == 2) return sum_to_shape(g, in[2].shape());
    return mm.vjp({in[0], in[1]}, g, out, {i})[0];
  });
}

}  // namespace pyflame
