// Elementwise kernels: unary, binary (arithmetic and comparison), where,
// astype. Inputs arrive broadcast to the output shape with any strides.
#include <algorithm>

#include "backend/cpu/elementwise_ops.h"
#include "backend/cpu/vec_math.h"
#include "backend/elementwise_math.h"

namespace pyflame {

using cpu::acc_t;

namespace {

// Ops with an array kernel (vec_math.h): contiguous float and double runs
// go straight through it, strided runs and 16-bit floats through a block in
// the arithmetic type.
template <UnaryOp Op, typename T>
void unary_vec_typed(const Tensor& x, Tensor& out) {
  using A = acc_t<T>;
  constexpr int64_t kChunk = 256;
  T* o = out.data<T>();
  const T* p = x.data<T>();
  cpu::elementwise_runs<2>(out, {&x}, [&](auto off, int64_t n, auto ls) {
    T* d = o + off[0];
    const T* s = p + off[1];
    if constexpr (std::is_same_v<T, A>) {
      if (ls[1] == 1) return cpu::unary_array(Op, s, d, n);
    }
    A buf[kChunk];
    for (int64_t b = 0; b < n; b += kChunk) {
      const int64_t m = std::min(kChunk, n - b);
      for (int64_t i = 0; i < m; ++i) buf[i] = A(s[(b + i) * ls[1]]);
      cpu::unary_array(Op, buf, buf, m);
      for (int64_t i = 0; i < m; ++i) d[b + i] = T(buf[i]);
    }
  });
}

template <UnaryOp Op, typename T>
void unary_typed(const Tensor& x, Tensor& out) {
  if constexpr (cpu::vec_unary(Op) && std::is_floating_point_v<acc_t<T>>) {
    return unary_vec_typed<Op, T>(x, out);
  }
  T* o = out.data<T>();
  const T* p = x.data<T>();
  cpu::elementwise_runs<2>(out, {&x}, [&](auto off, int64_t n, auto ls) {
    T* d = o + off[0];
    const T* s = p + off[1];
    if (ls[1] == 1) {
      for (int64_t i = 0; i < n; ++i) d[i] = T(unary_apply<Op>(acc_t<T>(s[i])));
    } else {
      for (int64_t i = 0; i < n; ++i) d[i] = T(unary_apply<Op>(acc_t<T>(s[i * ls[1]])));
    }
  });
}

template <BinaryOp Op, typename T, typename R>
void binary_typed(const Tensor& a, const Tensor& b, Tensor& out) {
  R* o = out.data<R>();
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  using A = std::conditional_t<std::is_same_v<T, bool>, int32_t, acc_t<T>>;
  cpu::elementwise_runs<3>(out, {&a, &b}, [&](auto off, int64_t n, auto ls) {
    R* d = o + off[0];
    const T* x = pa + off[1];
    const T* y = pb + off[2];
    auto f = [](T u, T v) { return R(binary_apply<Op>(A(u), A(v))); };
    if (ls[1] == 1 && ls[2] == 1) {
      for (int64_t i = 0; i < n; ++i) d[i] = f(x[i], y[i]);
    } else if (ls[1] == 1 && ls[2] == 0) {
      const T v = y[0];
      for (int64_t i = 0; i < n; ++i) d[i] = f(x[i], v);
    } else if (ls[1] == 0 && ls[2] == 1) {
      const T u = x[0];
      for (int64_t i = 0; i < n; ++i) d[i] = f(u, y[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) d[i] = f(x[i * ls[1]], y[i * ls[2]]);
    }
  });
}

// One tensor operand and a scalar one (a kernel argument): s op x when
// scalar_first, else x op s.
template <BinaryOp Op, typename T, typename R>
void binary_scalar_typed(const Tensor& x, T s, bool scalar_first, Tensor& out) {
  R* o = out.data<R>();
  const T* px = x.data<T>();
  using A = std::conditional_t<std::is_same_v<T, bool>, int32_t, acc_t<T>>;
  const A k = A(s);
  cpu::elementwise_runs<2>(out, {&x}, [&](auto off, int64_t n, auto ls) {
    R* d = o + off[0];
    const T* p = px + off[1];
    auto run = [&](auto f) {
      if (ls[1] == 1) {
        for (int64_t i = 0; i < n; ++i) d[i] = f(p[i]);
      } else {
        for (int64_t i = 0; i < n; ++i) d[i] = f(p[i * ls[1]]);
      }
    };
    if (scalar_first) run([k](T v) { return R(binary_apply<Op>(k, A(v))); });
    else run([k](T v) { return R(binary_apply<Op>(A(v), k)); });
  });
}

template <typename T>
void where_typed(const Tensor& c, const Tensor& a, const Tensor& b, Tensor& out) {
  T* o = out.data<T>();
  const bool* pc = c.data<bool>();
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  auto pick = [](bool m, T u, T v) { return cpu::select(m, u, v); };
  cpu::elementwise_runs<4>(out, {&c, &a, &b}, [&](auto off, int64_t n, auto ls) {
    T* d = o + off[0];
    const bool* m = pc + off[1];
    const T* x = pa + off[2];
    const T* y = pb + off[3];
    if (ls[1] == 1 && ls[2] == 1 && ls[3] == 1) {
      for (int64_t i = 0; i < n; ++i) d[i] = pick(m[i], x[i], y[i]);
    } else if (ls[1] == 1 && ls[2] == 1 && ls[3] == 0) {
      const T v = y[0];
      for (int64_t i = 0; i < n; ++i) d[i] = pick(m[i], x[i], v);
    } else if (ls[1] == 1 && ls[2] == 0 && ls[3] == 1) {
      const T u = x[0];
      for (int64_t i = 0; i < n; ++i) d[i] = pick(m[i], u, y[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) d[i] = pick(m[i * ls[1]], x[i * ls[2]], y[i * ls[3]]);
    }
  });
}

template <typename From, typename To>
void astype_typed(const Tensor& x, Tensor& out) {
  To* o = out.data<To>();
  const From* p = x.data<From>();
  cpu::elementwise_runs<2>(out, {&x}, [&](auto off, int64_t n, auto ls) {
    for (int64_t i = 0; i < n; ++i) o[off[0] + i] = cpu::convert<From, To>(p[off[1] + i * ls[1]]);
  });
}

}  // namespace

void Unary::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  visit_unary(op, [&](auto opc) {
    constexpr UnaryOp O = decltype(opc)::value;
    cpu::dispatch(out.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        throw ValueError(errmsg(name(), "not supported for bool tensors"));
      } else if constexpr (std::is_integral_v<T> && !unary_takes_ints<O>) {
        throw ValueError(errmsg(name(), "needs a floating-point tensor"));
      } else {
        unary_typed<O, T>(in[0], out);
      }
    });
  });
}

