// Reductions: the input is viewed as (kept axes, reduced axes) rows — copied
// to that layout first when it is not already contiguous — and each row is
// reduced by one block, or by several blocks plus a second pass when there
// are too few rows to fill the GPU.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/rocm/kernels/common.h"

namespace pyflame::backend::rocm {

namespace {

template <ReduceOp Op, typename T>
struct RTraits {
  static constexpr bool kExt = Op == ReduceOp::Max || Op == ReduceOp::Min;
  static constexpr bool kInt = std::is_integral_v<T>;  // bool included
  // Accumulator: float for floats (double for float64), int64 for integer
  // sums and products, double for integer means (an int64 sum of large values
  // would wrap, as NumPy avoids too), the value type for max/min.
  using IntAcc = std::conditional_t<Op == ReduceOp::Mean, double, int64_t>;
  using A = std::conditional_t<kExt, acc_t<T>, std::conditional_t<kInt, IntAcc, acc_t<T>>>;
  // Output (as ops/reduce.cc): integer sums/products widen to int64, integer means give float32.
  using R = std::conditional_t<!kInt, T,
            std::conditional_t<Op == ReduceOp::Sum || Op == ReduceOp::Prod, int64_t,
            std::conditional_t<Op == ReduceOp::Mean, float, T>>>;
};

template <ReduceOp Op, typename A>
__device__ inline A identity() {
  if constexpr (Op == ReduceOp::Prod) return A(1);
  else if constexpr (Op == ReduceOp::Max) {
    if constexpr (std::is_floating_point_v<A>) return -INFINITY;
    else return std::numeric_limits<A>::lowest();
  } else if constexpr (Op == ReduceOp::Min) {
    if constexpr (std::is_floating_point_v<A>) return INFINITY;
    else return std::numeric_limits<A>::max();
  } else return A(0);
}

template <ReduceOp Op>
struct Combine {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    if constexpr (Op == ReduceOp::Max) return gpu::MaxOp{}(a, b);
    else if constexpr (Op == ReduceOp::Min) return gpu::MinOp{}(a, b);
    else if constexpr (Op == ReduceOp::Prod) return a * b;
    else return a + b;
  }
};

// All threads get the block's result; block size a multiple of the wave size.
template <ReduceOp Op, typename A>
__device__ A block_reduce_op(A v) {
  __shared__ A partial[gpu::kMaxWavesPerBlock];
  const unsigned lane = threadIdx.x % PF_WAVE_SIZE, wave = threadIdx.x / PF_WAVE_SIZE;
  const unsigned waves = blockDim.x / PF_WAVE_SIZE;
  v = gpu::warp_reduce(v, Combine<Op>{});
  if (lane == 0) partial[wave] = v;
  __syncthreads();
  v = lane < waves ? partial[lane] : identity<Op, A>();
  v = gpu::warp_reduce(v, Combine<Op>{});
  __syncthreads();
  return v;
}

// Block b reduces chunk (b % chunks) of row (b / chunks). With `partial`, the
// chunk results go there; otherwise each row's result is finalized into out.
// With V > 1 the host guarantees cols % V == 0 and 16-byte aligned rows, and
// each thread reads V elements at a time.
template <ReduceOp Op, typename T, typename A, typename R, int V = 1>
__global__ void reduce_rows(const T* in, R* out, A* partial, int64_t rows, int64_t cols, int64_t chunks,
                            int64_t count) {
  const int64_t len = ((cols + chunks - 1) / chunks + V - 1) / V * V;
  for (int64_t b = blockIdx.x; b < rows * chunks; b += gridDim.x) {
    const int64_t row = b / chunks, start = (b % chunks) * len;
    const int64_t end = start + len < cols ? start + len : cols;
    const T* p = in + row * cols;
    A acc = identity<Op, A>();
    if constexpr (V > 1) {
      const auto* pv = reinterpret_cast<const Pack<T, V>*>(p);
      for (int64_t j = start / V + threadIdx.x; j < end / V; j += blockDim.x) {
        const Pack<T, V> v = pv[j];
#pragma unroll
        for (int k = 0; k < V; ++k) acc = Combine<Op>{}(acc, static_cast<A>(static_cast<acc_t<T>>(v.v[k])));
      }
    } else {
      for (int64_t j = start + threadIdx.x; j < end; j += blockDim.x) {
        acc = Combine<Op>{}(acc, static_cast<A>(static_cast<acc_t<T>>(p[j])));
      }
    }
    acc = block_reduce_op<Op, A>(acc);
    if (threadIdx.x == 0) {
      if (partial) {
        partial[b] = acc;
      } else if constexpr (Op == ReduceOp::Mean) {
        out[row] = convert<R>(static_cast<acc_t<R>>(static_cast<double>(acc) / static_cast<double>(count)));
      } else {
        out[row] = convert<R>(acc);
      }
    }
  }
}

template <ReduceOp Op, typename T>
void reduce_typed(const T* rows_in, Tensor& out, int64_t rows, int64_t cols, DeviceContext& ctx) {
  using A = typename RTraits<Op, T>::A;
  using R = typename RTraits<Op, T>::R;
  const int threads = cols >= 256 ? 256 : 64;
  int64_t chunks = 1;
  if (rows < 2 * ctx.multiprocessors) {
    int64_t want = (4 * ctx.multiprocessors + rows - 1) / rows;
    int64_t useful = (cols + threads * 16 - 1) / (threads * 16);
    chunks = std::max<int64_t>(1, std::min<int64_t>({want, useful, 1024}));
  }
  auto grid = [&](int64_t blocks) {
    return static_cast<unsigned>(std::min<int64_t>(blocks, int64_t(ctx.multiprocessors) * 32));
  };
  R* o = out.data<R>();
  // 16-byte loads when every row starts aligned: the pass is memory-bound.
  constexpr int V = 16 / sizeof(T) > 8 ? 8 : 16 / sizeof(T);
  const bool vec = cols % V == 0 && aligned16(rows_in);
  auto first_pass = [&](A* partial, int64_t nchunks) {
    const unsigned g = grid(rows * nchunks);
    if (vec) {
      reduce_rows<Op, T, A, R, V><<<g, threads, 0, ctx.stream>>>(rows_in, o, partial, rows, cols, nchunks, cols);
    } else {
      reduce_rows<Op, T, A, R><<<g, threads, 0, ctx.stream>>>(rows_in, o, partial, rows, cols, nchunks, cols);
    }
    PF_HIP_CHECK_LAUNCH();
  };
  if (chunks == 1) {
    first_pass(nullptr, 1);
    return;
  }
  auto part = temp_buffer(ctx, rows * chunks * sizeof(A));
  A* pp = static_cast<A*>(part->ptr);
  first_pass(pp, chunks);
  reduce_rows<Op, A, A, R><<<grid(rows), 64, 0, ctx.stream>>>(pp, o, nullptr, rows, chunks, 1, cols);
  PF_HIP_CHECK_LAUNCH();
}

}  // namespace
}  // namespace pyflame::backend::rocm

