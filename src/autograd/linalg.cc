// Vector-Jacobian products of the 'linalg' family, written with ops (so
// they run, and differentiate again, wherever the forward ops do). The
// formulas are the standard matrix-calculus ones (as in PyTorch's
// FunctionsManual): with Y = inv(A), the cotangent of A is -Y^T C Y^T, etc.
#include "autograd/vjp_utils.h"

namespace pyflame {

namespace {

Tensor mT(const Tensor& x) { return swapaxes(x, -1, -2); }

// (...) -> (..., 1, 1): a per-matrix scalar against matrices.
Tensor per_matrix(const Tensor& s) { return unsqueeze(unsqueeze(s, s.ndim()), s.ndim() + 1); }

// tril(X) with the diagonal halved: Phi of the Cholesky derivative.
Tensor phi(const Tensor& x) {
  const int64_t n = x.shape(-1);
  Tensor r = unsqueeze(arange(0, double(n), 1, Dtype::Int64, x.device()), 1);
  Tensor c = unsqueeze(arange(0, double(n), 1, Dtype::Int64, x.device()), 0);
  Tensor lower = where(gt(r, c), x, like_scalar(0, x));
  return add(lower, where(eq(r, c), mul(x, like_scalar(0.5, x)), like_scalar(0, x)));
}

Tensor cholesky_grad(const Tensor& out, const Tensor& c, bool upper) {
  Tensor L = upper ? mT(out) : out;
  Tensor gL = upper ? mT(c) : c;
  Tensor Li = linalg::inv(L);
  Tensor g = matmul(matmul(mT(Li), phi(matmul(mT(L), gL))), Li);
  return mul(add(g, mT(g)), like_scalar(0.5, g));
}

// Symmetric eigendecomposition A = V diag(w) V^T: the values' cotangent
// gives V diag(gw) V^T, the vectors' V (F o V^T gV) V^T with
// F_ij = 1 / (w_j - w_i) off the diagonal and 0 on it, symmetrized.
Tensor eigh_grad(const Tensor& a, const Tensor& c, int output) {
  auto [w, v] = linalg::eigh(a);
  if (output == 0) return matmul(mul(v, unsqueeze(c, c.ndim() - 1)), mT(v));
  Tensor e = sub(unsqueeze(w, w.ndim() - 1), unsqueeze(w, w.ndim()));  // e_ij = w_j - w_i
  const int64_t n = a.shape(-1);
  Tensor r = unsqueeze(arange(0, double(n), 1, Dtype::Int64, a.device()), 1);
  Tensor k = unsqueeze(arange(0, double(n), 1, Dtype::Int64, a.device()), 0);
  Tensor diag = eq(r, k);
  Tensor f = where(diag, like_scalar(0, e), div(like_scalar(1, e), where(diag, like_scalar(1, e), e)));
  Tensor g = matmul(matmul(v, mul(f, matmul(mT(v), c))), mT(v));
  return mul(add(g, mT(g)), like_scalar(0.5, g));  // symmetric, as the input (PyTorch's convention)
}

}  // namespace

std::vector<Tensor> Lapack::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor& out,
                                const std::vector<int>& argnums) {
  const Tensor& a = in[0];
  switch (op) {
    case LapackOp::Inv: return {neg(matmul(matmul(mT(out), c), mT(out)))};
    case LapackOp::Det: return {mul(per_matrix(mul(c, out)), mT(linalg::inv(a)))};
    case LapackOp::Slogdet:
      if (output == 0) return {zeros_like(a)};  // the sign is piecewise constant
      return {mul(per_matrix(c), mT(linalg::inv(a)))};
    case LapackOp::Solve: {
      Tensor gb = linalg::solve(mT(a), c);  // A^T gB = C
      return for_each_arg(argnums, [&](int i) { return i == 1 ? gb : neg(matmul(gb, mT(out))); });
    }
    case LapackOp::Cholesky: return {cholesky_grad(out, c, flag)};
    case LapackOp::Eigh: return {eigh_grad(a, c, output)};
    default:
      throw ValueError(errmsg("backward", std::string(name()) + " is not differentiable yet"));
  }
}

}  // namespace pyflame
