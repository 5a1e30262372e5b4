// Scalar definitions of the elementwise ops, shared by the CPU and GPU
// backends so both compute the same formula. 16-bit floats arrive as float.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/random_bits.h"  // PF_HD
#include "ir/primitives.h"

namespace pyflame {

template <typename T>
PF_HD inline T pf_max(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return a;  // NaN propagates, as in NumPy and PyTorch
    if (b != b) return b;
  }
  return a > b ? a : b;
}
template <typename T>
PF_HD inline T pf_min(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return a < b ? a : b;
}

// Wraps on overflow as NumPy and PyTorch do (unsigned arithmetic: a signed
// overflow would be undefined). Negative exponents are rejected before the
// kernels run (both backends check); the e < 0 branch only keeps this total.
template <typename T>
PF_HD inline T int_pow(T base, T e) {
  if constexpr (std::is_signed_v<T>) {
    if (e < 0) return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;
  }
  using U = std::make_unsigned_t<T>;
  U r = 1, b = static_cast<U>(base);
  while (e) {
    if (e & 1) r *= b;
    b *= b;
    e >>= 1;
  }
  return static_cast<T>(r);
}

// Integer +, -, * wrap (two's complement, as NumPy and PyTorch): computed
// unsigned, since a signed overflow is undefined behaviour in C++.
template <typename T>
constexpr bool is_signed_int_v = std::is_integral_v<T> && std::is_signed_v<T>;
template <typename T>
using wrap_t = std::conditional_t<is_signed_int_v<T>, std::make_unsigned_t<std::conditional_t<is_signed_int_v<T>, T, int>>, T>;

// float64 computes in double precision (the float formulas below would round
// through float); global names, since pyflame:: has tensor ops of the same names.
template <UnaryOp Op>
PF_HD inline double unary_apply_f64(double x) {
  if constexpr (Op == UnaryOp::Sqrt) return ::sqrt(x);
  else if constexpr (Op == UnaryOp::Exp) return ::exp(x);
  else if constexpr (Op == UnaryOp::Log) return ::log(x);
  else if constexpr (Op == UnaryOp::Sin) return ::sin(x);
  else if constexpr (Op == UnaryOp::Cos) return ::cos(x);
  else if constexpr (Op == UnaryOp::Tanh) return ::tanh(x);
  else if constexpr (Op == UnaryOp::Sigmoid) return 1.0 / (1.0 + ::exp(-x));
  else if constexpr (Op == UnaryOp::Silu) return x / (1.0 + ::exp(-x));
  else if constexpr (Op == UnaryOp::Gelu) return 0.5 * x * (1.0 + ::erf(x * 0.70710678118654752));
  else if constexpr (Op == UnaryOp::Erf) return ::erf(x);
  else if constexpr (Op == UnaryOp::GeluTanh) {
    const double k = 0.7978845608028654;  // sqrt(2/pi)
    return 0.5 * x * (1.0 + ::tanh(k * (x + 0.044715 * x * x * x)));
  }
}

template <UnaryOp Op, typename T>
PF_HD inline T unary_apply(T x) {
  if constexpr (std::is_same_v<T, double> && Op != UnaryOp::Neg && Op != UnaryOp::Abs && Op != UnaryOp::Relu) {
    return unary_apply_f64<Op>(x);
  } else if constexpr (Op == UnaryOp::Neg) return T(-wrap_t<T>(x));  // -INT_MIN wraps to itself
  else if constexpr ((Op == UnaryOp::Abs || Op == UnaryOp::Relu) && std::is_unsigned_v<T>) return x;
  else if constexpr (Op == UnaryOp::Abs) return x < T(0) ? T(-wrap_t<T>(x)) : x;
  else if constexpr (Op == UnaryOp::Relu) return x < T(0) ? T(0) : x;  // keeps NaN
  else if constexpr (Op == UnaryOp::Sqrt) return sqrtf(x);
  else if constexpr (Op == UnaryOp::Exp) return expf(x);
  else if constexpr (Op == UnaryOp::Log) return logf(x);
  else if constexpr (Op == UnaryOp::Sin) return sinf(x);
  else if constexpr (Op == UnaryOp::Cos) return cosf(x);
  else if constexpr (Op == UnaryOp::Tanh) return tanhf(x);
  else if constexpr (Op == UnaryOp::Sigmoid) return 1.0f / (1.0f + expf(-x));
  else if constexpr (Op == UnaryOp::Silu) return x / (1.0f + expf(-x));
  else if constexpr (Op == UnaryOp::Gelu) return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  else if constexpr (Op == UnaryOp::Erf) return erff(x);
  else if constexpr (Op == UnaryOp::GeluTanh) {
    const float k = 0.7978845608028654f;  // sqrt(2/pi)
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
  }
}

