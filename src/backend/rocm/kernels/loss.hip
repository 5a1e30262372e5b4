// Per-target parts of cross_entropy and nll_loss, and the target weights of
// their means. cross_entropy fuses log-softmax and the gather: an online
// (max, sum of exp) pass reads each row once, by one block per row (one
// thread per row when there are few classes). Out-of-range targets are
// recorded in a device flag that is read back (stream-ordered copy, then a
// sync of the stream) and raised as IndexError; the kernels never read
// through a bad target.
#include <algorithm>
#include <cmath>

#include "backend/rocm/kernels/common.h"

namespace pyflame::backend::rocm {

namespace {

constexpr int kLossMaxThreads = 512;

// Scores as (N, C, S): row r = (n, s) starts at (n * C) * S + s, classes S apart.
__device__ __forceinline__ int64_t row_base(int64_t r, int64_t C, int64_t S) {
  return S == 1 ? r * C : (r / S) * C * S + r % S;
}

// Running max and sum of exp(x - max). -inf elements add nothing; NaN poisons the sum.
struct OnlineLse {
  float m = -INFINITY, s = 0.0f;
  __device__ __forceinline__ void add(float v) {
    if (v > m) {
      s = s * expf(m - v) + 1.0f;
      m = v;
    } else if (v != -INFINITY) {
      s += expf(v - m);
    }
  }
};

// Target check shared by the kernels: true when the target contributes.
__device__ __forceinline__ bool target_ok(int64_t t, int64_t C, int64_t ignore, int64_t* bad) {
  if (t == ignore) return false;
  if (t < 0 || t >= C) {
    *bad = t;  // any bad value will do (never 0: C >= 1); racing stores write whole words
    return false;
  }
  return true;
}

// Loss of one row from its log-sum-exp parts. lse = log(sum exp(x - m));
// swx = sum w_c (x_c - pivot), sw = sum w_c (smoothing only).
__device__ __forceinline__ float ce_loss(float xt, float wt, float m, float lse, float swx, float sw,
                                         float pivot, float smoothing, int64_t C, bool smooth) {
  const float nll = -wt * ((xt - m) - lse);
  if (!smooth) return nll;
  // sum_c w_c logp_c = sum w_c (x_c - m) - lse * sw.
  const float wlogp = (swx - (m - pivot) * sw) - lse * sw;
  return (1.0f - smoothing) * nll + smoothing / static_cast<float>(C) * -wlogp;
}

// A finite reference value for the smoothing sums (keeps them small).
__device__ __forceinline__ float pivot_of(float v) { return ::isfinite(v) ? v : 0.0f; }

template <typename T, typename I, bool kSmooth>
__global__ void __launch_bounds__(kLossMaxThreads)
cross_entropy_block(const T* __restrict__ x, const I* __restrict__ tgt, const float* __restrict__ w,
                    float* __restrict__ out, int64_t* bad, int64_t rows, int64_t C, int64_t S,
                    int64_t ignore, float smoothing) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t t = static_cast<int64_t>(tgt[r]);
    if (t == ignore || t < 0 || t >= C) {  // uniform over the block
      if (threadIdx.x == 0) {
        out[r] = 0.0f;
        target_ok(t, C, ignore, bad);
      }
      continue;
    }
    const T* p = x + row_base(r, C, S);
    const float pivot = kSmooth ? pivot_of(static_cast<float>(p[0])) : 0.0f;
    OnlineLse acc;
    float swx = 0.0f, sw = 0.0f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const float v = static_cast<float>(p[c * S]);
      acc.add(v);
      if (kSmooth) {
        const float wc = w ? w[c] : 1.0f;
        swx += wc * (v - pivot);
        sw += wc;
      }
    }
    const float m = gpu::block_reduce_max(acc.m);
    // A thread that saw nothing adds 0 (not 0 * exp(nan)); a NaN sum stays NaN.
    const float s = gpu::block_reduce_sum(acc.s == 0.0f ? 0.0f : acc.s * expf(acc.m - m));
    if (kSmooth) {
      swx = gpu::block_reduce_sum(swx);
      sw = gpu::block_reduce_sum(sw);
    }
    if (threadIdx.x == 0) {
      const float xt = static_cast<float>(p[t * S]);
      out[r] = ce_loss(xt, w ? w[t] : 1.0f, m, logf(s), swx, sw, pivot, smoothing, C, kSmooth);
    }
  }
}

