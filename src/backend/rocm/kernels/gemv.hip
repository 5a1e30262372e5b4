// GEMV kernels: the batch-1 path of matmul (try_gemv) and FusedGemv, a
// decode step's projection with the rms_norm before it and the
// residual add after it in the same kernel (docs/design/fusion.md).
#include <algorithm>
#include <type_traits>
#include <vector>

#include "backend/elementwise_math.h"
#include "backend/rocm/kernels/common.h"
#include "backend/rocm/kernels/norm_rows.h"
#include "backend/rocm/memory.h"

namespace pyflame::backend::rocm {

namespace {

// ---------------------------------------------------------------- GEMV
// y[o] = sum_k x[k * xs] * w[o * ws_o + k * ws_k], float accumulation.

constexpr int kGemvThreads = 256;

// ws_k == 1: S waves per output (lanes along k, the waves' pieces
// interleaved), summed by the block. Aligned rows take 16-byte loads, U of
// them in flight per lane before the arithmetic (a GEMV of a few thousand
// rows is latency-bound: more waves per row and more loads in flight keep
// the memory busy). Each lane still sums its chunks in order.
template <typename T, bool kVec, int S, int U, class Store, class Early, class Before>
__device__ __forceinline__ void gemv_rows_loop(const T* __restrict__ w, int64_t ws_o, const T* x, int64_t xs,
                                               int64_t O, int64_t K, Store store, Early early, Before before) {
  constexpr int V = kVec ? 16 / sizeof(T) : 1;
  __shared__ float part[kGemvThreads / gpu::kMinWaveSize];
  const int W = PF_WAVE_SIZE;
  const int lane = threadIdx.x % W, wave = threadIdx.x / W, piece = wave % S;
  const int64_t rows = (blockDim.x / W) / S;  // outputs per block and round
  // early() runs before any weight load, before() once the block's first
  // weights are on their way: FusedGemv's prologue loads its row in
  // early(), so those loads do not queue behind the weights', and works on
  // it in before(), by the whole block.
  early();
  bool first = true;
  for (int64_t o0 = int64_t(blockIdx.x) * rows; o0 < O; o0 += int64_t(gridDim.x) * rows) {
    const int64_t o = o0 + wave / S;
    float s = 0.0f;
    if constexpr (kVec) {
      const int64_t step = int64_t(W) * V * S;
      int64_t k0 = (int64_t(piece) * W + lane) * V;
      const T* wr = w + (o < O ? o : 0) * ws_o;
      const bool ahead = o < O && k0 + step * (U - 1) < K;  // the loop's first chunk, loaded early
      Pack<T, V> pw[U];
      if (ahead) {
#pragma unroll
        for (int u = 0; u < U; ++u) pw[u] = *reinterpret_cast<const Pack<T, V>*>(wr + k0 + step * u);
      }
      if (first) before();
      if (o < O) {
        for (bool loaded = ahead; k0 + step * (U - 1) < K; k0 += step * U, loaded = false) {
          Pack<T, V> px[U];
#pragma unroll
          for (int u = 0; u < U; ++u) {
            if (!loaded) pw[u] = *reinterpret_cast<const Pack<T, V>*>(wr + k0 + step * u);
            px[u] = *reinterpret_cast<const Pack<T, V>*>(x + k0 + step * u);
          }
#pragma unroll
          for (int u = 0; u < U; ++u) {
#pragma unroll
            for (int t = 0; t < V; ++t) s += static_cast<float>(pw[u].v[t]) * static_cast<float>(px[u].v[t]);
          }
        }
        for (; k0 < K; k0 += step) {
          const Pack<T, V> qw = *reinterpret_cast<const Pack<T, V>*>(wr + k0);
          const Pack<T, V> qx = *reinterpret_cast<const Pack<T, V>*>(x + k0);
#pragma unroll
          for (int t = 0; t < V; ++t) s += static_cast<float>(qw.v[t]) * static_cast<float>(qx.v[t]);
        }
      }
    } else {
      if (first) before();
      if (o < O) {
        const T* wr = w + o * ws_o;
        for (int64_t k = lane; k < K; k += W) s += static_cast<float>(wr[k]) * static_cast<float>(x[k * xs]);
      }
    }
    first = false;
    s = gpu::warp_reduce_sum(s);
    if constexpr (S == 1) {
      if (lane == 0 && o < O) store(o, s);
    } else {
      if (lane == 0) part[wave] = s;
      __syncthreads();
      if (piece == 0 && lane == 0 && o < O) {
        float t = 0.0f;
#pragma unroll
        for (int q = 0; q < S; ++q) t += part[wave + q];
        store(o, t);
      }
      __syncthreads();
    }
  }
}

template <typename T, bool kVec, int S, int U>
__global__ void __launch_bounds__(kGemvThreads) gemv_rows(const T* __restrict__ w, int64_t ws_o,
                                                          const T* __restrict__ x, int64_t xs, T* y, int64_t O,
                                                          int64_t K) {
  gemv_rows_loop<T, kVec, S, U>(w, ws_o, x, xs, O, K, [y](int64_t o, float s) { y[o] = T(s); }, [] {}, [] {});
}

// ws_o == 1: threads along o (coalesced), k split over 4 thread rows and
// gridDim.y blocks; with several splits the partial sums go to `part`.
constexpr int kGemvCols = 64, kGemvKRows = kGemvThreads / kGemvCols;

template <typename T>
__global__ void __launch_bounds__(kGemvThreads) gemv_cols(const T* w, int64_t ws_k, const T* x, int64_t xs,
                                                          T* y, float* part, int64_t O, int64_t K) {
  __shared__ float red[kGemvKRows][kGemvCols];
  const int tx = threadIdx.x % kGemvCols, ty = threadIdx.x / kGemvCols;
  const int64_t o = int64_t(blockIdx.x) * kGemvCols + tx;
  float s = 0.0f;
  if (o < O) {
    const int64_t step = int64_t(gridDim.y) * kGemvKRows;
    for (int64_t k = int64_t(blockIdx.y) * kGemvKRows + ty; k < K; k += step) {
      s += static_cast<float>(x[k * xs]) * static_cast<float>(w[k * ws_k + o]);
    }
  }
  red[ty][tx] = s;
  __syncthreads();
  if (ty == 0 && o < O) {
    float t = 0.0f;
#pragma unroll
    for (int r = 0; r < kGemvKRows; ++r) t += red[r][tx];
    if (part) part[int64_t(blockIdx.y) * O + o] = t;
    else y[o] = T(t);
  }
}

template <typename T>
__global__ void gemv_finish(const float* part, T* y, int64_t O, int splits) {
  PF_GRID_STRIDE(o, O) {
    float t = 0.0f;
    for (int s = 0; s < splits; ++s) t += part[int64_t(s) * O + o];
    y[o] = T(t);
  }
}

// ---------------------------------------------------------------- fused GEMV
// FusedGemv: a decode step's projection with its neighbours. After a norm,
// each block first computes the normalized row into shared memory, rounded
// as the unfused norm stores it, then runs gemv_rows' loop over its rows
// against it; the residual add rounds the product first, as the unfused add
// reads it.

enum GemvPrologue { kProNone, kProRms };

template <typename T>
struct FusedGemvArgs {
  const T* w;
  int64_t ws_o;
  const T* x;   // the row (None) or the norm's input (Rms)
  const float* g;  // Rms: the norm's weight
  const T* r;   // the residual, when adding
  T* y;
  int64_t O, K;
  float eps;
  int norm_threads, norm_iters;  // Rms: norm_rows_cached's geometry for this row
};

// The norm's row held by the block before the weights are loaded: thread t
// holds packs t, t + blockDim, ... of x and their gains, for rows of up to
// kRmsHeld packs per thread (longer rows are read in the prologue).
constexpr int kRmsHeld = 1;

template <typename T>
struct RmsRow {
  static constexpr int V = 16 / sizeof(T);
  Pack<T, V> x[kRmsHeld];
  float g[kRmsHeld * V];
  bool held;

