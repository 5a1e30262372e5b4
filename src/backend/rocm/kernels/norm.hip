// layer_norm, rms_norm and group_norm: one block per row (a sample's
// normalized dims, or one (sample, group)), float accumulation, mean then
// squared deviations (two passes, no cancellation). Rows that fit are read
// from global memory once: each thread keeps its slice in registers
// (vectorized 16-byte loads when aligned); longer rows and group_norm read
// the row again from global memory (L2) for each pass. Block sizes are
// multiples of 64, so the block reductions are right for wave 64 and 32.
#include <algorithm>
#include <cmath>

#include "backend/rocm/kernels/common.h"
#include "backend/rocm/kernels/norm_rows.h"

namespace pyflame::backend::rocm {

namespace {

enum NormKind : int { kLayer = 0, kRms = 1, kGroup = 2 };

// V consecutive floats of p (16-byte aligned when V is a multiple of 4).
template <int V>
__device__ __forceinline__ void load_floats(const float* p, float (&o)[V]) {
  if constexpr (V % 4 == 0) {
#pragma unroll
    for (int q = 0; q < V / 4; ++q) {
      const Pack<float, 4> pk = reinterpret_cast<const Pack<float, 4>*>(p)[q];
#pragma unroll
      for (int k = 0; k < 4; ++k) o[q * 4 + k] = pk.v[k];
    }
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) o[k] = p[k];
  }
}

// Thread t holds elements [(it * blockDim + t) * V, +V) for it < kIters.
// Requires cols % V == 0 and 16-byte aligned rows when V > 1.
template <typename T, int V, int kIters, bool kRmsNorm>
__global__ void __launch_bounds__(kCachedMaxThreads)
norm_rows_cached(const T* __restrict__ x, T* __restrict__ y, const float* __restrict__ w,
                 const float* __restrict__ b, int64_t rows, int64_t cols, float eps) {
  using P = Pack<T, V>;
  const float inv_cols = 1.0f / static_cast<float>(cols);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    float v[kIters][V];
    float s = 0.0f;
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int64_t j = (int64_t(it) * blockDim.x + threadIdx.x) * V;
      if (j < cols) {
        const P p = *reinterpret_cast<const P*>(xr + j);
#pragma unroll
        for (int k = 0; k < V; ++k) {
          v[it][k] = static_cast<float>(p.v[k]);
          s += kRmsNorm ? v[it][k] * v[it][k] : v[it][k];
        }
      } else {
#pragma unroll
        for (int k = 0; k < V; ++k) v[it][k] = 0.0f;
      }
    }
    s = gpu::block_reduce_sum(s);
    float mean = 0.0f, var;
    if (kRmsNorm) {
      var = s * inv_cols;
    } else {
      mean = s * inv_cols;
      float q = 0.0f;
#pragma unroll
      for (int it = 0; it < kIters; ++it) {
        const int64_t j = (int64_t(it) * blockDim.x + threadIdx.x) * V;
        if (j < cols) {
#pragma unroll
          for (int k = 0; k < V; ++k) {
            const float d = v[it][k] - mean;
            q += d * d;
          }
        }
      }
      var = gpu::block_reduce_sum(q) * inv_cols;
    }
    const float rstd = 1.0f / sqrtf(var + eps);
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int64_t j = (int64_t(it) * blockDim.x + threadIdx.x) * V;
      if (j < cols) {
        float o[V];
#pragma unroll
        for (int k = 0; k < V; ++k) o[k] = (v[it][k] - mean) * rstd;
        if (w) {
          float g[V];
          load_floats<V>(w + j, g);
#pragma unroll
          for (int k = 0; k < V; ++k) o[k] *= g[k];
        }
        if (b) {
          float h[V];
          load_floats<V>(b + j, h);
#pragma unroll
          for (int k = 0; k < V; ++k) o[k] += h[k];
        }
        P p;
#pragma unroll
        for (int k = 0; k < V; ++k) p.v[k] = T(o[k]);
        *reinterpret_cast<P*>(yr + j) = p;
      }
    }
  }
}

