// GPU kernels of the sort family. Simple and exact rather than fast:
// argmax/argmin take one block per line (a shared-memory tree of (value,
// index) pairs, first index on ties); argsort is a bitonic sort of (key,
// index) pairs per row, one block per row, in shared memory for rows up to
// kSharedSortBytes and in a global scratch buffer beyond (ordering by key
// then index makes the result the stable order); cumsum runs one thread per
// line (one block per row for long rows along the last axis); multinomial
// one block per row (chunk sums in parallel, the draws by the shared
// algorithm of backend/sampling.h, so they equal the CPU's); for many draws
// with replacement, its prefix sums (a block per row) and one thread per
// draw; for many without, argsort's sort of its race keys.
#include <algorithm>
#include <cstring>

#include "backend/rocm/kernels/common.h"
#include "backend/rocm/memory.h"
#include "backend/sampling.h"

namespace pyflame::backend::rocm {

namespace {

// Bool and 8/16-bit integers sort as int32: the index array after the keys in
// shared memory stays 4-byte aligned.
template <typename T>
using key_t = std::conditional_t<std::is_integral_v<T> && sizeof(T) < 4, int32_t, acc_t<T>>;

constexpr int kArgThreads = 256;
constexpr size_t kSharedSortBytes = 32 * 1024;
constexpr size_t kScratchBytes = size_t(256) << 20;  // global sort scratch per launch

template <typename T>
__global__ void arg_reduce_kernel(const T* x, int64_t* out, int64_t n, int64_t inner, bool is_max) {
  using K = key_t<T>;
  __shared__ K sval[kArgThreads];
  __shared__ int64_t sidx[kArgThreads];
  const int64_t line = blockIdx.x;
  const T* p = x + (line / inner) * n * inner + line % inner;
  const int tid = threadIdx.x;
  K best{};
  int64_t bi = -1;
  for (int64_t i = tid; i < n; i += blockDim.x) {  // increasing i: ties keep the first
    const K v = static_cast<K>(p[i * inner]);
    if (bi < 0 || arg_better(v, best, is_max)) {
      best = v;
      bi = i;
    }
  }
  sval[tid] = best;
  sidx[tid] = bi;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) {
      const K v = sval[tid + s];
      const int64_t vi = sidx[tid + s];
      if (vi >= 0) {
        const int64_t ci = sidx[tid];
        const bool take = ci < 0 || arg_better(v, sval[tid], is_max) ||
                          (!arg_better(sval[tid], v, is_max) && vi < ci);
        if (take) {
          sval[tid] = v;
          sidx[tid] = vi;
        }
      }
    }
    __syncthreads();
  }
  if (tid == 0) out[line] = sidx[0];
}

// Whether pair a comes before pair b: padding (index >= n) last, then the
// key order, then the index.
template <typename K>
__device__ inline bool pair_before(K ka, int ia, K kb, int ib, int64_t n, bool desc) {
  if (ia >= n || ib >= n) return ia < ib;
  if (sort_before(ka, kb, desc)) return true;
  if (sort_before(kb, ka, desc)) return false;
  return ia < ib;
}

// The sort keys of argsort: the values (16-bit floats as float).
template <typename T>
struct ValueKeys {
  using K = key_t<T>;
  const T* x;
  int64_t n;
  __device__ K operator()(int64_t row, int64_t i) const { return static_cast<K>(x[row * n + i]); }
};