  __device__ void load(const FusedGemvArgs<T>& p) {
    held = p.K <= int64_t(blockDim.x) * V * kRmsHeld;
    if (!held) return;
#pragma unroll
    for (int i = 0; i < kRmsHeld; ++i) {
      const int64_t j = (int64_t(i) * blockDim.x + threadIdx.x) * V;
      if (j < p.K) {
        x[i] = *reinterpret_cast<const Pack<T, V>*>(p.x + j);
#pragma unroll
        for (int k = 0; k < V; ++k) g[i * V + k] = p.g[j + k];
      }
    }
  }
};

// x[j .. j + V) normalized by rstd and scaled by g, rounded as the unfused
// norm stores it.
template <typename T, int V>
__device__ __forceinline__ Pack<T, V> rms_scale(const Pack<T, V>& q, const float* g, float rstd) {
  Pack<T, V> o;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    float v = static_cast<float>(q.v[k]) * rstd;
    v *= g[k];
    o.v[k] = T(v);
  }
  return o;
}

// The normalized row into shared memory (Rms only: without a prologue the
// loop reads the row where it is). A held row is first staged raw in xs, so
// the sum below reads each element where norm_rows_cached's thread does.
template <typename T>
__device__ void gemv_prologue(const FusedGemvArgs<T>& p, const RmsRow<T>& row, T* xs) {
  constexpr int V = 16 / sizeof(T);
  using P = Pack<T, V>;
  const int64_t K = p.K, step = int64_t(blockDim.x) * V;
  const T* src = p.x;
  if (row.held) {
#pragma unroll
    for (int i = 0; i < kRmsHeld; ++i) {
      const int64_t j = (int64_t(i) * blockDim.x + threadIdx.x) * V;
      if (j < K) *reinterpret_cast<P*>(xs + j) = row.x[i];
    }
    __syncthreads();
    src = xs;
  }
  // The sum of squares as norm_rows_cached (norm.hip) forms it for this
  // row: the same threads, element order and block reduction, so the
  // scale has the same bits as the unfused norm's.
  float s = 0.0f;
  if (int(threadIdx.x) < p.norm_threads) {
    for (int it = 0; it < p.norm_iters; ++it) {
      const int64_t j = (int64_t(it) * p.norm_threads + threadIdx.x) * V;
      if (j < K) {
        const P q = *reinterpret_cast<const P*>(src + j);
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float v = static_cast<float>(q.v[k]);
          s += v * v;
        }
      }
    }
  }
  s = gpu::block_reduce_sum(s);  // its barriers end every read of the staged row
  const float var = s * (1.0f / static_cast<float>(K));
  const float rstd = 1.0f / sqrtf(var + p.eps);
  if (row.held) {
#pragma unroll
    for (int i = 0; i < kRmsHeld; ++i) {
      const int64_t j = (int64_t(i) * blockDim.x + threadIdx.x) * V;
      if (j < K) *reinterpret_cast<P*>(xs + j) = rms_scale<T, V>(row.x[i], row.g + i * V, rstd);
    }
  } else {
    for (int64_t j = int64_t(threadIdx.x) * V; j < K; j += step) {
      *reinterpret_cast<P*>(xs + j) = rms_scale<T, V>(*reinterpret_cast<const P*>(p.x + j), p.g + j, rstd);
    }
  }
  __syncthreads();
}

