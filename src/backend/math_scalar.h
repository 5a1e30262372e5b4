// Scalar definitions of the 'math' family's ops, shared by the CPU and GPU
// backends so both compute the same formula. Floating ops see float (16-bit
// floats arrive widened) or double; integer and bool ops see their own type.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/random_bits.h"  // PF_HD
#include "ir/primitives_math.h"

namespace pyflame {

// The float or double libm function (the overloads of the global names are
// not all present on both host and device).
#define PF_MATH_FN1(fn)                                                  \
  template <typename T>                                                  \
  PF_HD inline T m_##fn(T x) {                                           \
    if constexpr (std::is_same_v<T, float>) return fn##f(x);             \
    else return ::fn(x);                                                 \
  }
#define PF_MATH_FN2(fn)                                                  \
  template <typename T>                                                  \
  PF_HD inline T m_##fn(T x, T y) {                                      \
    if constexpr (std::is_same_v<T, float>) return fn##f(x, y);          \
    else return ::fn(x, y);                                              \
  }
PF_MATH_FN1(acos) PF_MATH_FN1(acosh) PF_MATH_FN1(asin) PF_MATH_FN1(asinh) PF_MATH_FN1(atan)
PF_MATH_FN1(atanh) PF_MATH_FN1(cosh) PF_MATH_FN1(sinh) PF_MATH_FN1(tan) PF_MATH_FN1(expm1)
PF_MATH_FN1(log1p) PF_MATH_FN1(log2) PF_MATH_FN1(log10) PF_MATH_FN1(floor) PF_MATH_FN1(ceil)
PF_MATH_FN1(rint) PF_MATH_FN1(trunc) PF_MATH_FN1(exp) PF_MATH_FN1(fabs)
PF_MATH_FN2(atan2) PF_MATH_FN2(hypot) PF_MATH_FN2(copysign) PF_MATH_FN2(nextafter) PF_MATH_FN2(fmod)
#undef PF_MATH_FN1
#undef PF_MATH_FN2

template <typename T>
PF_HD inline bool m_isnan(T x) { return x != x; }

// Python's floor division on floats (NumPy's npy_divmod): exact where
// floor(a / b) would round the quotient up.
template <typename T>
PF_HD inline T float_floor_divide(T a, T b) {
  if (b == T(0)) return a / b;
  T mod = m_fmod(a, b);
  T div = (a - mod) / b;
  if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) div -= T(1);
  if (div == T(0)) return m_copysign(T(0), a / b);
  T fl = m_floor(div);
  if (div - fl > T(0.5)) fl += T(1);
  return fl;
}

// Python's modulo on floats: the result takes the divisor's sign.
template <typename T>
PF_HD inline T float_remainder(T a, T b) {
  if (b == T(0)) return m_fmod(a, b);  // NaN
  T mod = m_fmod(a, b);
  if (mod != T(0)) {
    if ((b < T(0)) != (mod < T(0))) mod += b;
  } else {
    mod = m_copysign(T(0), b);
  }
  return mod;
}

// Integer floor division and modulo; division by zero gives 0 (NumPy), and
// MIN / -1 wraps instead of trapping.
template <typename T>
PF_HD inline T int_floor_divide(T a, T b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<T>) {
    if (b == T(-1)) return T(T(0) - static_cast<std::make_unsigned_t<T>>(a));
    T q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  } else {
    return a / b;
  }
}
template <typename T>
PF_HD inline T int_remainder(T a, T b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<T>) {
    if (b == T(-1)) return 0;
    T r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  } else {
    return a % b;
  }
}

// NumPy's logaddexp: exact for equal arguments (infinities included).
template <typename T>
PF_HD inline T logaddexp_apply(T a, T b) {
  if (a == b) return a + T(0.693147180559945309417232121458176568);
  T d = a - b;
  if (d > T(0)) return a + m_log1p(m_exp(-d));
  if (d <= T(0)) return b + m_log1p(m_exp(d));
  return d;  // NaN
}

// Shifts beyond the width are defined (NumPy), unlike in C++.
template <typename T>
PF_HD inline T shift_left(T a, T b) {
  if (b < 0 || b >= T(sizeof(T) * 8)) return 0;
  using U = std::make_unsigned_t<T>;
  return T(U(a) << b);
}
template <typename T>
PF_HD inline T shift_right(T a, T b) {
  if (b < 0 || b >= T(sizeof(T) * 8)) {
    if constexpr (std::is_signed_v<T>) return a < 0 ? T(-1) : T(0);
    else return 0;
  }
  return T(a >> b);
}

template <typename T>
PF_HD inline T sign_apply(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    if (x != x) return x;
  }
  return x > T(0) ? T(1) : x < T(0) ? T(-1) : T(0);
}

