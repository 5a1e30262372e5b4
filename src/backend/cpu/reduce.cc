// Reductions over any set of axes. Floats accumulate in double (contiguous
// float32 runs: float vectors over short blocks, block totals in double; see
// vec_math.h), integers in int64; max/min propagate NaN.
#include <algorithm>
#include <limits>

#include "backend/cpu/reduce.h"
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

// Where a reduction reads its input. Both readers fold the same values in
// the same order, so a fused prologue gives the same bits as its input in
// memory. `fold` combines reduced elements [b, e) of output w (whose kept-axes
// offset is `base`) into acc, starting from the first element when `first`;
// `row` calls f(values, n) over columns [b, e) of row r of a row-major input.
// With Vec (float sums), contiguous values go through cpu::sum_array in
// pieces at kSourceBlock offsets from b in both readers.
template <typename T>
struct TensorReader {  // an input in memory, any strides
  const T* p;
  cpu::Layout<1> inner;
  template <typename A, typename E, bool Vec, typename C>
  A fold(int64_t, int64_t base, int64_t b, int64_t e, bool first, A acc, C combine) const {
    cpu::for_each_run<1>(inner, b, e, [&](auto off, int64_t n, auto ls) {
      const T* s = p + base + off[0];
      int64_t i = 0;
      if (first) {
        acc = A(E(s[0]));
        i = 1;
        first = false;
      }
      if constexpr (Vec) {
        if (ls[0] == 1) {  // in kSourceBlock pieces, as a source delivers them
          for (int64_t stop; i < n; i = stop) {
            stop = std::min(n, (i / cpu::kSourceBlock + 1) * cpu::kSourceBlock);
            acc += cpu::sum_array(s + i, stop - i);
          }
          return;
        }
      }
      for (; i < n; ++i) acc = combine(acc, A(E(s[i * ls[0]])));
    });
    return acc;
  }
  template <typename F>
  void row(int64_t r, int64_t cols, int64_t b, int64_t e, F&& f) const {
    f(p + r * cols + b, e - b);
  }
};

// One block folded into acc: a function of its own, so that acc lives in a
// register (the caller keeps it across the source's calls, which would park
// it on the stack through the whole loop).
template <typename A, typename E, typename T, typename C>
[[gnu::noinline]] A fold_block(A acc, const T* s, int64_t n, C combine) {
  for (int64_t i = 0; i < n; ++i) acc = combine(acc, A(E(s[i])));
  return acc;
}

template <typename T>
struct SourceReader {  // values of a row-major input computed block by block
  const cpu::ReduceSource& src;
  int64_t n_in;
  template <typename A, typename E, bool Vec, typename C>
  A fold(int64_t w, int64_t, int64_t b, int64_t e, bool first, A acc, C combine) const {
    for (int64_t at = w * n_in + b, end = w * n_in + e; at < end; at += cpu::kSourceBlock) {
      const int64_t n = std::min(cpu::kSourceBlock, end - at);
      const T* s = static_cast<const T*>(src(at, n));
      int64_t i = 0;
      if (first) {
        acc = A(E(s[0]));
        i = 1;
        first = false;
      }
      if constexpr (Vec) acc += cpu::sum_array(s + i, n - i);
      else acc = fold_block<A, E>(acc, s + i, n - i, combine);
    }
    return acc;
  }
  template <typename F>
  void row(int64_t r, int64_t cols, int64_t b, int64_t e, F&& f) const {
    for (int64_t at = r * cols + b, end = r * cols + e; at < end; at += cpu::kSourceBlock) {
      const int64_t n = std::min(cpu::kSourceBlock, end - at);
      f(static_cast<const T*>(src(at, n)), n);
    }
  }
};