// One block per row; P (a power of two >= n) slots of (key, index), the keys
// from `keys`; the first `nout` indices of the sorted row are written.
template <typename Keys>
__global__ void argsort_kernel(Keys keys_of, int64_t* out, int64_t n, int64_t nout, int64_t P, bool desc,
                               typename Keys::K* gkeys, int* gidx, int64_t row0) {
  using K = typename Keys::K;
  extern __shared__ unsigned char smem[];
  const int64_t row = row0 + blockIdx.x;
  K* keys;
  int* idx;
  if (gkeys) {
    keys = gkeys + int64_t(blockIdx.x) * P;
    idx = gidx + int64_t(blockIdx.x) * P;
  } else {
    keys = reinterpret_cast<K*>(smem);
    idx = reinterpret_cast<int*>(smem + P * sizeof(K));
  }
  for (int64_t i = threadIdx.x; i < P; i += blockDim.x) {
    keys[i] = i < n ? keys_of(row, i) : K{};
    idx[i] = static_cast<int>(i);
  }
  __syncthreads();
  for (int64_t k = 2; k <= P; k <<= 1) {
    for (int64_t j = k >> 1; j > 0; j >>= 1) {
      for (int64_t i = threadIdx.x; i < P; i += blockDim.x) {
        const int64_t l = i ^ j;
        if (l > i) {
          const bool up = (i & k) == 0;
          const bool swap = up ? pair_before(keys[l], idx[l], keys[i], idx[i], n, desc)
                               : pair_before(keys[i], idx[i], keys[l], idx[l], n, desc);
          if (swap) {
            const K tk = keys[i];
            keys[i] = keys[l];
            keys[l] = tk;
            const int ti = idx[i];
            idx[i] = idx[l];
            idx[l] = ti;
          }
        }
      }
      __syncthreads();
    }
  }
  for (int64_t i = threadIdx.x; i < nout; i += blockDim.x) out[row * nout + i] = idx[i];
}

// Sorts each of `rows` rows of n keys (ascending or `desc`, then by index)
// into the first `nout` indices of each: in shared memory for rows up to
// kSharedSortBytes, else in scratch for a batch of rows at a time.
template <typename Keys>
void sort_rows(DeviceContext& ctx, const Keys& keys, int64_t rows, int64_t n, int64_t nout, bool desc,
               int64_t* out) {
  using K = typename Keys::K;
  int64_t P = 1;
  while (P < n) P <<= 1;
  const size_t row_bytes = size_t(P) * (sizeof(K) + sizeof(int));
  const int threads = static_cast<int>(std::min<int64_t>(1024, std::max<int64_t>(32, P / 2)));
  if (row_bytes <= kSharedSortBytes) {
    argsort_kernel<Keys><<<static_cast<unsigned>(rows), threads, row_bytes, ctx.stream>>>(
        keys, out, n, nout, P, desc, nullptr, nullptr, 0);
    PF_HIP_CHECK_LAUNCH();
    return;
  }
  const int64_t batch = std::max<int64_t>(1, std::min<int64_t>(rows, kScratchBytes / row_bytes));
  auto gkeys = temp_buffer(ctx, size_t(batch) * P * sizeof(K));
  auto gidx = temp_buffer(ctx, size_t(batch) * P * sizeof(int));
  for (int64_t r0 = 0; r0 < rows; r0 += batch) {
    const int64_t nb = std::min(batch, rows - r0);
    argsort_kernel<Keys><<<static_cast<unsigned>(nb), threads, 0, ctx.stream>>>(
        keys, out, n, nout, P, desc, static_cast<K*>(gkeys->ptr), static_cast<int*>(gidx->ptr), r0);
    PF_HIP_CHECK_LAUNCH();
  }
}

template <typename T>
__global__ void cumsum_kernel(const T* x, T* out, int64_t lines, int64_t n, int64_t inner, bool rev) {
  using A = key_t<T>;
  PF_GRID_STRIDE(line, lines) {
    const int64_t base = (line / inner) * n * inner + line % inner;
    A acc = 0;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = base + (rev ? n - 1 - k : k) * inner;
      acc += static_cast<A>(x[i]);
      out[i] = convert<T>(acc);
    }
  }
}

// Long rows (the scan axis last): one block per row; each thread sums a
// contiguous segment, thread 0 turns the segment sums into offsets, then
// each thread rewrites its segment from its offset.
constexpr int kScanThreads = 256;
constexpr int64_t kBlockScanMin = 4 * kScanThreads;

template <typename T>
__global__ void cumsum_rows_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t n, bool rev) {
  using A = key_t<T>;
  __shared__ A part[kScanThreads];
  const int64_t base = int64_t(blockIdx.x) * n;
  const int64_t seg = (n + kScanThreads - 1) / kScanThreads;
  const int64_t k0 = threadIdx.x * seg, k1 = k0 + seg < n ? k0 + seg : n;
  A s = 0;
  for (int64_t k = k0; k < k1; ++k) s += static_cast<A>(x[base + (rev ? n - 1 - k : k)]);
  part[threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    A run = 0;
    for (int t = 0; t < kScanThreads; ++t) {
      const A v = part[t];
      part[t] = run;
      run += v;
    }
  }
  __syncthreads();
  A acc = part[threadIdx.x];
  for (int64_t k = k0; k < k1; ++k) {
    const int64_t i = base + (rev ? n - 1 - k : k);
    acc += static_cast<A>(x[i]);
    out[i] = convert<T>(acc);
  }
}

