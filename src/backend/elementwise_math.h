// The elementwise ops by op code, for the CPU and prebuilt GPU kernels: each
// maps to its one formula in elementwise_formulas.h (which run-time compiled
// kernels use too). 16-bit floats arrive as float. The CPU computes the
// float transcendental ops with backend/cpu/vec_math.h instead.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "backend/elementwise_formulas.h"
#include "core/random_bits.h"  // PF_HD
#include "ir/primitives.h"

namespace pyflame {

template <typename T>
PF_HD inline T pf_max(T a, T b) { return formulas::max(a, b); }
template <typename T>
PF_HD inline T pf_min(T a, T b) { return formulas::min(a, b); }
template <typename T>
PF_HD inline T int_pow(T base, T e) { return formulas::int_pow(base, e); }

// Integer +, -, * wrap (two's complement): computed unsigned, since a signed
// overflow is undefined behaviour in C++.
template <typename T>
constexpr bool is_signed_int_v = std::is_integral_v<T> && std::is_signed_v<T>;
template <typename T>
using wrap_t = std::conditional_t<is_signed_int_v<T>, std::make_unsigned_t<std::conditional_t<is_signed_int_v<T>, T, int>>, T>;

// float64 computes in double precision (formulas::*_f64).
template <UnaryOp Op>
PF_HD inline double unary_apply_f64(double x) {
  namespace f = formulas;
  if constexpr (Op == UnaryOp::Sqrt) return f::sqrt_f64(x);
  else if constexpr (Op == UnaryOp::Exp) return f::exp_f64(x);
  else if constexpr (Op == UnaryOp::Log) return f::log_f64(x);
  else if constexpr (Op == UnaryOp::Sin) return f::sin_f64(x);
  else if constexpr (Op == UnaryOp::Cos) return f::cos_f64(x);
  else if constexpr (Op == UnaryOp::Tanh) return f::tanh_f64(x);
  else if constexpr (Op == UnaryOp::Sigmoid) return f::sigmoid_f64(x);
  else if constexpr (Op == UnaryOp::Silu) return f::silu_f64(x);
  else if constexpr (Op == UnaryOp::Gelu) return f::gelu_f64(x);
  else if constexpr (Op == UnaryOp::Erf) return f::erf_f64(x);
  else if constexpr (Op == UnaryOp::GeluTanh) return f::gelu_tanh_f64(x);
}
template <UnaryOp Op, typename T>
PF_HD inline T unary_apply(T x) {
  namespace f = formulas;
  if constexpr (std::is_same_v<T, double> && Op != UnaryOp::Neg && Op != UnaryOp::Abs && Op != UnaryOp::Relu) {
    return unary_apply_f64<Op>(x);
  } else if constexpr ((Op == UnaryOp::Abs || Op == UnaryOp::Relu) && std::is_unsigned_v<T>) return x;
  else if constexpr (Op == UnaryOp::Neg) return f::neg(x);
  else if constexpr (Op == UnaryOp::Abs) return f::abs(x);
  else if constexpr (Op == UnaryOp::Relu) return f::relu(x);
  else if constexpr (Op == UnaryOp::Sqrt) return f::sqrt(x);
  else if constexpr (Op == UnaryOp::Exp) return f::exp(x);
  else if constexpr (Op == UnaryOp::Log) return f::log(x);
  else if constexpr (Op == UnaryOp::Sin) return f::sin(x);
  else if constexpr (Op == UnaryOp::Cos) return f::cos(x);
  else if constexpr (Op == UnaryOp::Tanh) return f::tanh(x);
  else if constexpr (Op == UnaryOp::Sigmoid) return f::sigmoid(x);
  else if constexpr (Op == UnaryOp::Silu) return f::silu(x);
  else if constexpr (Op == UnaryOp::Gelu) return f::gelu(x);
  else if constexpr (Op == UnaryOp::Erf) return f::erf(x);
  else if constexpr (Op == UnaryOp::GeluTanh) return f::gelu_tanh(x);
}

// Ops defined on integers too; the rest see only floats.
template <UnaryOp Op>
constexpr bool unary_takes_ints = Op == UnaryOp::Neg || Op == UnaryOp::Abs || Op == UnaryOp::Relu;

template <BinaryOp Op, typename T>
PF_HD inline auto binary_apply(T a, T b) {
  namespace f = formulas;
  if constexpr (Op == BinaryOp::Add) return f::add(a, b);
  else if constexpr (Op == BinaryOp::Sub) return f::sub(a, b);
  else if constexpr (Op == BinaryOp::Mul) return f::mul(a, b);
  else if constexpr (Op == BinaryOp::Div) return f::div(a, b);
  else if constexpr (Op == BinaryOp::Pow) {
    if constexpr (std::is_same_v<T, double>) return f::pow(a, b);
    else if constexpr (std::is_floating_point_v<T>) return T(f::pow(float(a), float(b)));
    else return f::pow(a, b);
  }
  else if constexpr (Op == BinaryOp::Maximum) return f::max(a, b);
  else if constexpr (Op == BinaryOp::Minimum) return f::min(a, b);
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