// Any row length. Group: element j of row r belongs to channel
// (r % groups) * (cols / hw) + j / hw, whose weight and bias apply.
template <typename T, int K>
__global__ void __launch_bounds__(1024)
norm_rows_generic(const T* __restrict__ x, T* __restrict__ y, const float* __restrict__ w,
                  const float* __restrict__ b, int64_t rows, int64_t cols, float eps,
                  int64_t groups, int64_t hw) {
  const float inv_cols = 1.0f / static_cast<float>(cols);
  const bool narrow = cols <= 0xffffffffLL;  // 32-bit channel division
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const float v = static_cast<float>(xr[j]);
      s += K == kRms ? v * v : v;
    }
    s = gpu::block_reduce_sum(s);
    float mean = 0.0f, var;
    if (K == kRms) {
      var = s * inv_cols;
    } else {
      mean = s * inv_cols;
      float q = 0.0f;
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        const float d = static_cast<float>(xr[j]) - mean;
        q += d * d;
      }
      var = gpu::block_reduce_sum(q) * inv_cols;
    }
    const float rstd = 1.0f / sqrtf(var + eps);
    const int64_t c0 = K == kGroup ? (r % groups) * (cols / hw) : 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      float o = (static_cast<float>(xr[j]) - mean) * rstd;
      int64_t idx = j;
      if (K == kGroup) {
        idx = c0 + (narrow ? int64_t(uint32_t(j) / uint32_t(hw)) : j / hw);
      }
      if (w) o *= w[idx];
      if (b) o += b[idx];
      yr[j] = T(o);
    }
  }
}

unsigned row_grid(const DeviceContext& ctx, int64_t rows) {
  const int64_t cap = int64_t(ctx.multiprocessors) * 64;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(rows, cap)));
}

template <typename T, int V, bool kRmsNorm>
void launch_cached(int iters, const T* x, T* y, const float* w, const float* b, int64_t rows,
                   int64_t cols, float eps, int threads, DeviceContext& ctx) {
  const unsigned grid = row_grid(ctx, rows);
  switch (iters) {
    case 1:
      norm_rows_cached<T, V, 1, kRmsNorm><<<grid, threads, 0, ctx.stream>>>(x, y, w, b, rows, cols, eps);
      break;
    case 2:
      norm_rows_cached<T, V, 2, kRmsNorm><<<grid, threads, 0, ctx.stream>>>(x, y, w, b, rows, cols, eps);
      break;
    case 4:
      norm_rows_cached<T, V, 4, kRmsNorm><<<grid, threads, 0, ctx.stream>>>(x, y, w, b, rows, cols, eps);
      break;
    default:
      norm_rows_cached<T, V, 8, kRmsNorm><<<grid, threads, 0, ctx.stream>>>(x, y, w, b, rows, cols, eps);
      break;
  }
  PF_HIP_CHECK_LAUNCH();
}

// Picks the cached kernel when a row fits in registers, else the generic one.
template <int K>
void run_norm(const std::vector<Tensor>& in, Tensor& out, int64_t cols, double eps, const float* w,
              const float* b, int64_t groups, int64_t hw) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const int64_t rows = out.size() / cols;
  dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = in[0].data<T>();
    T* y = out.data<T>();
    const float e = static_cast<float>(eps);
    if constexpr (K != kGroup) {
      constexpr int kVec = 16 / sizeof(T);
      const bool vec = cols % kVec == 0 && aligned16(x) && aligned16(y) && (!w || aligned16(w)) &&
                       (!b || aligned16(b));
      const int v = vec ? kVec : 1;
      int threads, iters;
      if (cached_norm_geometry(cols / v, threads, iters)) {
        const int it = iters <= 1 ? 1 : iters <= 2 ? 2 : iters <= 4 ? 4 : 8;
        if (vec) launch_cached<T, kVec, K == kRms>(it, x, y, w, b, rows, cols, e, threads, ctx);
        else launch_cached<T, 1, K == kRms>(it, x, y, w, b, rows, cols, e, threads, ctx);
        return;
      }
    }
    const int threads = cols >= 16384 ? 1024 : cols >= 2048 ? 512 : cols >= 256 ? 256 : 64;
    norm_rows_generic<T, K><<<row_grid(ctx, rows), threads, 0, ctx.stream>>>(x, y, w, b, rows, cols, e,
                                                                             groups, hw);
    PF_HIP_CHECK_LAUNCH();
  });
}

}  // namespace
}  // namespace pyflame::backend::rocm

namespace pyflame {

using namespace backend::rocm;

void LayerNorm::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  const float* w = has_weight ? in[1].data<float>() : nullptr;
  const float* b = has_bias ? in[has_weight ? 2 : 1].data<float>() : nullptr;
  run_norm<kLayer>(in, out, cols, eps, w, b, 1, 1);
}

void RMSNorm::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  const float* w = has_weight ? in[1].data<float>() : nullptr;
  run_norm<kRms>(in, out, out.shape().back(), eps, w, nullptr, 1, 1);
}

void GroupNorm::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  const float* w = has_weight ? in[1].data<float>() : nullptr;
  const float* b = has_bias ? in[has_weight ? 2 : 1].data<float>() : nullptr;
  const int64_t N = out.shape()[0], C = out.shape()[1];
  const int64_t hw = out.size() / (N * C);
  run_norm<kGroup>(in, out, (C / groups) * hw, eps, w, b, groups, hw);
}

}  // namespace pyflame