// One block of kChunks threads per row: thread c sums chunk c, thread 0
// draws (the sequential draws). status[0] takes the first error code.
template <typename T>
__global__ void multinomial_kernel(const T* p, int64_t* out, int64_t V, int64_t ns, bool replacement,
                                   uint64_t key, int* status) {
  __shared__ double cs[sampling::kChunks];
  const int64_t r = blockIdx.x;
  const T* row = p + r * V;
  for (int c = threadIdx.x; c < sampling::kChunks; c += blockDim.x) {
    cs[c] = sampling::chunk_sum(row, V, c, out, 0);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const int err = sampling::sample_row(row, V, ns, replacement, key, r, cs, out + r * ns);
    if (err) atomicCAS(status, 0, err);
  }
}

// Many draws with replacement (backend/sampling.h's prefix sums): one block
// of kChunks threads per row of the batch builds them (last_c -1: an
// invalid row), then one thread per draw searches them.
template <typename T>
__global__ void prefix_kernel(const T* p, int64_t V, int64_t row0, double* acc, double* run, int64_t* last,
                              int* last_c, int* status) {
  __shared__ double cs[sampling::kChunks];
  const int64_t b = blockIdx.x;
  const T* row = p + (row0 + b) * V;
  for (int c = threadIdx.x; c < sampling::kChunks; c += blockDim.x) {
    cs[c] = sampling::chunk_sum(row, V, c, static_cast<const int64_t*>(nullptr), 0);
    sampling::chunk_prefix(row, V, c, acc + b * V, last + b * sampling::kChunks);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int lc = 0;
    const int err = sampling::run_sums(cs, run + b * (sampling::kChunks + 1), lc);
    if (err) atomicCAS(status, 0, err);
    last_c[b] = err ? -1 : lc;
  }
}

__global__ void draw_prefix_kernel(int64_t V, int64_t ns, int64_t row0, int64_t nb, uint64_t key, const double* acc,
                                   const double* run, const int64_t* last, const int* last_c, int64_t* out) {
  PF_GRID_STRIDE(e, nb * ns) {
    const int64_t b = e / ns, s = e % ns;
    int64_t pick = 0;  // an invalid row raises at the end of the evaluation
    if (last_c[b] >= 0) {
      const sampling::Prefix x{run + b * (sampling::kChunks + 1), acc + b * V, last + b * sampling::kChunks,
                               last_c[b]};
      pick = sampling::draw_by_prefix(x, V, key, row0 + b, ns, s);
    }
    out[(row0 + b) * ns + s] = pick;
  }
}

template <typename T>
void draw_with_prefix(DeviceContext& ctx, const T* p, int64_t R, int64_t V, int64_t ns, uint64_t key, int* status,
                      int64_t* out) {
  constexpr int64_t C = sampling::kChunks;
  const size_t row_bytes = sizeof(double) * size_t(V + C + 1) + sizeof(int64_t) * C + sizeof(int);
  const int64_t batch = std::max<int64_t>(1, std::min<int64_t>(R, kScratchBytes / row_bytes));
  auto acc = temp_buffer(ctx, sizeof(double) * size_t(batch) * V);
  auto run = temp_buffer(ctx, sizeof(double) * size_t(batch) * (C + 1));
  auto last = temp_buffer(ctx, sizeof(int64_t) * size_t(batch) * C);
  auto last_c = temp_buffer(ctx, sizeof(int) * size_t(batch));
  for (int64_t r0 = 0; r0 < R; r0 += batch) {
    const int64_t nb = std::min(batch, R - r0);
    prefix_kernel<T><<<static_cast<unsigned>(nb), sampling::kChunks, 0, ctx.stream>>>(
        p, V, r0, static_cast<double*>(acc->ptr), static_cast<double*>(run->ptr), static_cast<int64_t*>(last->ptr),
        static_cast<int*>(last_c->ptr), status);
    PF_HIP_CHECK_LAUNCH();
    draw_prefix_kernel<<<grid_for(ctx, nb * ns, kThreads), kThreads, 0, ctx.stream>>>(
        V, ns, r0, nb, key, static_cast<const double*>(acc->ptr), static_cast<const double*>(run->ptr),
        static_cast<const int64_t*>(last->ptr), static_cast<const int*>(last_c->ptr), out);
    PF_HIP_CHECK_LAUNCH();
  }
}