// `strides`: the input's (row-major for a source).
template <ReduceOp Op, typename T, typename Reader, typename R = reduce_out_t<Op, T>>
void reduce_typed(const Reader& reader, const Shape& shape, const Strides& strides, bool row_contiguous,
                  Tensor& out, const std::vector<int>& axes) {
  // Split the input axes into kept (outer, matching the output order) and
  // reduced (inner) ones.
  Shape outer_shape, inner_shape;
  Strides outer_st, inner_st;
  for (int d = 0; d < int(shape.size()); ++d) {
    bool red = std::find(axes.begin(), axes.end(), d) != axes.end();
    (red ? inner_shape : outer_shape).push_back(shape[d]);
    (red ? inner_st : outer_st).push_back(strides[d]);
  }
  const int64_t n_out = shape_size(outer_shape), n_in = shape_size(inner_shape);
  cpu::Layout<1> outer = cpu::collapse<1>(outer_shape, {&outer_st});
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
  // Reduces inner elements [b, e) of output w (kept-axes offset `base`).
  auto reduce_range = [&](int64_t w, int64_t base, int64_t b, int64_t e, bool first, A acc) {
    // Contiguous float sums and means: the vector kernel's accumulators.
    constexpr bool vec = (Op == ReduceOp::Sum || Op == ReduceOp::Mean) && std::is_floating_point_v<T>;
    return reader.template fold<A, E, vec>(w, base, b, e, first, acc, combine);
  };
  auto finish = [&](A acc) -> R {
    if constexpr (Op == ReduceOp::Mean) return R(static_cast<cpu::acc_t<R>>(acc / static_cast<double>(n_in)));
    else return R(static_cast<cpu::acc_t<R>>(acc));
  };

  bool leading = !axes.empty();
  for (size_t i = 0; i < axes.size(); ++i) leading = leading && axes[i] == static_cast<int>(i);
  if (leading && row_contiguous && n_out > 1 && n_in > 1) {
    // Leading axes of a row-major input (a bias gradient): fold whole rows
    // into per-column accumulators instead of striding down each column.
    cpu::parallel_for(n_out, std::max<int64_t>(1, cpu::kGrain / n_in), [&](int64_t b, int64_t e) {
      std::vector<A> acc(e - b);
      for (int64_t r = 0; r < n_in; ++r) {
        int64_t j = 0;
        reader.row(r, n_out, b, e, [&](const T* s, int64_t n) {
          for (int64_t i = 0; i < n; ++i, ++j) acc[j] = r == 0 ? A(E(s[i])) : combine(acc[j], A(E(s[i])));
        });
      }
      for (int64_t j = b; j < e; ++j) o[j] = finish(acc[j - b]);
    });
    return;
  }
  if (n_out == 1 && n_in > 2 * cpu::kGrain) {
    // One output: split the reduced range over threads, then combine.
    int nt = cpu::max_threads();
    std::vector<A> part(nt, init());
    std::vector<char> used(nt, 0);
    cpu::parallel_for(n_in, cpu::kGrain, [&](int64_t b, int64_t e) {
      int t = omp_get_thread_num();
      part[t] = reduce_range(0, 0, b, e, is_ext, init());
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
      for (int64_t i = 0; i < n; ++i, ++w) o[w] = finish(reduce_range(w, off[0] + i * ls[0], 0, n_in, is_ext, init()));
    });
  });
}

template <typename T, typename Reader>
void reduce_dispatch(ReduceOp op, const Reader& reader, const Shape& shape, const Strides& strides, bool rc,
                     Tensor& out, const std::vector<int>& axes) {
  switch (op) {
    case ReduceOp::Sum: reduce_typed<ReduceOp::Sum, T>(reader, shape, strides, rc, out, axes); break;
    case ReduceOp::Mean: reduce_typed<ReduceOp::Mean, T>(reader, shape, strides, rc, out, axes); break;
    case ReduceOp::Max: reduce_typed<ReduceOp::Max, T>(reader, shape, strides, rc, out, axes); break;
    case ReduceOp::Min: reduce_typed<ReduceOp::Min, T>(reader, shape, strides, rc, out, axes); break;
    case ReduceOp::Prod: reduce_typed<ReduceOp::Prod, T>(reader, shape, strides, rc, out, axes); break;
  }
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
  const Tensor& x = in[0];
  cpu::dispatch(x.dtype(), [&](auto tin) {
    using T = decltype(tin);
    Shape inner_shape;
    Strides inner_st;
    for (int a : axes) {
      inner_shape.push_back(x.shape()[a]);
      inner_st.push_back(x.strides()[a]);
    }
    const TensorReader<T> reader{x.data<T>(), cpu::collapse<1>(inner_shape, {&inner_st})};
    reduce_dispatch<T>(op, reader, x.shape(), x.strides(), x.is_row_contiguous(), out, axes);
  });
}

namespace cpu {

void reduce_source(ReduceOp op, Dtype dtype, const Shape& shape, const std::vector<int>& axes,
                   const ReduceSource& source, Tensor& out) {
  cpu::dispatch(dtype, [&](auto tin) {
    using T = decltype(tin);
    const SourceReader<T> reader{source, shape_size(shape) / std::max<int64_t>(shape_size(out.shape()), 1)};
    reduce_dispatch<T>(op, reader, shape, row_major_strides(shape), true, out, axes);
  });
}

}  // namespace cpu

}  // namespace pyflame
