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

// Signed integers compute in their unsigned type: overflow wraps around (two's
// complement, as NumPy and PyTorch give) instead of being undefined behaviour.
template <typename T, bool = std::is_integral_v<T> && std::is_signed_v<T>>
struct wrap_type {
  using type = T;
};
template <typename T>
struct wrap_type<T, true> {
  using type = std::make_unsigned_t<T>;
};
template <typename T>
using wrap_t = typename wrap_type<T>::type;

template <typename T>
PF_HD inline T wrap_neg(T x) {
  if constexpr (std::is_integral_v<T>) return T(wrap_t<T>(0) - wrap_t<T>(x));
  else return -x;  // keeps -0.0 and NaN signs
}

template <typename T>
PF_HD inline T int_pow(T base, T e) {
  if (e < 0) return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;
  wrap_t<T> r = 1, b = static_cast<wrap_t<T>>(base);
  while (e) {
    if (e & 1) r *= b;
    b *= b;
    e >>= 1;
  }
  return static_cast<T>(r);
}

template <UnaryOp Op, typename T>
PF_HD inline T unary_apply(T x) {
  if constexpr (Op == UnaryOp::Neg) return wrap_neg(x);
  else if constexpr (Op == UnaryOp::Abs) return x < T(0) ? wrap_neg(x) : x;
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
  if constexpr (Op == BinaryOp::Add) return T(wrap_t<T>(a) + wrap_t<T>(b));
  else if constexpr (Op == BinaryOp::Sub) return T(wrap_t<T>(a) - wrap_t<T>(b));
  else if constexpr (Op == BinaryOp::Mul) return T(wrap_t<T>(a) * wrap_t<T>(b));
  else if constexpr (Op == BinaryOp::Div) return T(a / b);
  else if constexpr (Op == BinaryOp::Pow) {
    if constexpr (std::is_floating_point_v<T>) return T(powf(a, b));
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
