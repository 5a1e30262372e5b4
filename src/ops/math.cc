// The 'math' family's op functions: dtype rules per op group, then one
// MathUnary / MathBinary node (see ir/primitives_math.h).
#include "ops/op_utils.h"

namespace pyflame {

const char* math_unary_name(MathUnaryOp op) {
  static const char* names[] = {
      "acos", "acosh", "asin", "asinh", "atan", "atanh", "cosh", "sinh", "tan", "expm1", "log1p",
      "log2", "log10", "floor", "ceil", "round", "trunc", "sign", "bitwise_invert", "signbit",
      "isnan", "isinf", "isfinite"};
  return names[static_cast<int>(op)];
}

const char* math_binary_name(MathBinaryOp op) {
  static const char* names[] = {
      "atan2", "hypot", "copysign", "nextafter", "logaddexp", "floor_divide", "remainder",
      "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift",
      "logical_and", "logical_or", "logical_xor"};
  return names[static_cast<int>(op)];
}

namespace {

using U = MathUnaryOp;
using B = MathBinaryOp;

[[noreturn]] void bad_dtype(const char* fn, Dtype t) {
  throw ValueError(errmsg(fn, std::string("not supported for ") + dtype_name(t) + " tensors"));
}

Tensor record_unary(MathUnaryOp op, const Tensor& x) {
  Dtype out = is_predicate(op) ? Dtype::Bool : x.dtype();
  return Tensor::make(x.shape(), out, x.device(), std::make_shared<MathUnary>(op), {x});
}

// A constant bool tensor shaped like x (predicates that integers decide).
Tensor bool_like(const Tensor& x, bool v) { return full(x.shape(), v ? 1.0 : 0.0, Dtype::Bool, x.device()); }

Tensor math_unary(MathUnaryOp op, const Tensor& x) {
  const char* fn = math_unary_name(op);
  check_defined(x, fn);
  const Dtype t = x.dtype();
  const bool fl = is_floating(t), boolean = t == Dtype::Bool;
  if (op <= U::Log10) {  // transcendental: integers compute in float32
    return record_unary(op, fl ? x : astype(x, Dtype::Float32));
  }
  if (op <= U::Trunc) {  // rounding: integers are already whole
    if (boolean) bad_dtype(fn, t);
    return fl ? record_unary(op, x) : x;
  }
  if (op == U::Sign) {
    if (boolean) bad_dtype(fn, t);
    return record_unary(op, x);
  }
  if (op == U::BitwiseInvert) {
    if (fl) bad_dtype(fn, t);
    return record_unary(op, x);
  }
  if (fl) return record_unary(op, x);  // predicates on floats
  if (op == U::Signbit) return boolean ? bool_like(x, false) : lt(x, zeros({}, t, x.device()));
  return bool_like(x, op == U::IsFinite);
}

Tensor as_bool(const Tensor& x) { return x.dtype() == Dtype::Bool ? x : ne(x, zeros({}, x.dtype(), x.device())); }

Tensor math_binary(MathBinaryOp op, const Tensor& a, const Tensor& b) {
  const char* fn = math_binary_name(op);
  check_defined(a, fn);
  check_defined(b, fn);
  check_same_device(a, b, fn);
  Shape s = broadcast_shapes(a.shape(), b.shape(), fn);
  Dtype t = promote_types(a.dtype(), b.dtype());
  if (is_logical(op)) {
    t = Dtype::Bool;
  } else if (op <= B::Logaddexp) {
    if (!is_floating(t)) t = Dtype::Float32;
    if (op == B::Nextafter && itemsize(t) < 4) {  // a float32 step is not a 16-bit one
      throw ValueError(errmsg(fn, std::string("needs float32 or wider tensors, got ") + dtype_name(t)));
    }
  } else if (op <= B::Remainder) {
    if (t == Dtype::Bool) bad_dtype(fn, t);
  } else if (is_floating(t) || (t == Dtype::Bool && op >= B::LeftShift)) {
    bad_dtype(fn, t);  // bitwise: integers (and bool for and/or/xor)
  }
  Tensor x = broadcast_to(t == Dtype::Bool ? as_bool(a) : astype(a, t), s);
  Tensor y = broadcast_to(t == Dtype::Bool ? as_bool(b) : astype(b, t), s);
  return Tensor::make(s, t, a.device(), std::make_shared<MathBinary>(op), {x, y});
}

}  // namespace

Tensor acos(const Tensor& x) { return math_unary(U::Acos, x); }
Tensor acosh(const Tensor& x) { return math_unary(U::Acosh, x); }
Tensor asin(const Tensor& x) { return math_unary(U::Asin, x); }
Tensor asinh(const Tensor& x) { return math_unary(U::Asinh, x); }
Tensor atan(const Tensor& x) { return math_unary(U::Atan, x); }
Tensor atanh(const Tensor& x) { return math_unary(U::Atanh, x); }
Tensor cosh(const Tensor& x) { return math_unary(U::Cosh, x); }
Tensor sinh(const Tensor& x) { return math_unary(U::Sinh, x); }
Tensor tan(const Tensor& x) { return math_unary(U::Tan, x); }
Tensor expm1(const Tensor& x) { return math_unary(U::Expm1, x); }
Tensor log1p(const Tensor& x) { return math_unary(U::Log1p, x); }
Tensor log2(const Tensor& x) { return math_unary(U::Log2, x); }
Tensor log10(const Tensor& x) { return math_unary(U::Log10, x); }
Tensor floor(const Tensor& x) { return math_unary(U::Floor, x); }
Tensor ceil(const Tensor& x) { return math_unary(U::Ceil, x); }
Tensor round(const Tensor& x) { return math_unary(U::Round, x); }
Tensor trunc(const Tensor& x) { return math_unary(U::Trunc, x); }
Tensor sign(const Tensor& x) { return math_unary(U::Sign, x); }
Tensor signbit(const Tensor& x) { return math_unary(U::Signbit, x); }
Tensor isnan(const Tensor& x) { return math_unary(U::IsNan, x); }
Tensor isinf(const Tensor& x) { return math_unary(U::IsInf, x); }
Tensor isfinite(const Tensor& x) { return math_unary(U::IsFinite, x); }
Tensor bitwise_invert(const Tensor& x) { return math_unary(U::BitwiseInvert, x); }
Tensor logical_not(const Tensor& x) {
  check_defined(x, "logical_not");
  return eq(x, zeros({}, x.dtype(), x.device()));
}

Tensor atan2(const Tensor& a, const Tensor& b) { return math_binary(B::Atan2, a, b); }
Tensor hypot(const Tensor& a, const Tensor& b) { return math_binary(B::Hypot, a, b); }
Tensor copysign(const Tensor& a, const Tensor& b) { return math_binary(B::Copysign, a, b); }
Tensor nextafter(const Tensor& a, const Tensor& b) { return math_binary(B::Nextafter, a, b); }
Tensor logaddexp(const Tensor& a, const Tensor& b) { return math_binary(B::Logaddexp, a, b); }
Tensor floor_divide(const Tensor& a, const Tensor& b) { return math_binary(B::FloorDivide, a, b); }
Tensor remainder(const Tensor& a, const Tensor& b) { return math_binary(B::Remainder, a, b); }
Tensor bitwise_and(const Tensor& a, const Tensor& b) { return math_binary(B::BitwiseAnd, a, b); }
Tensor bitwise_or(const Tensor& a, const Tensor& b) { return math_binary(B::BitwiseOr, a, b); }
Tensor bitwise_xor(const Tensor& a, const Tensor& b) { return math_binary(B::BitwiseXor, a, b); }
Tensor bitwise_left_shift(const Tensor& a, const Tensor& b) { return math_binary(B::LeftShift, a, b); }
Tensor bitwise_right_shift(const Tensor& a, const Tensor& b) { return math_binary(B::RightShift, a, b); }
Tensor logical_and(const Tensor& a, const Tensor& b) { return math_binary(B::LogicalAnd, a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return math_binary(B::LogicalOr, a, b); }
Tensor logical_xor(const Tensor& a, const Tensor& b) { return math_binary(B::LogicalXor, a, b); }

}  // namespace pyflame
