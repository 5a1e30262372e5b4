// Softmax / log-softmax over the last axis of a row-major input, float
// accumulation, max subtracted for stability. Three paths:
// - short rows (<= kGroupMaxSlots 16-byte slots): a group of G lanes per row
//   (G = 4, 16 or 32, never more than a wave on any target, so the
//   butterfly shuffles stay inside one wave for wave 32 and wave 64), rows
//   cached in registers, no shared memory and no block barriers;
// - rows that fit in registers of a block (<= 512 threads x 8 slots): one
//   block per row, the row read from global memory once and kept in
//   registers, block reductions for the max and the sum;
// - longer rows: one block per row, the row read three times (max, sum,
//   write).
// Slots are 16-byte vectors when the row length and both pointers allow it,
// single elements otherwise. Block sizes are multiples of 64, so the block
// reductions are right for wave 64 and 32.
#include <algorithm>
#include <cmath>

#include "backend/rocm/kernels/common.h"

namespace pyflame::backend::rocm {

namespace {

constexpr int kGroupThreads = 256;      // block size of the grouped kernel
constexpr int kGroupMaxIters = 8;       // slots per lane, widest group
constexpr int kGroupMaxSlots = 32 * kGroupMaxIters;
constexpr int kCachedMaxThreads = 512;  // register budget of the cached kernel
constexpr int kCachedMaxIters = 8;

// Butterfly over the G consecutive lanes of a group (G <= 32 <= wave size, G
// a power of two, groups aligned to G): every lane gets the group's result.
// All lanes of the wave must call it (uniform control flow).
template <int G, class Op>
__device__ __forceinline__ float group_reduce(float v, Op op) {
#pragma unroll
  for (int offset = G / 2; offset > 0; offset /= 2) v = op(v, gpu::warp_shfl_xor(v, offset));
  return v;
}

// Row values v (slots not in the row hold -inf), the row's max mx and the
// row's sum s of exp(v - mx) are known: write the result of one slot.
template <typename T, int V, bool kLog>
__device__ __forceinline__ void store_slot(T* p, const float (&v)[V], float mx, float scale) {
  Pack<T, V> o;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    // softmax: v holds exp(x - mx) already, scale = 1 / sum.
    // log-softmax: (x - max) - log(sum), scale = log(sum); adding log(sum)
    // to a large max first would round it away.
    o.v[k] = kLog ? T((v[k] - mx) - scale) : T(v[k] * scale);
  }
  *reinterpret_cast<Pack<T, V>*>(p) = o;
}

// Group of G lanes per row; lane g holds slots (it * G + g) for it < kIters
// (V elements each). Requires cols % V == 0 and 16-byte aligned rows when V > 1.
template <typename T, int V, int G, int kIters, bool kLog>
__global__ void __launch_bounds__(kGroupThreads)
softmax_rows_grouped(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t cols) {
  using P = Pack<T, V>;
  constexpr int kRowsPerBlock = kGroupThreads / G;
  const int g = threadIdx.x % G;
  const int slots = static_cast<int>(cols / V);  // <= kGroupMaxSlots
  // Uniform loop bounds over the whole block: every lane runs the shuffles.
  for (int64_t base = int64_t(blockIdx.x) * kRowsPerBlock; base < rows;
       base += int64_t(gridDim.x) * kRowsPerBlock) {
    const int64_t r = base + threadIdx.x / G;
    const bool row_ok = r < rows;
    const T* xr = x + (row_ok ? r : 0) * cols;
    T* yr = y + (row_ok ? r : 0) * cols;
    float v[kIters][V];
    float mx = -INFINITY;
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int s = it * G + g;
      if (row_ok && s < slots) {
        const P p = reinterpret_cast<const P*>(xr)[s];
#pragma unroll
        for (int k = 0; k < V; ++k) {
          v[it][k] = static_cast<float>(p.v[k]);
          mx = gpu::MaxOp{}(mx, v[it][k]);
        }
      } else {
#pragma unroll
        for (int k = 0; k < V; ++k) v[it][k] = -INFINITY;
      }
    }
    mx = group_reduce<G>(mx, gpu::MaxOp{});
    float sum = 0.0f;
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      if (row_ok && it * G + g < slots) {
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float e = expf(v[it][k] - mx);
          sum += e;
          if (!kLog) v[it][k] = e;
        }
      }
    }
    sum = group_reduce<G>(sum, gpu::SumOp{});
    if (row_ok) {
      const float scale = kLog ? logf(sum) : 1.0f / sum;
#pragma unroll
      for (int it = 0; it < kIters; ++it) {
        const int s = it * G + g;
        if (s < slots) store_slot<T, V, kLog>(yr + int64_t(s) * V, v[it], mx, scale);
      }
    }
  }
}