// Floating ops (T float or double).
template <MathUnaryOp Op, typename T>
PF_HD inline auto math_unary_float(T x) {
  using O = MathUnaryOp;
  if constexpr (Op == O::Acos) return m_acos(x);
  else if constexpr (Op == O::Acosh) return m_acosh(x);
  else if constexpr (Op == O::Asin) return m_asin(x);
  else if constexpr (Op == O::Asinh) return m_asinh(x);
  else if constexpr (Op == O::Atan) return m_atan(x);
  else if constexpr (Op == O::Atanh) return m_atanh(x);
  else if constexpr (Op == O::Cosh) return m_cosh(x);
  else if constexpr (Op == O::Sinh) return m_sinh(x);
  else if constexpr (Op == O::Tan) return m_tan(x);
  else if constexpr (Op == O::Expm1) return m_expm1(x);
  else if constexpr (Op == O::Log1p) return m_log1p(x);
  else if constexpr (Op == O::Log2) return m_log2(x);
  else if constexpr (Op == O::Log10) return m_log10(x);
  else if constexpr (Op == O::Floor) return m_floor(x);
  else if constexpr (Op == O::Ceil) return m_ceil(x);
  else if constexpr (Op == O::Round) return m_rint(x);  // default mode: ties to even
  else if constexpr (Op == O::Trunc) return m_trunc(x);
  else if constexpr (Op == O::Sign) return sign_apply(x);
  else if constexpr (Op == O::Signbit) return m_copysign(T(1), x) < T(0);
  else if constexpr (Op == O::IsNan) return x != x;
  else if constexpr (Op == O::IsInf) return x == x && (x - x) != (x - x);  // inf - inf is NaN
  else if constexpr (Op == O::IsFinite) return (x - x) == (x - x);
  else return x;  // BitwiseInvert never reaches floats (checked when recorded)
}

// Integer and bool ops (sign, bitwise_invert).
template <MathUnaryOp Op, typename T>
PF_HD inline T math_unary_int(T x) {
  if constexpr (Op == MathUnaryOp::Sign) return sign_apply(x);
  else if constexpr (std::is_same_v<T, bool>) return !x;
  else return T(~x);
}

// Which ops each kind of input reaches (the op functions convert the rest).
template <MathUnaryOp Op>
constexpr bool math_unary_takes_ints = Op == MathUnaryOp::Sign || Op == MathUnaryOp::BitwiseInvert;

template <MathBinaryOp Op, typename T>
PF_HD inline auto math_binary_float(T a, T b) {
  using O = MathBinaryOp;
  if constexpr (Op == O::Atan2) return m_atan2(a, b);
  else if constexpr (Op == O::Hypot) return m_hypot(a, b);
  else if constexpr (Op == O::Copysign) return m_copysign(a, b);
  else if constexpr (Op == O::Nextafter) return m_nextafter(a, b);
  else if constexpr (Op == O::Logaddexp) return logaddexp_apply(a, b);
  else if constexpr (Op == O::FloorDivide) return float_floor_divide(a, b);
  else return float_remainder(a, b);
}

template <MathBinaryOp Op, typename T>
PF_HD inline T math_binary_int(T a, T b) {
  using O = MathBinaryOp;
  if constexpr (Op == O::FloorDivide) return int_floor_divide(a, b);
  else if constexpr (Op == O::Remainder) return int_remainder(a, b);
  else if constexpr (Op == O::BitwiseAnd) return T(a & b);
  else if constexpr (Op == O::BitwiseOr) return T(a | b);
  else if constexpr (Op == O::BitwiseXor) return T(a ^ b);
  else if constexpr (Op == O::LeftShift) return shift_left(a, b);
  else return shift_right(a, b);
}

template <MathBinaryOp Op>
PF_HD inline bool math_binary_bool(bool a, bool b) {
  using O = MathBinaryOp;
  if constexpr (Op == O::BitwiseAnd || Op == O::LogicalAnd) return a && b;
  else if constexpr (Op == O::BitwiseOr || Op == O::LogicalOr) return a || b;
  else return a != b;  // xor
}

template <MathBinaryOp Op>
constexpr bool math_binary_takes_floats = Op <= MathBinaryOp::Remainder;
template <MathBinaryOp Op>
constexpr bool math_binary_takes_ints = Op >= MathBinaryOp::FloorDivide && Op <= MathBinaryOp::RightShift;
template <MathBinaryOp Op>
constexpr bool math_binary_takes_bools =
    Op == MathBinaryOp::BitwiseAnd || Op == MathBinaryOp::BitwiseOr || Op == MathBinaryOp::BitwiseXor ||
    is_logical(Op);

// Visits every op as a compile-time constant: f(std::integral_constant<Op, op>).
template <typename F>
void visit_math_unary(MathUnaryOp op, F&& f) {
  switch (op) {
#define PF_CASE(n) \
  case MathUnaryOp::n: f(std::integral_constant<MathUnaryOp, MathUnaryOp::n>{}); break;
    PF_MATH_UNARY_OPS(PF_CASE)
#undef PF_CASE
  }
}
template <typename F>
void visit_math_binary(MathBinaryOp op, F&& f) {
  switch (op) {
#define PF_CASE(n) \
  case MathBinaryOp::n: f(std::integral_constant<MathBinaryOp, MathBinaryOp::n>{}); break;
    PF_MATH_BINARY_OPS(PF_CASE)
#undef PF_CASE
  }
}

}  // namespace pyflame
