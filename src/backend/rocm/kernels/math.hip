// The 'math' family's GPU kernels: one strided map per op and dtype over
// inputs broadcast to the output shape (contiguous inputs skip the indexing).
#include "backend/math_scalar.h"
#include "backend/rocm/kernels/common.h"
#include "pyflame/backend/rocm.h"

namespace pyflame::backend::rocm {

namespace {

template <int N, typename T, typename R, typename F>
__global__ void math_map_kernel(R* out, const T* a, const T* b, Indexer<N> ix, bool contig, int64_t n, F f) {
  PF_GRID_STRIDE(i, n) {
    int64_t o[N];
    if (contig) {
#pragma unroll
      for (int k = 0; k < N; ++k) o[k] = i;
    } else {
      ix.offsets(i, o);
    }
    if constexpr (N == 1) out[i] = R(f(a[o[0]]));
    else out[i] = R(f(a[o[0]], b[o[1]]));
  }
}

template <int N, typename T, typename R, typename F>
void launch_math(const std::vector<Tensor>& in, Tensor& out, F f, DeviceContext& ctx, const char* fn) {
  const int64_t n = out.size();
  if (n == 0) return;
  std::array<const Strides*, N> st;
  bool contig = true;
  for (int k = 0; k < N; ++k) {
    st[k] = &in[k].strides();
    contig &= access_of(out.shape(), in[k].strides()) == Access::Contig;
  }
  Indexer<N> ix = contig ? Indexer<N>{} : make_indexer<N>(out.shape(), st, fn);
  const T* b = N == 2 ? in[N - 1].template data<T>() : nullptr;
  math_map_kernel<N, T, R, F><<<grid_for(ctx, n, kThreads), kThreads, 0, ctx.stream>>>(
      out.data<R>(), in[0].data<T>(), b, ix, contig, n, f);
  PF_HIP_CHECK_LAUNCH();
}

template <MathUnaryOp Op, typename T>
struct MathUnaryF {
  __device__ auto operator()(T v) const {
    using A = acc_t<T>;
    if constexpr (std::is_floating_point_v<A> && !std::is_same_v<T, bool>) return math_unary_float<Op>(A(v));
    else return math_unary_int<Op>(v);
  }
};

template <MathBinaryOp Op, typename T>
struct MathBinaryF {
  __device__ T operator()(T a, T b) const {
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

}  // namespace pyflame::backend::rocm

namespace pyflame {

using namespace backend::rocm;

void MathUnary::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  visit_math_unary(op, [&](auto opc) {
    constexpr MathUnaryOp O = decltype(opc)::value;
    dispatch(in[0].dtype(), [&](auto tag) {
      using T = decltype(tag);
      constexpr bool fl = std::is_floating_point_v<acc_t<T>> && !std::is_same_v<T, bool>;
      if constexpr (fl || math_unary_takes_ints<O>) {
        using R = std::conditional_t<is_predicate(O), bool, T>;
        launch_math<1, T, R>(in, out, MathUnaryF<O, T>{}, ctx, name());
      } else {
        unsupported(name(), in[0].dtype());
      }
    });
  });
}

void MathBinary::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  visit_math_binary(op, [&](auto opc) {
    constexpr MathBinaryOp O = decltype(opc)::value;
    dispatch(in[0].dtype(), [&](auto tag) {
      using T = decltype(tag);
      constexpr bool is_bool = std::is_same_v<T, bool>;
      constexpr bool fl = std::is_floating_point_v<acc_t<T>> && !is_bool;
      if constexpr ((is_bool && math_binary_takes_bools<O>) || (fl && math_binary_takes_floats<O>) ||
                    (!is_bool && !fl && math_binary_takes_ints<O>)) {
        launch_math<2, T, T>(in, out, MathBinaryF<O, T>{}, ctx, name());
      } else {
        unsupported(name(), in[0].dtype());
      }
    });
  });
}

}  // namespace pyflame
