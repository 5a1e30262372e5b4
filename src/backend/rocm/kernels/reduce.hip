// Reductions: the input is viewed as (kept axes, reduced axes) rows — copied
// to that layout first when it is not already contiguous — and each row is
// reduced by one block, or, when there are too few rows to fill the GPU, by
// several blocks of which the last to finish combines the others' results
// (one launch).
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/reduce_shape.h"
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

// Rows of kReduce.threads or more take the long-row kernel (backend/reduce_shape.h).
#if defined(PYFLAME_GPU_CUDA)  // registers capped so that kReduce.blocks_per_sm blocks are resident
#define PF_REDUCE_BOUNDS(nthreads) \
  __launch_bounds__(nthreads, nthreads == kReduce.threads ? kReduce.blocks_per_sm : 1)
#else  // HIP's second argument means something else: threads only
#define PF_REDUCE_BOUNDS(nthreads) __launch_bounds__(nthreads)
#endif

template <ReduceOp Op, typename A, typename R>
__device__ inline void store_result(R* out, int64_t row, A acc, int64_t count) {
  if constexpr (Op == ReduceOp::Mean) {
    out[row] = convert<R>(static_cast<acc_t<R>>(static_cast<double>(acc) / static_cast<double>(count)));
  } else {
    out[row] = convert<R>(acc);
  }
}

// Block b reduces chunk (b % chunks) of row (b / chunks), each thread with U loads of V
// elements in flight (U accumulators). One chunk per row: the block stores the row's result.
// Several: the chunk's result goes to partial[b], and the row's last block to arrive (counted
// on counters[row], which atomicInc wraps back to 0 for the next kernel) combines the row's
// partials in chunk order, so the result does not depend on the arrival order. With V > 1
// the host guarantees cols % V == 0 and 16-byte aligned rows.
template <ReduceOp Op, typename T, typename A, typename R, int THREADS, int U, int V>
__global__ void PF_REDUCE_BOUNDS(THREADS)
    reduce_rows(const T* in, R* out, A* partial, unsigned* counters, int64_t rows, int64_t cols, int64_t chunks,
                int64_t count) {
  using P = Pack<T, V>;
  const Combine<Op> op{};
  __shared__ bool last;
  const int64_t len = ((cols + chunks - 1) / chunks + V - 1) / V * V;
  for (int64_t b = blockIdx.x; b < rows * chunks; b += gridDim.x) {
    const int64_t row = b / chunks, start = (b % chunks) * len;
    const int64_t end = start + len < cols ? start + len : cols;
    const P* const pv = reinterpret_cast<const P*>(in + row * cols);
    A acc[U];
#pragma unroll
    for (int u = 0; u < U; ++u) acc[u] = identity<Op, A>();
    // One pointer and constant offsets: the U loads share one address.
    const P* q = pv + start / V + threadIdx.x;
    const P* const q_end = pv + end / V;
#pragma unroll 1  // U is the unrolling; more would only cost registers
    for (; q + (U - 1) * THREADS < q_end; q += U * THREADS) {
      P v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) v[u] = q[u * THREADS];
#pragma unroll
      for (int u = 0; u < U; ++u) {
#pragma unroll
        for (int k = 0; k < V; ++k) acc[u] = op(acc[u], static_cast<A>(static_cast<acc_t<T>>(v[u].v[k])));
      }
    }
#pragma unroll 1
    for (; q < q_end; q += THREADS) {
      const P v = *q;
#pragma unroll
      for (int k = 0; k < V; ++k) acc[0] = op(acc[0], static_cast<A>(static_cast<acc_t<T>>(v.v[k])));
    }
#pragma unroll
    for (int u = 1; u < U; ++u) acc[0] = op(acc[0], acc[u]);
    const A total = block_reduce_op<Op, A>(acc[0]);
    if (chunks == 1) {
      if (threadIdx.x == 0) store_result<Op>(out, row, total, count);
      continue;
    }
    if (threadIdx.x == 0) {
      partial[b] = total;
      __threadfence();  // the partial is visible before the count says it is there
      last = atomicInc(&counters[row], static_cast<unsigned>(chunks - 1)) == static_cast<unsigned>(chunks - 1);
    }
    __syncthreads();
    if (last) {  // the same for the whole block
      __threadfence();
      const volatile A* pr = partial + row * chunks;
      A t = identity<Op, A>();
      for (int64_t c = threadIdx.x; c < chunks; c += THREADS) t = op(t, static_cast<A>(pr[c]));
      t = block_reduce_op<Op, A>(t);
      if (threadIdx.x == 0) store_result<Op>(out, row, t, count);
    }
  }
}

template <ReduceOp Op, typename T>
void reduce_typed(const T* rows_in, Tensor& out, int64_t rows, int64_t cols, DeviceContext& ctx) {
  using A = typename RTraits<Op, T>::A;
  using R = typename RTraits<Op, T>::R;
  R* o = out.data<R>();
  // 16-byte loads when every row starts aligned: the pass is memory-bound.
  constexpr int V = 16 / sizeof(T) > 8 ? 8 : 16 / sizeof(T);
  const bool vec = cols % V == 0 && aligned16(rows_in);
  const int64_t chunks = reduce_chunks(rows, cols, ctx.multiprocessors);
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(rows * chunks, int64_t(ctx.multiprocessors) * 32));
  std::shared_ptr<Buffer> part;
  A* pp = nullptr;
  if (chunks > 1) {
    part = temp_buffer(ctx, rows * chunks * sizeof(A));
    pp = static_cast<A*>(part->ptr);
  }
  if (reduce_threads(cols) == kReduce.threads) {
    constexpr int Tl = kReduce.threads, U = kReduce.loads;
    auto* kernel = vec ? reduce_rows<Op, T, A, R, Tl, U, V> : reduce_rows<Op, T, A, R, Tl, U, 1>;
    kernel<<<grid, Tl, 0, ctx.stream>>>(rows_in, o, pp, ctx.row_counters, rows, cols, chunks, cols);
  } else {  // short rows: never split
    constexpr int Ts = kShortRowThreads;
    auto* kernel = vec ? reduce_rows<Op, T, A, R, Ts, 1, V> : reduce_rows<Op, T, A, R, Ts, 1, 1>;
    kernel<<<grid, Ts, 0, ctx.stream>>>(rows_in, o, nullptr, nullptr, rows, cols, 1, cols);
  }
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