// The sort keys of the race (backend/sampling.h); an invalid weight sets
// status to 1 and sorts last.
template <typename T>
struct RaceKeys {
  using K = double;
  const T* p;
  int64_t V;
  uint64_t key;
  int* status;
  __device__ double operator()(int64_t row, int64_t i) const {
    double k;
    sampling::race_keys<1>(p, key, row, V, i, &k);
    if (k < 0.0) {
      atomicCAS(status, 0, 1);
      return static_cast<double>(INFINITY);
    }
    return k;
  }
};

// After the race's sort: a row whose first draw has weight 0 has none
// positive (2), one whose last draw has weight 0 fewer than ns (3).
template <typename T>
__global__ void race_check_kernel(const T* p, const int64_t* out, int64_t R, int64_t V, int64_t ns, int* status) {
  PF_GRID_STRIDE(r, R) {
    const auto w = [&](int64_t s) { return static_cast<float>(p[r * V + out[r * ns + s]]) > 0.0f; };
    if (!w(0)) atomicCAS(status, 0, 2);
    else if (!w(ns - 1)) atomicCAS(status, 0, 3);
  }
}

}  // namespace
}  // namespace pyflame::backend::rocm

namespace pyflame {

using namespace backend::rocm;

void ArgReduce::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const LineShape ls = line_shape(in[0].shape(), axis);
  const int64_t lines = ls.outer * ls.inner;
  dispatch(in[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    arg_reduce_kernel<T><<<static_cast<unsigned>(lines), kArgThreads, 0, ctx.stream>>>(
        in[0].data<T>(), out.data<int64_t>(), ls.n, ls.inner, is_max);
    PF_HIP_CHECK_LAUNCH();
  });
}

void ArgSort::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const int64_t n = in[0].shape().back(), rows = in[0].size() / n;
  dispatch(in[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    sort_rows(ctx, ValueKeys<T>{in[0].data<T>(), n}, rows, n, n, descending, out.data<int64_t>());
  });
}

void Cumsum::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const LineShape ls = line_shape(out.shape(), axis);
  const int64_t lines = ls.outer * ls.inner;
  dispatch(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (ls.inner == 1 && ls.n >= kBlockScanMin) {
      cumsum_rows_kernel<T><<<static_cast<unsigned>(lines), kScanThreads, 0, ctx.stream>>>(
          in[0].data<T>(), out.data<T>(), ls.n, reverse);
    } else {  // one thread per line
      cumsum_kernel<T><<<grid_for(ctx, lines, kThreads), kThreads, 0, ctx.stream>>>(
          in[0].data<T>(), out.data<T>(), lines, ls.n, ls.inner, reverse);
    }
    PF_HIP_CHECK_LAUNCH();
  });
}

void Multinomial::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const int64_t R = in[0].shape()[0], V = in[0].shape()[1], ns = num_samples;
  // The kernels' status code (an int in the low half of a zeroed word: both
  // platforms are little-endian), read at the end of the evaluation.
  int* status = reinterpret_cast<int*>(deferred_check(ctx, 1, [](const int64_t* w) {
    throw RuntimeError(multinomial_error(static_cast<int>(w[0])));
  }));
  dispatch_float(in[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = in[0].data<T>();
    int64_t* o = out.data<int64_t>();
    if (sampling::use_prefix(replacement, ns)) {
      draw_with_prefix(ctx, p, R, V, ns, key, status, o);
      return;
    }
    if (!sampling::use_race(replacement, ns)) {
      multinomial_kernel<T><<<static_cast<unsigned>(R), sampling::kChunks, 0, ctx.stream>>>(p, o, V, ns, replacement,
                                                                                           key, status);
      PF_HIP_CHECK_LAUNCH();
      return;
    }
    sort_rows(ctx, RaceKeys<T>{p, V, key, status}, R, V, ns, false, o);
    race_check_kernel<T><<<grid_for(ctx, R, kThreads), kThreads, 0, ctx.stream>>>(p, o, R, V, ns, status);
    PF_HIP_CHECK_LAUNCH();
  });
}

}  // namespace pyflame
