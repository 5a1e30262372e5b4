// Vector-Jacobian products of the 'math' family. Binary inputs are already
// broadcast views, so cotangents have the output's shape (the Broadcast
// view's vjp sums them back down).
#include <cmath>

#include "autograd/vjp_utils.h"

namespace pyflame {

namespace {

// d/dx of op at x (y = op(x)), times the cotangent c.
Tensor math_unary_grad(MathUnaryOp op, const Tensor& x, const Tensor& y, const Tensor& c) {
  auto k = [&](double v) { return like_scalar(v, x); };
  auto x2 = [&] { return mul(x, x); };
  using U = MathUnaryOp;
  switch (op) {
    case U::Acos: return neg(div(c, sqrt(sub(k(1), x2()))));
    case U::Asin: return div(c, sqrt(sub(k(1), x2())));
    case U::Acosh: return div(c, sqrt(sub(x2(), k(1))));
    case U::Asinh: return div(c, sqrt(add(x2(), k(1))));
    case U::Atan: return div(c, add(k(1), x2()));
    case U::Atanh: return div(c, sub(k(1), x2()));
    case U::Cosh: return mul(c, sinh(x));
    case U::Sinh: return mul(c, cosh(x));
    case U::Tan: return mul(c, add(k(1), mul(y, y)));
    case U::Expm1: return mul(c, add(y, k(1)));
    case U::Log1p: return div(c, add(x, k(1)));
    case U::Log2: return div(c, mul(x, k(M_LN2)));
    case U::Log10: return div(c, mul(x, k(M_LN10)));
    case U::Floor: case U::Ceil: case U::Round: case U::Trunc: case U::Sign:
      return zeros_like(c);  // piecewise constant (PyTorch's convention)
    default:
      throw ValueError(errmsg("backward", std::string(math_unary_name(op)) + " is not differentiable"));
  }
}

Tensor math_binary_grad(MathBinaryOp op, const Tensor& a, const Tensor& b, const Tensor& y,
                        const Tensor& c, int arg) {
  using B = MathBinaryOp;
  switch (op) {
    case B::Atan2: {  // d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2)
      Tensor r = add(mul(a, a), mul(b, b));
      return arg == 0 ? div(mul(c, b), r) : neg(div(mul(c, a), r));
    }
    case B::Hypot: return div(mul(c, arg == 0 ? a : b), y);
    case B::Copysign:  // +-1 where the sign flips; nothing reaches b
      return arg == 0 ? where(eq(signbit(a), signbit(y)), c, neg(c)) : zeros_like(c);
    case B::Logaddexp: return mul(c, exp(sub(arg == 0 ? a : b, y)));
    case B::FloorDivide: return zeros_like(c);
    case B::Remainder:  // a - b * floor(a / b)
      return arg == 0 ? c : neg(mul(c, floor_divide(a, b)));
    default:
      throw ValueError(errmsg("backward", std::string(math_binary_name(op)) + " is not differentiable"));
  }
}

}  // namespace

std::vector<Tensor> MathUnary::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor& out,
                                   const std::vector<int>&) {
  return {math_unary_grad(op, in[0], out, c)};
}

std::vector<Tensor> MathBinary::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor& out,
                                    const std::vector<int>& argnums) {
  return for_each_arg(argnums, [&](int i) { return math_binary_grad(op, in[0], in[1], out, c, i); });
}

}  // namespace pyflame