// Ops defined on integers too; the rest see only floats.
template <UnaryOp Op>
constexpr bool unary_takes_ints = Op == UnaryOp::Neg || Op == UnaryOp::Abs || Op == UnaryOp::Relu;

template <BinaryOp Op, typename T>
PF_HD inline auto binary_apply(T a, T b) {
  using W = wrap_t<T>;
  if constexpr (Op == BinaryOp::Add) return T(W(a) + W(b));
  else if constexpr (Op == BinaryOp::Sub) return T(W(a) - W(b));
  else if constexpr (Op == BinaryOp::Mul) return T(W(a) * W(b));
  else if constexpr (Op == BinaryOp::Div) return T(a / b);
  else if constexpr (Op == BinaryOp::Pow) {
    if constexpr (std::is_same_v<T, double>) return ::pow(a, b);
    else if constexpr (std::is_floating_point_v<T>) return T(powf(a, b));
    else return int_pow(a, b);
  }
  else if constexpr (Op == BinaryOp::Maximum) return pf_max(a, b);
  else if constexpr (Op == BinaryOp::Minimum) return pf_min(a, b);
  else if constexpr (Op == BinaryOp::Eq) return a == b;
  else if constexpr (Op == BinaryOp::Ne) return a != b;
  else if constexpr (Op == BinaryOp::Lt) return a < b;
  else if constexpr (Op == BinaryOp::Le) return a <= b;
  else if constexpr (Op == BinaryOp::Gt) return a > b;
  else if constexpr (Op == BinaryOp::Ge) return a >= b;
}

// A float to an 8- or 16-bit integer through int64, as PyTorch converts to
// uint8: values wrap modulo 2^bits (a direct conversion of an out-of-range
// float is undefined behaviour in C++); NaN, infinities and values beyond
// int64 give 0.
template <typename To, typename From>
PF_HD inline To float_to_small_int(From v) {
  const double d = static_cast<double>(v);
  if (!(d > -0x1p63 && d < 0x1p63)) return To(0);
  return static_cast<To>(static_cast<int64_t>(d));
}

// Visits every unary op as a compile-time constant: f(std::integral_constant<UnaryOp, op>).
template <typename F>
void visit_unary(UnaryOp op, F&& f) {
#define PF_CASE(name) \
  case UnaryOp::name: f(std::integral_constant<UnaryOp, UnaryOp::name>{}); break;
  switch (op) {
    PF_CASE(Neg) PF_CASE(Abs) PF_CASE(Sqrt) PF_CASE(Exp) PF_CASE(Log) PF_CASE(Sin) PF_CASE(Cos)
    PF_CASE(Tanh) PF_CASE(Relu) PF_CASE(Sigmoid) PF_CASE(Gelu) PF_CASE(GeluTanh) PF_CASE(Silu)
    PF_CASE(Erf)
  }
#undef PF_CASE
}

template <typename F>
void visit_binary(BinaryOp op, F&& f) {
#define PF_CASE(name) \
  case BinaryOp::name: f(std::integral_constant<BinaryOp, BinaryOp::name>{}); break;
  switch (op) {
    PF_CASE(Add) PF_CASE(Sub) PF_CASE(Mul) PF_CASE(Div) PF_CASE(Pow) PF_CASE(Maximum)
    PF_CASE(Minimum) PF_CASE(Eq) PF_CASE(Ne) PF_CASE(Lt) PF_CASE(Le) PF_CASE(Gt) PF_CASE(Ge)
  }
#undef PF_CASE
}

}  // namespace pyflame