template <typename T, int S, int U, int kPro, bool kAdd>
__global__ void __launch_bounds__(kGemvThreads) gemv_fused(FusedGemvArgs<T> p) {
  extern __shared__ __align__(16) unsigned char gemv_row[];
  T* xs = reinterpret_cast<T*>(gemv_row);
  const T* r = p.r;
  T* y = p.y;
  auto store = [=](int64_t o, float s) {
    T v = T(s);
    if constexpr (kAdd) v = T(binary_apply<BinaryOp::Add>(static_cast<float>(v), static_cast<float>(r[o])));
    y[o] = v;
  };
  if constexpr (kPro == kProRms) {
    RmsRow<T> row;
    gemv_rows_loop<T, true, S, U>(p.w, p.ws_o, xs, 1, p.O, p.K, store, [&] { row.load(p); },
                                  [&] { gemv_prologue<T>(p, row, xs); });
  } else {
    gemv_rows_loop<T, true, S, U>(p.w, p.ws_o, p.x, 1, p.O, p.K, store, [] {}, [] {});
  }
}

// Waves per output row (gemv_rows' S), for vectorized rows long enough to
// split. The unfused GEMV and FusedGemv pick the same S, since it sets the
// order of each row's sum (U, the loads in flight, does not). H100, one-row
// fp16 GEMVs read from HBM: rows of few outputs (up to ~4 per
// multiprocessor) take four waves, up to ~16 per multiprocessor two (4.6
// against 5.1 us at 2048 x 2048), more rows one (with FusedGemv's norm
// prologue two waves per row were 20% slower at 6144 and 11264 rows).
int gemv_split(const DeviceContext& ctx, int64_t O, int64_t K, int V) {
  const int wave = std::max(ctx.wave_size, 1);
  const int64_t mps = ctx.multiprocessors;
  if (O <= mps * 4 && K >= 4 * wave * V * 2) return 4;
  return O <= mps * 16 && K >= 2 * wave * V * 2 ? 2 : 1;
}

