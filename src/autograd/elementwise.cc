// Vector-Jacobian products of the elementwise primitives. Binary inputs are
// already broadcast views of the user's tensors, so the cotangents here have
// the output's shape; the Broadcast view's vjp sums them back down.
#include <cmath>

#include "autograd/vjp_utils.h"

namespace pyflame {

namespace {
// d/dx of unary op at x (y = op(x)), times the cotangent c.
Tensor unary_grad(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& c) {
  auto k = [&](double v) { return like_scalar(v, x); };
  switch (op) {
    case UnaryOp::Neg: return neg(c);
    case UnaryOp::Abs: return where(gt(x, k(0)), c, where(lt(x, k(0)), neg(c), k(0)));
    case UnaryOp::Sqrt: return div(c, mul(y, k(2)));
    case UnaryOp::Exp: return mul(c, y);
    case UnaryOp::Log: return div(c, x);
    case UnaryOp::Sin: return mul(c, cos(x));
    case UnaryOp::Cos: return neg(mul(c, sin(x)));
    case UnaryOp::Tanh: return mul(c, sub(k(1), mul(y, y)));
    case UnaryOp::Relu: return where(gt(x, k(0)), c, k(0));
    case UnaryOp::Sigmoid: return mul(c, mul(y, sub(k(1), y)));
    case UnaryOp::Silu: {
      Tensor s = sigmoid(x);
      return mul(c, mul(s, add(k(1), mul(x, sub(k(1), s)))));
    }
    case UnaryOp::Gelu: {  // Phi(x) + x * phi(x)
      Tensor cdf = mul(k(0.5), add(k(1), erf(mul(x, k(M_SQRT1_2)))));
      Tensor pdf = mul(k(0.5 * M_2_SQRTPI * M_SQRT1_2), exp(mul(mul(x, x), k(-0.5))));
      return mul(c, add(cdf, mul(x, pdf)));
    }
    case UnaryOp::GeluTanh: {
      const double a = std::sqrt(2.0 / M_PI), b = 0.044715;
      Tensor x2 = mul(x, x);
      Tensor t = tanh(mul(k(a), mul(x, add(k(1), mul(k(b), x2)))));
      Tensor dt = mul(sub(k(1), mul(t, t)), mul(k(a), add(k(1), mul(k(3 * b), x2))));
      return mul(c, mul(k(0.5), add(add(k(1), t), mul(x, dt))));
    }
    case UnaryOp::Erf:
      return mul(c, mul(k(M_2_SQRTPI), exp(neg(mul(x, x)))));
  }
  throw RuntimeError("[backward] unknown unary op");
}

// Maximum/minimum: the selected side gets the cotangent; ties split it.
Tensor select_grad(const Tensor& mine, const Tensor& other, const Tensor& c, bool is_max) {
  Tensor half = mul(c, like_scalar(0.5, c));
  Tensor zero = like_scalar(0, c);
  Tensor wins = is_max ? gt(mine, other) : lt(mine, other);
  return where(wins, c, where(eq(mine, other), half, zero));
}

Tensor binary_grad(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& y,
                   const Tensor& c, int arg) {
  auto k = [&](double v) { return like_scalar(v, c); };
  switch (op) {
    case BinaryOp::Add: return c;
    case BinaryOp::Sub: return arg == 0 ? c : neg(c);
    case BinaryOp::Mul: return mul(c, arg == 0 ? b : a);
    case BinaryOp::Div: return arg == 0 ? div(c, b) : neg(div(mul(c, y), b));
    case BinaryOp::Pow:
      if (arg == 0) {  // b * a^(b-1), and 0 where b == 0 (PyTorch's convention)
        Tensor d = mul(b, pow(a, sub(b, k(1))));
        return where(eq(b, k(0)), k(0), mul(c, d));
      } else {  // a^b * log(a), and 0 where a == 0 and b >= 0
        Tensor g = mul(c, mul(y, log(a)));
        return where(eq(a, k(0)), where(ge(b, k(0)), k(0), g), g);
      }
    case BinaryOp::Maximum: return select_grad(arg == 0 ? a : b, arg == 0 ? b : a, c, true);
    case BinaryOp::Minimum: return select_grad(arg == 0 ? a : b, arg == 0 ? b : a, c, false);
    default:
      throw ValueError(errmsg("backward", std::string(binary_name(op)) + " is not differentiable"));
  }
}
}  // namespace

std::vector<Tensor> Unary::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor& out,
                               const std::vector<int>& argnums) {
  return {unary_grad(op, in[0], out, c)};
}

std::vector<Tensor> Binary::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor& out,
                                const std::vector<int>& argnums) {
  if (!has_scalar()) {
    return for_each_arg(argnums, [&](int i) { return binary_grad(op, in[0], in[1], out, c, i); });
  }
  // The scalar operand as the broadcast constant it stands for; only the
  // tensor operand (input 0) can need a gradient.
  const Tensor k = broadcast_to(pyflame::scalar(scalar, in[0].dtype(), in[0].device()), in[0].shape());
  const Tensor& a = scalar_side == 0 ? k : in[0];
  const Tensor& b = scalar_side == 0 ? in[0] : k;
  return for_each_arg(argnums, [&](int) { return binary_grad(op, a, b, out, c, 1 - scalar_side); });
}

std::vector<Tensor> Where::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                               const std::vector<int>& argnums) {
  Tensor zero = like_scalar(0, c);
  return for_each_arg(argnums, [&](int i) {
    if (i == 0) throw ValueError(errmsg("backward", "where's condition is not differentiable"));
    return i == 1 ? where(in[0], c, zero) : where(in[0], zero, c);
  });
}

std::vector<Tensor> AsType::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                                const std::vector<int>&) {
  return {astype(c, in[0].dtype())};
}

std::vector<Tensor> ToDevice::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                                  const std::vector<int>&) {
  return {to_device(c, in[0].device())};
}

}  // namespace pyflame