// One block per row; thread t holds slots (it * blockDim + t) for it < kIters.
// Requires cols % V == 0 and 16-byte aligned rows when V > 1.
template <typename T, int V, int kIters, bool kLog>
__global__ void __launch_bounds__(kCachedMaxThreads)
softmax_rows_cached(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t cols) {
  using P = Pack<T, V>;
  const int slots = static_cast<int>(cols / V);  // <= kCachedMaxThreads * kCachedMaxIters
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    float v[kIters][V];
    float mx = -INFINITY;
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int s = it * int(blockDim.x) + int(threadIdx.x);
      if (s < slots) {
        const P p = reinterpret_cast<const P*>(xr)[s];
#pragma unroll
        for (int k = 0; k < V; ++k) {
          v[it][k] = static_cast<float>(p.v[k]);
          mx = gpu::MaxOp{}(mx, v[it][k]);
        }
      } else {
#pragma unroll
        for (int k = 0; k < V; ++k) v[it][k] = -INFINITY;
      }
    }
    mx = gpu::block_reduce_max(mx);
    float sum = 0.0f;
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      if (it * int(blockDim.x) + int(threadIdx.x) < slots) {
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float e = expf(v[it][k] - mx);
          sum += e;
          if (!kLog) v[it][k] = e;
        }
      }
    }
    sum = gpu::block_reduce_sum(sum);
    const float scale = kLog ? logf(sum) : 1.0f / sum;
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int s = it * int(blockDim.x) + int(threadIdx.x);
      if (s < slots) store_slot<T, V, kLog>(yr + int64_t(s) * V, v[it], mx, scale);
    }
  }
}

// float64 rows compute in double, the others in float.
__device__ inline float exp_acc(float v) { return expf(v); }
__device__ inline double exp_acc(double v) { return ::exp(v); }
__device__ inline float log_acc(float v) { return logf(v); }
__device__ inline double log_acc(double v) { return ::log(v); }

// Any row length: the row is read three times (max, sum, write). The only
// kernel for float64.
template <typename T, bool kLog>
__global__ void __launch_bounds__(1024)
softmax_rows_generic(const T* __restrict__ in, T* __restrict__ out, int64_t rows, int64_t cols) {
  using F = std::conditional_t<std::is_same_v<T, double>, double, float>;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* x = in + r * cols;
    T* y = out + r * cols;
    F mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) mx = gpu::MaxOp{}(mx, F(x[j]));
    mx = gpu::block_reduce_max(mx);
    F sum = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) sum += exp_acc(F(x[j]) - mx);
    sum = gpu::block_reduce_sum(sum);
    if (kLog) {
      // (x - max) - log(sum): adding log(sum) to a large max first would round it away.
      const F log_sum = log_acc(sum);
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) y[j] = T((F(x[j]) - mx) - log_sum);
    } else {
      const F inv = F(1) / sum;
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) y[j] = T(exp_acc(F(x[j]) - mx) * inv);
    }
  }
}

unsigned capped_grid(const DeviceContext& ctx, int64_t blocks) {
  const int64_t cap = int64_t(ctx.multiprocessors) * 64;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(blocks, cap)));
}

template <typename T, int V, int G, int kIters, bool kLog>
void launch_grouped(const T* x, T* y, int64_t rows, int64_t cols, DeviceContext& ctx) {
  constexpr int64_t kRowsPerBlock = kGroupThreads / G;
  const unsigned grid = capped_grid(ctx, (rows + kRowsPerBlock - 1) / kRowsPerBlock);
  softmax_rows_grouped<T, V, G, kIters, kLog><<<grid, kGroupThreads, 0, ctx.stream>>>(x, y, rows, cols);
  PF_HIP_CHECK_LAUNCH();
}

