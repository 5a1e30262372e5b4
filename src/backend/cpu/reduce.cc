// Reductions over any set of axes. Floats accumulate in double (contiguous
// float32 runs: float vectors over short blocks, block totals in double; see
// vec_math.h), integers in int64; max/min propagate NaN.
#include <algorithm>
#include <limits>

#include "backend/cpu/kernel_utils.h"
#include "backend/cpu/vec_math.h"
#include "backend/elementwise_math.h"

namespace pyflame {

namespace {

template <typename T>
struct Acc {  // accumulator type per element type and op
  using sum = std::conditional_t<std::is_integral_v<T>, int64_t, double>;
  using ext = cpu::acc_t<T>;
};

// Output type: integer sums and products widen to int64, integer means
// give float32, everything else keeps the input type (as ops/reduce.cc).
template <ReduceOp Op, typename T>
using reduce_out_t = std::conditional_t<
    !std::is_integral_v<T>, T,
    std::conditional_t<Op == ReduceOp::Sum || Op == ReduceOp::Prod, int64_t,
                       std::conditional_t<Op == ReduceOp::Mean, float, T>>>;

template <ReduceOp Op, typename T, typename R = reduce_out_t<Op, T>>
void reduce_typed(const Tensor& x, Tensor& out, const std::vector<int>& axes) {
  // Split the input axes into kept (outer, matching the output order) and
  // reduced (inner) ones.
  Shape outer_shape, inner_shape;
  Strides outer_st, inner_st;
  for (int d = 0; d < x.ndim(); ++d) {
    bool red = std::find(axes.begin(), axes.end(), d) != axes.end();
    (red ? inner_shape : outer_shape).push_back(x.shape()[d]);
    (red ? inner_st : outer_st).push_back(x.strides()[d]);
  }
  const int64_t n_out = shape_size(outer_shape), n_in = shape_size(inner_shape);
  cpu::Layout<1> outer = cpu::collapse<1>(outer_shape, {&outer_st});
  cpu::Layout<1> inner = cpu::collapse<1>(inner_shape, {&inner_st});
  const T* p = x.data<T>();
  R* o = out.data<R>();

  // Means accumulate in double even for integers (as NumPy): an int64 sum
  // of large values would wrap.
  using S = std::conditional_t<Op == ReduceOp::Mean, double, typename Acc<T>::sum>;
  using E = typename Acc<T>::ext;
  constexpr bool is_ext = Op == ReduceOp::Max || Op == ReduceOp::Min;
  using A = std::conditional_t<is_ext, E, S>;
  auto init = []() -> A { return Op == ReduceOp::Prod ? A(1) : A(0); };
  auto combine = [](A acc, A v) -> A {
    if constexpr (Op == ReduceOp::Max) return pf_max(acc, v);
    else if constexpr (Op == ReduceOp::Min) return pf_min(acc, v);
    else if constexpr (Op == ReduceOp::Prod) return A(wrap_t<A>(acc) * wrap_t<A>(v));  // integers wrap, as NumPy
    else return A(wrap_t<A>(acc) + wrap_t<A>(v));
  };
  // Reduces inner elements [b, e) starting from base offset `base`.
  auto reduce_range = [&](int64_t base, int64_t b, int64_t e, bool first, A acc) {
    cpu::for_each_run<1>(inner, b, e, [&](auto off, int64_t n, auto ls) {
      const T* s = p + base + off[0];
      int64_t i = 0;
      if (first) {
        acc = A(E(s[0]));
        i = 1;
        first = false;
      }
      if constexpr ((Op == ReduceOp::Sum || Op == ReduceOp::Mean) && std::is_floating_point_v<T>) {
        // Contiguous float runs: the vector kernel's several accumulators.
        if (ls[0] == 1) {
          acc += cpu::sum_array(s + i, n - i);
          return;
        }
      }
      for (; i < n; ++i) acc = combine(acc, A(E(s[i * ls[0]])));
    });
    return acc;
  };
  auto finish = [&](A acc) -> R {
    if constexpr (Op == ReduceOp::Mean) return R(static_cast<cpu::acc_t<R>>(acc / static_cast<double>(n_in)));
    else return R(static_cast<cpu::acc_t<R>>(acc));
  };

  bool leading = !axes.empty();
  for (size_t i = 0; i < axes.size(); ++i) leading = leading && axes[i] == static_cast<int>(i);
  if (leading && x.is_row_contiguous() && n_out > 1 && n_in > 1) {
    // Leading axes of a row-major input (a bias gradient): fold whole rows
    // into per-column accumulators instead of striding down each column.
    cpu::parallel_for(n_out, std::max<int64_t>(1, cpu::kGrain / n_in), [&](int64_t b, int64_t e) {
      std::vector<A> acc(e - b);
      for (int64_t j = b; j < e; ++j) acc[j - b] = A(E(p[j]));
      for (int64_t r = 1; r < n_in; ++r) {
        const T* row = p + r * n_out;
        for (int64_t j = b; j < e; ++j) acc[j - b] = combine(acc[j - b], A(E(row[j])));
      }
      for (int64_t j = b; j < e; ++j) o[j] = finish(acc[j - b]);
    });
    return;
  }
  if (n_out == 1 && n_in > 2 * cpu::kGrain) {
    // One output: split the reduced range over threads, then combine.
    int nt = omp_get_max_threads();
    std::vector<A> part(nt, init());
    std::vector<char> used(nt, 0);
    cpu::parallel_for(n_in, cpu::kGrain, [&](int64_t b, int64_t e) {
      int t = omp_get_thread_num();
      part[t] = reduce_range(0, b, e, is_ext, init());
      used[t] = 1;
    });
    A acc = init();
    bool first = is_ext;
    for (int t = 0; t < nt; ++t) {
      if (!used[t]) continue;
      acc = first ? part[t] : combine(acc, part[t]);
      first = false;
    }
    o[0] = finish(acc);
    return;
  }
  cpu::parallel_for(n_out, std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(n_in, 1)),
                    [&](int64_t b, int64_t e) {
    int64_t w = b;  // output index: outputs are row-major over the kept axes
    cpu::for_each_run<1>(outer, b, e, [&](auto off, int64_t n, auto ls) {
      for (int64_t i = 0; i < n; ++i) {
        o[w++] = finish(reduce_range(off[0] + i * ls[0], 0, n_in, is_ext, init()));
      }
    });
  });
}

}  // namespace

const char* Reduce::name() const {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Mean: return "mean";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::Prod: return "prod";
  }
  return "reduce";
}

void Reduce::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  cpu::dispatch(in[0].dtype(), [&](auto tin) {
    using T = decltype(tin);
    switch (op) {
      case ReduceOp::Sum: reduce_typed<ReduceOp::Sum, T>(in[0], out, axes); break;
      case ReduceOp::Mean: reduce_typed<ReduceOp::Mean, T>(in[0], out, axes); break;
      case ReduceOp::Max: reduce_typed<ReduceOp::Max, T>(in[0], out, axes); break;
      case ReduceOp::Min: reduce_typed<ReduceOp::Min, T>(in[0], out, axes); break;
      case ReduceOp::Prod: reduce_typed<ReduceOp::Prod, T>(in[0], out, axes); break;
    }
  });
}

}  // namespace pyflame