namespace pyflame {

using namespace backend::rocm;

void Reduce::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  const Tensor& x = in[0];
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  // (kept..., reduced...) view of the input.
  Shape shape;
  Strides st;
  for (int pass = 0; pass < 2; ++pass) {
    for (int d = 0; d < x.ndim(); ++d) {
      bool red = std::find(axes.begin(), axes.end(), d) != axes.end();
      if (red == (pass == 1)) {
        shape.push_back(x.shape()[d]);
        st.push_back(x.strides()[d]);
      }
    }
  }
  int64_t cols = 1;
  for (int a : axes) cols *= x.shape()[a];
  const int64_t rows = x.size() / cols;
  std::shared_ptr<Buffer> tmp;
  const void* src = x.raw_data();
  if (access_of(shape, st) != Access::Contig) {
    tmp = temp_buffer(ctx, x.nbytes());
    copy_strided(x.dtype(), src, shape, st, tmp->ptr, ctx);
    src = tmp->ptr;
  }
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = static_cast<const T*>(src);
    switch (op) {
      case ReduceOp::Sum: reduce_typed<ReduceOp::Sum, T>(p, out, rows, cols, ctx); break;
      case ReduceOp::Mean: reduce_typed<ReduceOp::Mean, T>(p, out, rows, cols, ctx); break;
      case ReduceOp::Max: reduce_typed<ReduceOp::Max, T>(p, out, rows, cols, ctx); break;
      case ReduceOp::Min: reduce_typed<ReduceOp::Min, T>(p, out, rows, cols, ctx); break;
      case ReduceOp::Prod: reduce_typed<ReduceOp::Prod, T>(p, out, rows, cols, ctx); break;
    }
  });
}

}  // namespace pyflame