// slots <= kGroupMaxSlots: the smallest group (4, 16, 32 lanes) and slots per lane that fit.
template <typename T, int V, bool kLog>
void run_grouped(const T* x, T* y, int64_t rows, int64_t cols, DeviceContext& ctx) {
  const int64_t slots = cols / V;
  if (slots <= 4) return launch_grouped<T, V, 4, 1, kLog>(x, y, rows, cols, ctx);
  if (slots <= 16) return launch_grouped<T, V, 16, 1, kLog>(x, y, rows, cols, ctx);
  if (slots <= 32) return launch_grouped<T, V, 32, 1, kLog>(x, y, rows, cols, ctx);
  if (slots <= 64) return launch_grouped<T, V, 32, 2, kLog>(x, y, rows, cols, ctx);
  if (slots <= 128) return launch_grouped<T, V, 32, 4, kLog>(x, y, rows, cols, ctx);
  launch_grouped<T, V, 32, kGroupMaxIters, kLog>(x, y, rows, cols, ctx);
}

// kGroupMaxSlots < slots: about four slots per thread, 64..512 threads; 4 or 8 slots per thread.
template <typename T, int V, bool kLog>
void run_cached(int iters, int threads, const T* x, T* y, int64_t rows, int64_t cols,
                DeviceContext& ctx) {
  const unsigned grid = capped_grid(ctx, rows);
  if (iters <= 4) {
    softmax_rows_cached<T, V, 4, kLog><<<grid, threads, 0, ctx.stream>>>(x, y, rows, cols);
  } else {
    softmax_rows_cached<T, V, kCachedMaxIters, kLog><<<grid, threads, 0, ctx.stream>>>(x, y, rows, cols);
  }
  PF_HIP_CHECK_LAUNCH();
}

template <typename T, bool kLog>
void run_softmax_float(const T* x, T* y, int64_t rows, int64_t cols, DeviceContext& ctx) {
  constexpr int kVec = 16 / sizeof(T);
  const bool vec = cols % kVec == 0 && aligned16(x) && aligned16(y);
  const int64_t slots = vec ? cols / kVec : cols;
  if (slots <= kGroupMaxSlots) {
    if (vec) run_grouped<T, kVec, kLog>(x, y, rows, cols, ctx);
    else run_grouped<T, 1, kLog>(x, y, rows, cols, ctx);
    return;
  }
  const int64_t want = ((slots + 3) / 4 + 63) / 64 * 64;
  const int threads = static_cast<int>(std::clamp<int64_t>(want, 64, kCachedMaxThreads));
  const int64_t iters = (slots + threads - 1) / threads;
  if (iters <= kCachedMaxIters) {
    if (vec) run_cached<T, kVec, kLog>(static_cast<int>(iters), threads, x, y, rows, cols, ctx);
    else run_cached<T, 1, kLog>(static_cast<int>(iters), threads, x, y, rows, cols, ctx);
    return;
  }
  const int threads_g = cols >= 16384 ? 1024 : 512;
  softmax_rows_generic<T, kLog><<<capped_grid(ctx, rows), threads_g, 0, ctx.stream>>>(x, y, rows, cols);
  PF_HIP_CHECK_LAUNCH();
}

template <typename T, bool kLog>
void run_softmax(const T* x, T* y, int64_t rows, int64_t cols, DeviceContext& ctx) {
  if constexpr (std::is_same_v<T, double>) {
    softmax_rows_generic<T, kLog><<<capped_grid(ctx, rows), 256, 0, ctx.stream>>>(x, y, rows, cols);
    PF_HIP_CHECK_LAUNCH();
  } else {
    run_softmax_float<T, kLog>(x, y, rows, cols, ctx);
  }
}

}  // namespace
}  // namespace pyflame::backend::rocm

namespace pyflame {

using namespace backend::rocm;

void Softmax::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  const int64_t cols = out.ndim() == 0 ? 1 : out.shape().back();
  if (out.size() == 0 || cols == 0) return;
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const int64_t rows = out.size() / cols;
  dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (log) run_softmax<T, true>(in[0].data<T>(), out.data<T>(), rows, cols, ctx);
    else run_softmax<T, false>(in[0].data<T>(), out.data<T>(), rows, cols, ctx);
  });
}

}  // namespace pyflame