// One thread per row, for few classes.
template <typename T, typename I, bool kSmooth>
__global__ void cross_entropy_thread(const T* __restrict__ x, const I* __restrict__ tgt,
                                     const float* __restrict__ w, float* __restrict__ out,
                                     int64_t* bad, int64_t rows, int64_t C, int64_t S,
                                     int64_t ignore, float smoothing) {
  PF_GRID_STRIDE(r, rows) {
    const int64_t t = static_cast<int64_t>(tgt[r]);
    if (!target_ok(t, C, ignore, bad)) {
      out[r] = 0.0f;
      continue;
    }
    const T* p = x + row_base(r, C, S);
    const float pivot = kSmooth ? pivot_of(static_cast<float>(p[0])) : 0.0f;
    OnlineLse acc;
    float swx = 0.0f, sw = 0.0f;
    for (int64_t c = 0; c < C; ++c) {
      const float v = static_cast<float>(p[c * S]);
      acc.add(v);
      if (kSmooth) {
        const float wc = w ? w[c] : 1.0f;
        swx += wc * (v - pivot);
        sw += wc;
      }
    }
    const float xt = static_cast<float>(p[t * S]);
    out[r] = ce_loss(xt, w ? w[t] : 1.0f, acc.m, logf(acc.s), swx, sw, pivot, smoothing, C, kSmooth);
  }
}

template <typename T, typename I>
__global__ void nll_kernel(const T* __restrict__ x, const I* __restrict__ tgt,
                           const float* __restrict__ w, float* __restrict__ out, int64_t* bad,
                           int64_t rows, int64_t C, int64_t S, int64_t ignore) {
  PF_GRID_STRIDE(r, rows) {
    const int64_t t = static_cast<int64_t>(tgt[r]);
    out[r] = target_ok(t, C, ignore, bad)
                 ? -(w ? w[t] : 1.0f) * static_cast<float>(x[row_base(r, C, S) + t * S])
                 : 0.0f;
  }
}

template <typename I>
__global__ void target_weight_kernel(const I* __restrict__ tgt, const float* __restrict__ w,
                                     float* __restrict__ out, int64_t n, int64_t C, int64_t ignore) {
  PF_GRID_STRIDE(i, n) {
    const int64_t t = static_cast<int64_t>(tgt[i]);
    out[i] = (t == ignore || t < 0 || t >= C) ? 0.0f : (w ? w[t] : 1.0f);
  }
}

template <typename F>
void dispatch_index(Dtype t, F&& f) {
  if (t == Dtype::Int32) f(int32_t{});
  else f(int64_t{});
}

struct RowsNCS {
  int64_t rows, C, S;
};

RowsNCS rows_of(const Tensor& scores) {
  const int64_t N = scores.shape()[0], C = scores.shape()[1];
  return {N * (scores.size() / (N * C)), C, scores.size() / (N * C)};
}

// A zeroed device word for out-of-range targets (the kernels store the bad
// target), read at the end of the evaluation: IndexError naming `fn`.
int64_t* bad_target_flag(DeviceContext& ctx, const char* fn, int64_t C, int64_t ignore) {
  return deferred_check(ctx, 1, [fn, C, ignore](const int64_t* w) {
    throw IndexError(loss_target_error(fn, w[0], C, ignore));
  });
}