// Integer pow raises on a negative exponent (as NumPy and PyTorch), before
// any output is written; a lone scan outside the parallel loop.
template <typename T>
void check_int_exponents(const Tensor& e) {
  const Layout<1> L = cpu::collapse<1>(e.shape(), {&e.strides()});
  const T* pe = e.data<T>();
  bool negative = false;
  cpu::for_each_run<1>(L, 0, e.size(), [&](auto off, int64_t n, auto ls) {
    for (int64_t i = 0; i < n && !negative; ++i) negative = pe[off[0] + i * ls[0]] < 0;
  });
  if (negative) throw ValueError(errmsg("pow", "integers to negative integer powers are not allowed"));
}

void Binary::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  visit_binary(op, [&](auto opc) {
    constexpr BinaryOp O = decltype(opc)::value;
    cpu::dispatch(in[0].dtype(), [&](auto tag) {
      using T = decltype(tag);
      using R = std::conditional_t<is_comparison(O), bool, T>;
      if (has_scalar()) {
        // A scalar exponent was checked when the op was recorded.
        if constexpr (O == BinaryOp::Pow && std::is_integral_v<T> && std::is_signed_v<T>) {
          if (scalar_side == 0) check_int_exponents<T>(in[0]);
        }
        const T s = T(static_cast<acc_t<T>>(scalar));  // as Full::eval_cpu stores it
        binary_scalar_typed<O, T, R>(in[0], s, scalar_side == 0, out);
        return;
      }
      if constexpr (O == BinaryOp::Pow && std::is_integral_v<T> && std::is_signed_v<T>) {
        check_int_exponents<T>(in[1]);
      }
      binary_typed<O, T, R>(in[0], in[1], out);
    });
  });
}

void Where::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  cpu::dispatch(out.dtype(), [&](auto tag) {
    where_typed<decltype(tag)>(in[0], in[1], in[2], out);
  });
}

void AsType::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  cpu::dispatch(in[0].dtype(), [&](auto from) {
    cpu::dispatch(out.dtype(), [&](auto to) {
      astype_typed<decltype(from), decltype(to)>(in[0], out);
    });
  });
}

}  // namespace pyflame