// The fused kernel, when the layouts allow: unit-stride, 16-byte aligned
// rows, a weight with unit stride along k. False: nothing launched.
template <typename T>
bool launch_fused_gemv(const FusedGemv& f, const std::vector<Tensor>& in, Tensor& out) {
  constexpr int V = 16 / sizeof(T);
  const int np = f.prologue_inputs();
  const Tensor& w = in[np];
  const int64_t K = w.shape()[0], O = w.shape()[1];
  FusedGemvArgs<T> p{};
  p.w = w.data<T>();
  p.ws_o = w.strides()[1];
  if (w.strides()[0] != 1 || p.ws_o % V != 0 || !aligned16(p.w) || K % V != 0) return false;
  if (!out.is_row_contiguous()) return false;
  p.x = in[0].data<T>();
  if (in[0].strides()[1] != 1 || !aligned16(p.x)) return false;
  if (f.prologue == FusedGemv::Prologue::Rms) {
    p.g = in[1].data<float>();
    p.eps = static_cast<float>(f.eps);
    // The norm's kernel must be the cached one, with at most one block's threads.
    if (!aligned16(p.g) || !cached_norm_geometry(K / V, p.norm_threads, p.norm_iters) ||
        p.norm_threads > kGemvThreads) {
      return false;
    }
  }
  if (f.add) {
    p.r = in[np + 1].data<T>();
    if (in[np + 1].strides()[1] != 1) return false;
  }
  p.y = out.data<T>();
  p.O = O;
  p.K = K;
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const bool rms = f.prologue == FusedGemv::Prologue::Rms;
  const int split = gemv_split(ctx, O, K, V);
  const int64_t per_block = kGemvThreads / std::max(ctx.wave_size, 1) / split;
  // One round of rows per block where the GPU holds them all: a block
  // computes the norm's row once, while its first weights load.
  const unsigned grid = static_cast<unsigned>(
      std::min<int64_t>((O + per_block - 1) / per_block, int64_t(ctx.multiprocessors) * 32));
  const size_t smem = rms ? size_t(K) * sizeof(T) : 0;
  auto go = [&](auto pro, auto add) {
    constexpr int kP = decltype(pro)::value;
    constexpr bool kA = decltype(add)::value;
    if (split == 4) gemv_fused<T, 4, 2, kP, kA><<<grid, kGemvThreads, smem, ctx.stream>>>(p);
    else if (split == 2) gemv_fused<T, 2, 2, kP, kA><<<grid, kGemvThreads, smem, ctx.stream>>>(p);
    else gemv_fused<T, 1, 4, kP, kA><<<grid, kGemvThreads, smem, ctx.stream>>>(p);
  };
  auto with_add = [&](auto pro) {
    if (f.add) go(pro, std::true_type{});
    else go(pro, std::false_type{});
  };
  if (rms) with_add(std::integral_constant<int, kProRms>{});
  else with_add(std::integral_constant<int, kProNone>{});
  PF_HIP_CHECK_LAUNCH();
  return true;
}

}  // namespace