// Copies x to y; flags an element outside [lo, hi] or NaN.
__global__ void check_range_kernel(const float* x, float* y, int64_t n, float lo, float hi, int64_t* bad) {
  PF_GRID_STRIDE(i, n) {
    const float v = x[i];
    if (!(v >= lo && v <= hi)) *bad = 1;
    y[i] = v;
  }
}

}  // namespace
}  // namespace pyflame::backend::rocm

namespace pyflame {

using namespace backend::rocm;

void CrossEntropy::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const RowsNCS R = rows_of(in[0]);
  const float* w = has_weight ? in[2].data<float>() : nullptr;
  int64_t* bad = bad_target_flag(ctx, name(), R.C, ignore_index);
  const float sm = static_cast<float>(label_smoothing);
  const bool smooth = label_smoothing != 0.0;
  dispatch_float(in[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    dispatch_index(in[1].dtype(), [&](auto itag) {
      using I = decltype(itag);
      const T* x = in[0].data<T>();
      const I* t = in[1].data<I>();
      float* o = out.data<float>();
      if (R.C <= 32) {
        const unsigned grid = grid_for(ctx, R.rows, kThreads);
        if (smooth) {
          cross_entropy_thread<T, I, true><<<grid, kThreads, 0, ctx.stream>>>(
              x, t, w, o, bad, R.rows, R.C, R.S, ignore_index, sm);
        } else {
          cross_entropy_thread<T, I, false><<<grid, kThreads, 0, ctx.stream>>>(
              x, t, w, o, bad, R.rows, R.C, R.S, ignore_index, sm);
        }
      } else {
        const int threads = R.C >= 4096 ? 512 : R.C >= 1024 ? 256 : R.C >= 256 ? 128 : 64;
        const unsigned grid = static_cast<unsigned>(
            std::max<int64_t>(1, std::min<int64_t>(R.rows, int64_t(ctx.multiprocessors) * 64)));
        if (smooth) {
          cross_entropy_block<T, I, true><<<grid, threads, 0, ctx.stream>>>(
              x, t, w, o, bad, R.rows, R.C, R.S, ignore_index, sm);
        } else {
          cross_entropy_block<T, I, false><<<grid, threads, 0, ctx.stream>>>(
              x, t, w, o, bad, R.rows, R.C, R.S, ignore_index, sm);
        }
      }
      PF_HIP_CHECK_LAUNCH();
    });
  });
}

void NllLoss::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const RowsNCS R = rows_of(in[0]);
  const float* w = has_weight ? in[2].data<float>() : nullptr;
  int64_t* bad = bad_target_flag(ctx, name(), R.C, ignore_index);
  dispatch_float(in[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    dispatch_index(in[1].dtype(), [&](auto itag) {
      using I = decltype(itag);
      nll_kernel<T, I><<<grid_for(ctx, R.rows, kThreads), kThreads, 0, ctx.stream>>>(
          in[0].data<T>(), in[1].data<I>(), w, out.data<float>(), bad, R.rows, R.C, R.S, ignore_index);
      PF_HIP_CHECK_LAUNCH();
    });
  });
}

void TargetWeight::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const float* w = has_weight ? in[1].data<float>() : nullptr;
  const int64_t n = out.size();
  dispatch_index(in[0].dtype(), [&](auto itag) {
    using I = decltype(itag);
    target_weight_kernel<I><<<grid_for(ctx, n, kThreads), kThreads, 0, ctx.stream>>>(
        in[0].data<I>(), w, out.data<float>(), n, classes, ignore_index);
    PF_HIP_CHECK_LAUNCH();
  });
}

void CheckRange::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  // Read at the end of the evaluation.
  int64_t* bad = deferred_check(ctx, 1, [msg = message](const int64_t*) { throw ValueError(msg); });
  const int64_t n = out.size();
  check_range_kernel<<<grid_for(ctx, n, kThreads), kThreads, 0, ctx.stream>>>(
      in[0].data<float>(), out.data<float>(), n, lo, hi, bad);
  PF_HIP_CHECK_LAUNCH();
}

}  // namespace pyflame
