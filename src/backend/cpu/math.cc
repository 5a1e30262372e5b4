// The 'math' family's CPU kernels: one strided map per op and dtype over
// inputs broadcast to the output shape.
#include "backend/cpu/kernel_utils.h"
#include "backend/math_scalar.h"

namespace pyflame {

using cpu::acc_t;

namespace {

// out[i] = f(inputs[i]...), N inputs of type T, output of type R.
template <typename T, typename R, typename F>
void map1(const Tensor& x, Tensor& out, F f) {
  R* o = out.data<R>();
  const T* p = x.data<T>();
  cpu::elementwise_runs<2>(out, {&x}, [&](auto off, int64_t n, auto ls) {
    for (int64_t i = 0; i < n; ++i) o[off[0] + i] = R(f(p[off[1] + i * ls[1]]));
  });
}

template <typename T, typename F>
void map2(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  T* o = out.data<T>();
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  cpu::elementwise_runs<3>(out, {&a, &b}, [&](auto off, int64_t n, auto ls) {
    for (int64_t i = 0; i < n; ++i) o[off[0] + i] = T(f(pa[off[1] + i * ls[1]], pb[off[2] + i * ls[2]]));
  });
}

// The scalar functions as functors (GCC 12 rejects the op constant inside
// nested lambdas).
template <MathUnaryOp Op, typename T>
struct UnaryF {
  auto operator()(T v) const {
    using A = acc_t<T>;
    if constexpr (std::is_floating_point_v<A>) return math_unary_float<Op>(A(v));
    else return math_unary_int<Op>(v);
  }
};

template <MathBinaryOp Op, typename T>
struct BinaryF {
  T operator()(T a, T b) const {
    using A = acc_t<T>;
    if constexpr (std::is_same_v<T, bool>) return math_binary_bool<Op>(a, b);
    else if constexpr (std::is_floating_point_v<A>) return T(math_binary_float<Op>(A(a), A(b)));
    else return math_binary_int<Op>(a, b);
  }
};

[[noreturn]] void unsupported(const char* fn, Dtype t) {
  throw ValueError(errmsg(fn, std::string("not supported for ") + dtype_name(t)));
}

}  // namespace

void MathUnary::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  visit_math_unary(op, [&](auto opc) {
    constexpr MathUnaryOp O = decltype(opc)::value;
    cpu::dispatch(in[0].dtype(), [&](auto tag) {
      using T = decltype(tag);
      constexpr bool fl = std::is_floating_point_v<acc_t<T>>;
      if constexpr (fl || (math_unary_takes_ints<O> && !(std::is_same_v<T, bool> && O == MathUnaryOp::Sign))) {
        using R = std::conditional_t<is_predicate(O), bool, T>;
        map1<T, R>(in[0], out, UnaryF<O, T>{});
      } else {
        unsupported(name(), in[0].dtype());
      }
    });
  });
}

void MathBinary::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  visit_math_binary(op, [&](auto opc) {
    constexpr MathBinaryOp O = decltype(opc)::value;
    cpu::dispatch(in[0].dtype(), [&](auto tag) {
      using T = decltype(tag);
      constexpr bool is_bool = std::is_same_v<T, bool>;
      constexpr bool fl = std::is_floating_point_v<acc_t<T>>;
      if constexpr ((is_bool && math_binary_takes_bools<O>) || (fl && math_binary_takes_floats<O>) ||
                    (!is_bool && !fl && math_binary_takes_ints<O>)) {
        map2<T>(in[0], in[1], out, BinaryF<O, T>{});
      } else {
        unsupported(name(), in[0].dtype());
      }
    });
  });
}

}  // namespace pyflame