// The batch-1 GEMV path of matmul: (1, K) x (K, N) and (M, K) x (K, 1)
// (batch axes of size 1) in float types, for layouts with a unit stride
// along k or along the output. Returns false (nothing launched) otherwise,
// and Matmul::eval_gpu goes on with BLAS.
bool try_gemv(const std::vector<Tensor>& in, Tensor& out) {
  // float64 goes to BLAS: this kernel accumulates in float32.
  if (!is_floating(out.dtype()) || out.dtype() == Dtype::Float64 || in.size() != 2) return false;
  const Tensor &a = in[0], &b = in[1];
  const int nd = out.ndim();
  if (nd < 2 || a.dtype() != out.dtype() || b.dtype() != out.dtype()) return false;
  const int64_t M = out.shape()[nd - 2], N = out.shape()[nd - 1], K = a.shape()[nd - 1];
  if (K == 0 || out.size() == 0 || out.size() != M * N || (M != 1 && N != 1)) return false;
  const char *px, *pw;
  int64_t xs, ws_o, ws_k, O;
  if (M == 1) {  // x = a's row, w[o, k] = b[k, o]
    px = static_cast<const char*>(a.raw_data());
    xs = a.strides()[nd - 1];
    pw = static_cast<const char*>(b.raw_data());
    ws_o = b.strides()[nd - 1];
    ws_k = b.strides()[nd - 2];
    O = N;
  } else {  // x = b's column, w = a
    px = static_cast<const char*>(b.raw_data());
    xs = b.strides()[nd - 2];
    pw = static_cast<const char*>(a.raw_data());
    ws_o = a.strides()[nd - 2];
    ws_k = a.strides()[nd - 1];
    O = M;
  }
  if (O == 1 && ws_k != 1) ws_o = 1;  // a single output: any o stride
  const bool rows = ws_k == 1, cols = !rows && ws_o == 1;
  if (!rows && !cols) return false;
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const int wave = std::max(ctx.wave_size, 1);
  dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = reinterpret_cast<const T*>(px);
    const T* w = reinterpret_cast<const T*>(pw);
    T* y = out.data<T>();
    if (rows) {
      constexpr int V = 16 / sizeof(T);
      const bool vec = xs == 1 && K % V == 0 && ws_o % V == 0 && aligned16(x) && aligned16(w);
      const int split = vec ? gemv_split(ctx, O, K, V) : 1;
      const int64_t per_block = kGemvThreads / wave / split;
      const unsigned grid = static_cast<unsigned>(
          std::min<int64_t>((O + per_block - 1) / per_block, int64_t(ctx.multiprocessors) * 32));
      if (!vec) gemv_rows<T, false, 1, 1><<<grid, kGemvThreads, 0, ctx.stream>>>(w, ws_o, x, xs, y, O, K);
      else if (split == 4) gemv_rows<T, true, 4, 2><<<grid, kGemvThreads, 0, ctx.stream>>>(w, ws_o, x, xs, y, O, K);
      else if (split == 2) gemv_rows<T, true, 2, 2><<<grid, kGemvThreads, 0, ctx.stream>>>(w, ws_o, x, xs, y, O, K);
      else gemv_rows<T, true, 1, 4><<<grid, kGemvThreads, 0, ctx.stream>>>(w, ws_o, x, xs, y, O, K);
      PF_HIP_CHECK_LAUNCH();
      return;
    }
    const int64_t gx = (O + kGemvCols - 1) / kGemvCols;
    const int64_t target = int64_t(ctx.multiprocessors) * 8;
    int64_t splits = std::max<int64_t>(1, target / gx);
    splits = std::min<int64_t>(splits, std::max<int64_t>(1, K / (kGemvKRows * 16)));
    splits = std::min<int64_t>(splits, 65535);
    std::shared_ptr<Buffer> part;
    if (splits > 1) part = temp_buffer(ctx, size_t(splits) * O * sizeof(float));
    float* pp = part ? static_cast<float*>(part->ptr) : nullptr;
    gemv_cols<T><<<dim3(unsigned(gx), unsigned(splits)), kGemvThreads, 0, ctx.stream>>>(w, ws_k, x, xs, y, pp, O, K);
    PF_HIP_CHECK_LAUNCH();
    if (pp) {
      gemv_finish<T><<<grid_for(ctx, O, kThreads), kThreads, 0, ctx.stream>>>(pp, y, O, int(splits));
      PF_HIP_CHECK_LAUNCH();
    }
  });
  return true;
}

}  // namespace pyflame::backend::rocm

namespace pyflame {

void FusedGemv::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  if (out.size() == 0) return;
  bool done = false;
  backend::rocm::dispatch_float(out.dtype(), [&](auto tag) {
    done = backend::rocm::launch_fused_gemv<decltype(tag)>(*this, in, out);
  });
  if (!done) eval_unfused(in, out);
}

}  // namespace pyflame
