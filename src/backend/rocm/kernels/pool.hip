// Pooling on the GPU: average pooling through the DNN library where it
// expresses the problem exactly (no dilation, floor-rule output size, no
// divisor override); our own kernels for the rest (dilation, ceil_mode
// windows, divisor_override), for every max pooling (a -inf identity and NaN
// propagation, which the libraries lack) and for adaptive pooling. 1 to 3
// spatial axes through one 3-d indexing (missing leading axes of size 1).
// Max pooling with a 2- or 3-wide stride-2 window along x (any window
// height, stride, dilation and padding along y, padding along x, no x
// dilation, a depth window of one plane) and int32-sized tensors runs the
// row kernel: V consecutive outputs of one row per thread from one register
// copy of their input columns (loads up to 16 bytes wide, as the columns'
// alignment allows), 32-bit indices with multiply-shift division; the same
// comparisons in the same order as the generic kernel, so bit-identical.
// Input gradients: average pooling through the library where the forward
// pass used it, gather kernels for the rest (max pooling always, so that
// ties follow PyTorch's first-maximum rule).
#include <algorithm>
#include <optional>

#include "backend/rocm/dnn.h"
#include "backend/rocm/kernels/common.h"

namespace pyflame::backend::rocm {

namespace {

__device__ inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
__device__ inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

struct PoolGeom {
  int64_t in[3], out[3], k[3], s[3], p[3], d[3];
  int64_t divisor;  // non-zero: replaces the window divisor
  bool include_pad;
};

PoolGeom pool_geom(const Pool& P, const Shape& xs, const Shape& ys) {
  PoolGeom g;
  for (int i = 0; i < 3; ++i) g.in[i] = g.out[i] = g.k[i] = g.s[i] = g.d[i] = 1, g.p[i] = 0;
  const int nsp = P.nspatial(), off = 3 - nsp;
  for (int i = 0; i < nsp; ++i) {
    g.in[off + i] = xs[2 + i];
    g.out[off + i] = ys[2 + i];
    g.k[off + i] = P.kernel[i];
    g.s[off + i] = P.stride[i];
    g.p[off + i] = P.padding[i];
    g.d[off + i] = P.dilation[i];
  }
  g.divisor = P.divisor_override;
  g.include_pad = P.count_include_pad;
  return g;
}

// One thread per output element; NaN propagates (as PyTorch).
template <typename T>
__global__ void max_pool_kernel(const T* x, T* y, PoolGeom g, int64_t total) {
  PF_GRID_STRIDE(i, total) {
    int64_t r = i;
    const int64_t ox = r % g.out[2];
    r /= g.out[2];
    const int64_t oy = r % g.out[1];
    r /= g.out[1];
    const int64_t oz = r % g.out[0];
    const int64_t plane = r / g.out[0];
    const T* xp = x + plane * g.in[0] * g.in[1] * g.in[2];
    const int64_t z0 = oz * g.s[0] - g.p[0], y0 = oy * g.s[1] - g.p[1], x0 = ox * g.s[2] - g.p[2];
    acc_float_t<T> m = -INFINITY;
    for (int64_t a = 0; a < g.k[0]; ++a) {
      const int64_t iz = z0 + a * g.d[0];
      if (iz < 0 || iz >= g.in[0]) continue;
      for (int64_t b = 0; b < g.k[1]; ++b) {
        const int64_t iy = y0 + b * g.d[1];
        if (iy < 0 || iy >= g.in[1]) continue;
        const T* row = xp + (iz * g.in[1] + iy) * g.in[2];
        for (int64_t c = 0; c < g.k[2]; ++c) {
          const int64_t ix = x0 + c * g.d[2];
          if (ix < 0 || ix >= g.in[2]) continue;
          const acc_float_t<T> v = static_cast<acc_float_t<T>>(row[ix]);
          if (v > m || v != v) m = v;
        }
      }
    }
    y[i] = T(m);
  }
}

// ---- the row kernel of max pooling (see the top comment).

// x / d for x < 2^31 without a division instruction (Granlund-Montgomery, as
// PyTorch's IntDivider): q = (umulhi(x, m) + x) >> s, exact for d in [1, 2^31].
struct FastDiv {
  uint32_t d, m, s;
};

FastDiv fast_div(uint32_t d) {
  uint32_t s = 0;
  while ((uint64_t(1) << s) < d) ++s;
  const uint64_t m = (uint64_t(1) << 32) * ((uint64_t(1) << s) - d) / d + 1;
  return {d, static_cast<uint32_t>(m), s};
}

__device__ inline uint32_t div_of(uint32_t x, const FastDiv& f) { return (__umulhi(x, f.m) + x) >> f.s; }

// Planes fold N, C and the depth; the x window and stride are template
// arguments of the kernel.
struct RowGeom {
  int32_t in_h, in_w, out_w, kh, sy, py, dy, px;
  FastDiv chunks;  // threads per output row (V outputs each)
  FastDiv out_h;   // output rows per plane
};

// Elements per vector access of n consecutive T: at most 16 bytes, dividing n.
template <typename T, int n>
constexpr int pack_len() {
  int p = 16 / static_cast<int>(sizeof(T));
  while (p > 1 && n % p) p /= 2;
  return p;
}

template <typename T>
__device__ inline bool aligned_to(const T* p, int elems) {
  return reinterpret_cast<uintptr_t>(p) % (elems * sizeof(T)) == 0;
}

// L consecutive elements from p, in the widest packs of P, P/2, ... elements
// that p's alignment allows.
template <typename T, int L, int P>
__device__ inline void load_packed(const T* p, acc_float_t<T> (&seg)[L]) {
  if constexpr (P > 1) {
    if (!aligned_to(p, P)) return load_packed<T, L, P / 2>(p, seg);
  }
#pragma unroll
  for (int k = 0; k < L; k += P) {
    const Pack<T, P> v = *reinterpret_cast<const Pack<T, P>*>(p + k);
#pragma unroll
    for (int j = 0; j < P; ++j) seg[k + j] = static_cast<acc_float_t<T>>(v.v[j]);
  }
}

template <typename T, int V, int P>
__device__ inline void store_packed(T* p, const acc_float_t<T> (&m)[V]) {
  if constexpr (P > 1) {
    if (!aligned_to(p, P)) return store_packed<T, V, P / 2>(p, m);
  }
#pragma unroll
  for (int k = 0; k < V; k += P) {
    Pack<T, P> v;
#pragma unroll
    for (int j = 0; j < P; ++j) v.v[j] = T(m[k + j]);
    *reinterpret_cast<Pack<T, P>*>(p + k) = v;
  }
}

// Input columns [x0, x0 + L) of one row; -inf outside [0, w), which leaves a
// maximum unchanged exactly as skipping the tap does.
template <typename T, int L>
__device__ inline void load_cols(const T* row, int32_t x0, int32_t w, acc_float_t<T> (&seg)[L]) {
  using A = acc_float_t<T>;
  if (x0 >= 0 && x0 + L <= w) return load_packed<T, L, pack_len<T, L>()>(row + x0, seg);
#pragma unroll
  for (int j = 0; j < L; ++j) {
    const int32_t ix = x0 + j;
    seg[j] = ix >= 0 && ix < w ? static_cast<A>(row[ix]) : A(-INFINITY);
  }
}

// Outputs [ox0, ox0 + V) of one row, those below w.
template <typename T, int V>
__device__ inline void store_cols(T* row, int32_t ox0, int32_t w, const acc_float_t<T> (&m)[V]) {
  if (ox0 + V <= w) return store_packed<T, V, pack_len<T, V>()>(row + ox0, m);
#pragma unroll
  for (int j = 0; j < V; ++j) {
    if (ox0 + j < w) row[ox0 + j] = T(m[j]);
  }
}

// Window row iy's columns, or -inf (no taps) where iy is outside the input.
template <typename T, int L>
__device__ inline void load_row(const T* xp, int32_t iy, const RowGeom& g, int32_t x0, acc_float_t<T> (&seg)[L]) {
  if (iy >= 0 && iy < g.in_h) return load_cols<T, L>(xp + iy * g.in_w, x0, g.in_w, seg);
#pragma unroll
  for (int j = 0; j < L; ++j) seg[j] = -INFINITY;
}

// One window row's taps into the V maxima, left to right.
template <int KW, int SX, int V, int L, typename A>
__device__ inline void take_max(A (&m)[V], const A (&seg)[L]) {
#pragma unroll
  for (int j = 0; j < V; ++j) {
#pragma unroll
    for (int c = 0; c < KW; ++c) {
      const A v = seg[j * SX + c];
      if (v > m[j] || v != v) m[j] = v;
    }
  }
}

// One thread per V consecutive outputs of an output row; per output the taps
// run row by row, left to right, as in max_pool_kernel. Window rows go two
// at a time, both loaded before either is compared so that their loads are
// in flight together (a second row past the window is -inf: no taps).
template <typename T, int KW, int SX, int V>
__global__ void max_pool_rows(const T* __restrict__ x, T* __restrict__ y, RowGeom g, uint32_t total) {
  using A = acc_float_t<T>;
  constexpr int L = (V - 1) * SX + KW;  // input columns of V windows
  for (uint32_t t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += gridDim.x * blockDim.x) {
    const uint32_t row = div_of(t, g.chunks);  // plane * out_h + oy
    const int32_t ox0 = static_cast<int32_t>(t - row * g.chunks.d) * V;
    const uint32_t plane = div_of(row, g.out_h);
    const int32_t y0 = static_cast<int32_t>(row - plane * g.out_h.d) * g.sy - g.py, x0 = ox0 * SX - g.px;
    const T* xp = x + plane * static_cast<uint32_t>(g.in_h * g.in_w);
    A m[V];
#pragma unroll
    for (int j = 0; j < V; ++j) m[j] = -INFINITY;
    for (int32_t b = 0; b < g.kh; b += 2) {
      A s0[L], s1[L];
      load_row<T, L>(xp, y0 + b * g.dy, g, x0, s0);
      load_row<T, L>(xp, b + 1 < g.kh ? y0 + (b + 1) * g.dy : -1, g, x0, s1);
      take_max<KW, SX>(m, s0);
      take_max<KW, SX>(m, s1);
    }
    store_cols<T, V>(y + row * static_cast<uint32_t>(g.out_w), ox0, g.out_w, m);
  }
}

// Outputs per thread: four (two of float64 with 2-wide windows), so that a
// 2-wide window row is one or two 16-byte loads.
template <typename T, int KW>
constexpr int outputs_per_thread() {
  return KW == 2 && sizeof(T) == 8 ? 2 : 4;
}

constexpr int64_t kI32 = int64_t(1) << 31;

// The row geometry, or nothing where the row kernel does not apply: a depth
// window other than one plane, x dilation, or indices beyond int32 (every
// window position is bounded by the padded input, which must fit).
std::optional<RowGeom> row_geom(const PoolGeom& g, int64_t in_size, int64_t out_size, int v) {
  if (g.k[0] != 1 || g.s[0] != 1 || g.p[0] != 0 || g.d[2] != 1) return std::nullopt;
  const int64_t chunks = (g.out[2] + v - 1) / v, rows = out_size / g.out[2];
  const int64_t reach_y = g.out[1] * g.s[1] + g.k[1] * g.d[1] + g.in[1] + g.p[1];
  const int64_t reach_x = (chunks * v + 1) * g.s[2] + g.k[2] + g.in[2] + g.p[2];
  if (in_size >= kI32 || out_size >= kI32 || rows * chunks >= kI32 || reach_y >= kI32 || reach_x >= kI32) {
    return std::nullopt;
  }
  auto i32 = [](int64_t n) { return static_cast<int32_t>(n); };
  return RowGeom{i32(g.in[1]), i32(g.in[2]), i32(g.out[2]), i32(g.k[1]), i32(g.s[1]), i32(g.p[1]), i32(g.d[1]),
                 i32(g.p[2]), fast_div(static_cast<uint32_t>(chunks)), fast_div(static_cast<uint32_t>(g.out[1]))};
}

template <typename T, int KW, int SX>
bool launch_rows(DeviceContext& ctx, const T* x, T* y, const PoolGeom& g, int64_t in_size, int64_t out_size) {
  constexpr int V = outputs_per_thread<T, KW>();
  const std::optional<RowGeom> r = row_geom(g, in_size, out_size, V);
  if (!r) return false;
  const uint32_t total = static_cast<uint32_t>(out_size / g.out[2] * r->chunks.d);
  max_pool_rows<T, KW, SX, V><<<grid_for(ctx, total, kThreads), kThreads, 0, ctx.stream>>>(x, y, *r, total);
  PF_HIP_CHECK_LAUNCH();
  return true;
}

// The row kernel where it applies (2- or 3-wide stride-2 x windows); false
// leaves the pooling to max_pool_kernel.
template <typename T>
bool max_pool_fast(DeviceContext& ctx, const T* x, T* y, const PoolGeom& g, int64_t in_size, int64_t out_size) {
  if (g.s[2] != 2 || (g.k[2] != 2 && g.k[2] != 3)) return false;
  return g.k[2] == 2 ? launch_rows<T, 2, 2>(ctx, x, y, g, in_size, out_size)
                     : launch_rows<T, 3, 2>(ctx, x, y, g, in_size, out_size);
}

// PyTorch's divisor: the window clipped to the padded input (or, without
// count_include_pad, to the input), unless overridden.
template <typename T>
__global__ void avg_pool_kernel(const T* x, T* y, PoolGeom g, int64_t total) {
  PF_GRID_STRIDE(i, total) {
    int64_t r = i;
    const int64_t ox = r % g.out[2];
    r /= g.out[2];
    const int64_t oy = r % g.out[1];
    r /= g.out[1];
    const int64_t oz = r % g.out[0];
    const int64_t plane = r / g.out[0];
    const T* xp = x + plane * g.in[0] * g.in[1] * g.in[2];
    const int64_t z0 = oz * g.s[0] - g.p[0], y0 = oy * g.s[1] - g.p[1], x0 = ox * g.s[2] - g.p[2];
    const int64_t z1 = imin(z0 + g.k[0], g.in[0] + g.p[0]), y1 = imin(y0 + g.k[1], g.in[1] + g.p[1]);
    const int64_t x1 = imin(x0 + g.k[2], g.in[2] + g.p[2]);
    const int64_t padded = (z1 - z0) * (y1 - y0) * (x1 - x0);
    const int64_t za = imax(z0, 0), zb = imin(z1, g.in[0]);
    const int64_t ya = imax(y0, 0), yb = imin(y1, g.in[1]);
    const int64_t xa = imax(x0, 0), xb = imin(x1, g.in[2]);
    acc_float_t<T> sum = acc_float_t<T>(0);
    for (int64_t iz = za; iz < zb; ++iz) {
      for (int64_t iy = ya; iy < yb; ++iy) {
        const T* row = xp + (iz * g.in[1] + iy) * g.in[2];
        for (int64_t ix = xa; ix < xb; ++ix) sum += static_cast<acc_float_t<T>>(row[ix]);
      }
    }
    const int64_t inside = imax(zb - za, 0) * imax(yb - ya, 0) * imax(xb - xa, 0);
    const int64_t div = g.divisor ? g.divisor : g.include_pad ? padded : inside;
    y[i] = T(sum / static_cast<acc_float_t<T>>(div));
  }
}

struct Adaptive3 {
  int64_t in[3], out[3];
};

template <typename T, bool kMax>
__global__ void adaptive_pool_kernel(const T* x, T* y, Adaptive3 g, int64_t total) {
  PF_GRID_STRIDE(i, total) {
    int64_t r = i;
    const int64_t ox = r % g.out[2];
    r /= g.out[2];
    const int64_t oy = r % g.out[1];
    r /= g.out[1];
    const int64_t oz = r % g.out[0];
    const int64_t plane = r / g.out[0];
    const T* xp = x + plane * g.in[0] * g.in[1] * g.in[2];
    const int64_t za = oz * g.in[0] / g.out[0], zb = ((oz + 1) * g.in[0] + g.out[0] - 1) / g.out[0];
    const int64_t ya = oy * g.in[1] / g.out[1], yb = ((oy + 1) * g.in[1] + g.out[1] - 1) / g.out[1];
    const int64_t xa = ox * g.in[2] / g.out[2], xb = ((ox + 1) * g.in[2] + g.out[2] - 1) / g.out[2];
    acc_float_t<T> acc = kMax ? -INFINITY : acc_float_t<T>(0);
    for (int64_t iz = za; iz < zb; ++iz) {
      for (int64_t iy = ya; iy < yb; ++iy) {
        const T* row = xp + (iz * g.in[1] + iy) * g.in[2];
        for (int64_t ix = xa; ix < xb; ++ix) {
          const acc_float_t<T> v = static_cast<acc_float_t<T>>(row[ix]);
          if (kMax) {
            if (v > acc || v != v) acc = v;
          } else {
            acc += v;
          }
        }
      }
    }
    y[i] = kMax ? T(acc) : T(acc / static_cast<acc_float_t<T>>((zb - za) * (yb - ya) * (xb - xa)));
  }
}

// ---- gradients: each output's window is recomputed (max: its argmax), and
// each input element gathers from the outputs whose windows hold it, so no
// two threads write one element (deterministic, no atomics).

// Flat in-plane index of each output window's first maximum (NaN taking
// over, as the forward kernels and PyTorch), -1 for a window with no input.
template <typename T>
__global__ void max_pool_argmax(const T* x, int64_t* arg, PoolGeom g, int64_t total) {
  PF_GRID_STRIDE(i, total) {
    int64_t r = i;
    const int64_t ox = r % g.out[2];
    r /= g.out[2];
    const int64_t oy = r % g.out[1];
    r /= g.out[1];
    const int64_t oz = r % g.out[0];
    const int64_t plane = r / g.out[0];
    const T* xp = x + plane * g.in[0] * g.in[1] * g.in[2];
    const int64_t z0 = oz * g.s[0] - g.p[0], y0 = oy * g.s[1] - g.p[1], x0 = ox * g.s[2] - g.p[2];
    int64_t best = -1;
    acc_float_t<T> m = acc_float_t<T>(0);
    for (int64_t a = 0; a < g.k[0]; ++a) {
      const int64_t iz = z0 + a * g.d[0];
      if (iz < 0 || iz >= g.in[0]) continue;
      for (int64_t b = 0; b < g.k[1]; ++b) {
        const int64_t iy = y0 + b * g.d[1];
        if (iy < 0 || iy >= g.in[1]) continue;
        for (int64_t c = 0; c < g.k[2]; ++c) {
          const int64_t ix = x0 + c * g.d[2];
          if (ix < 0 || ix >= g.in[2]) continue;
          const int64_t at = (iz * g.in[1] + iy) * g.in[2] + ix;
          const acc_float_t<T> v = static_cast<acc_float_t<T>>(xp[at]);
          if (best < 0 || v > m || v != v) m = v, best = at;
        }
      }
    }
    arg[i] = best;
  }
}

// The outputs along one axis whose windows hold input position i: tap t of
// output o sits at o * s - p + t * d. Writes up to k of them into o_list.
__device__ inline int window_outputs(int64_t i, int64_t out, int64_t k, int64_t s, int64_t p, int64_t d,
                                     int64_t* o_list, int cap) {
  int n = 0;
  for (int64_t t = 0; t < k && n < cap; ++t) {
    const int64_t num = i + p - t * d;
    if (num < 0) break;  // larger taps only go further left
    if (num % s) continue;
    const int64_t o = num / s;
    if (o < out) o_list[n++] = o;
  }
  return n;
}

// Input gradient of pooling, one thread per input element: the sum over the
// windows that hold it of (max) the output cotangent where it is the
// window's argmax, or (average) the cotangent over the window's divisor.
// Window candidates per axis are enumerated in chunks of kCands taps.
template <typename T, bool kMax>
__global__ void pool_grad_gather(const T* gy, const int64_t* arg, T* dx, PoolGeom g, int64_t total) {
  constexpr int kCands = 16;
  PF_GRID_STRIDE(i, total) {
    int64_t r = i;
    const int64_t ix = r % g.in[2];
    r /= g.in[2];
    const int64_t iy = r % g.in[1];
    r /= g.in[1];
    const int64_t iz = r % g.in[0];
    const int64_t plane = r / g.in[0];
    const int64_t self = (iz * g.in[1] + iy) * g.in[2] + ix;
    const int64_t ovol = g.out[0] * g.out[1] * g.out[2];
    const T* gp = gy + plane * ovol;
    acc_float_t<T> acc = acc_float_t<T>(0);
    // Taps are scanned per axis in chunks, so large kernels need no large arrays.
    for (int64_t ta = 0; ta < g.k[0]; ta += kCands) {
      int64_t oz[kCands];
      const int nz = window_outputs(iz, g.out[0], imin(kCands, g.k[0] - ta), g.s[0], g.p[0] - ta * g.d[0], g.d[0], oz,
                                    kCands);
      for (int a = 0; a < nz; ++a) {
        for (int64_t tb = 0; tb < g.k[1]; tb += kCands) {
          int64_t oy[kCands];
          const int ny = window_outputs(iy, g.out[1], imin(kCands, g.k[1] - tb), g.s[1], g.p[1] - tb * g.d[1], g.d[1],
                                        oy, kCands);
          for (int b = 0; b < ny; ++b) {
            for (int64_t tc = 0; tc < g.k[2]; tc += kCands) {
              int64_t ox[kCands];
              const int nx = window_outputs(ix, g.out[2], imin(kCands, g.k[2] - tc), g.s[2], g.p[2] - tc * g.d[2],
                                            g.d[2], ox, kCands);
              for (int c = 0; c < nx; ++c) {
                const int64_t o = (oz[a] * g.out[1] + oy[b]) * g.out[2] + ox[c];
                if (kMax) {
                  if (arg[plane * ovol + o] == self) acc += static_cast<acc_float_t<T>>(gp[o]);
                } else {
                  // The forward divisor of window o (avg pooling has no dilation).
                  const int64_t z0 = oz[a] * g.s[0] - g.p[0], y0 = oy[b] * g.s[1] - g.p[1];
                  const int64_t x0 = ox[c] * g.s[2] - g.p[2];
                  const int64_t z1 = imin(z0 + g.k[0], g.in[0] + g.p[0]), y1 = imin(y0 + g.k[1], g.in[1] + g.p[1]);
                  const int64_t x1 = imin(x0 + g.k[2], g.in[2] + g.p[2]);
                  int64_t div = g.divisor;
                  if (!div && g.include_pad) div = (z1 - z0) * (y1 - y0) * (x1 - x0);
                  if (!div) {
                    div = (imin(z1, g.in[0]) - imax(z0, 0)) * (imin(y1, g.in[1]) - imax(y0, 0)) *
                          (imin(x1, g.in[2]) - imax(x0, 0));
                  }
                  acc += static_cast<acc_float_t<T>>(gp[o]) / static_cast<acc_float_t<T>>(div);
                }
              }
            }
          }
        }
      }
    }
    dx[i] = T(acc);
  }
}

// Adaptive windows along one axis: output o covers [o*I/O, ceil((o+1)*I/O)),
// so input i lies in the windows of o in [floor(i*O/I), ceil((i+1)*O/I)).
__device__ inline int64_t adaptive_lo(int64_t o, int64_t I, int64_t O) { return o * I / O; }
__device__ inline int64_t adaptive_hi(int64_t o, int64_t I, int64_t O) { return ((o + 1) * I + O - 1) / O; }

template <typename T>
__global__ void adaptive_max_argmax(const T* x, int64_t* arg, Adaptive3 g, int64_t total) {
  PF_GRID_STRIDE(i, total) {
    int64_t r = i;
    const int64_t ox = r % g.out[2];
    r /= g.out[2];
    const int64_t oy = r % g.out[1];
    r /= g.out[1];
    const int64_t oz = r % g.out[0];
    const int64_t plane = r / g.out[0];
    const T* xp = x + plane * g.in[0] * g.in[1] * g.in[2];
    int64_t best = -1;
    acc_float_t<T> m = acc_float_t<T>(0);
    for (int64_t iz = adaptive_lo(oz, g.in[0], g.out[0]); iz < adaptive_hi(oz, g.in[0], g.out[0]); ++iz) {
      for (int64_t iy = adaptive_lo(oy, g.in[1], g.out[1]); iy < adaptive_hi(oy, g.in[1], g.out[1]); ++iy) {
        for (int64_t ix = adaptive_lo(ox, g.in[2], g.out[2]); ix < adaptive_hi(ox, g.in[2], g.out[2]); ++ix) {
          const int64_t at = (iz * g.in[1] + iy) * g.in[2] + ix;
          const acc_float_t<T> v = static_cast<acc_float_t<T>>(xp[at]);
          if (best < 0 || v > m || v != v) m = v, best = at;
        }
      }
    }
    arg[i] = best;
  }
}

template <typename T, bool kMax>
__global__ void adaptive_grad_gather(const T* gy, const int64_t* arg, T* dx, Adaptive3 g, int64_t total) {
  PF_GRID_STRIDE(i, total) {
    int64_t r = i;
    const int64_t ix = r % g.in[2];
    r /= g.in[2];
    const int64_t iy = r % g.in[1];
    r /= g.in[1];
    const int64_t iz = r % g.in[0];
    const int64_t plane = r / g.in[0];
    const int64_t self = (iz * g.in[1] + iy) * g.in[2] + ix;
    const int64_t ovol = g.out[0] * g.out[1] * g.out[2];
    const T* gp = gy + plane * ovol;
    acc_float_t<T> acc = acc_float_t<T>(0);
    // Inverting the window rule: the outputs whose windows hold i.
    const int64_t za = iz * g.out[0] / g.in[0], zb = ((iz + 1) * g.out[0] + g.in[0] - 1) / g.in[0];
    const int64_t ya = iy * g.out[1] / g.in[1], yb = ((iy + 1) * g.out[1] + g.in[1] - 1) / g.in[1];
    const int64_t xa = ix * g.out[2] / g.in[2], xb = ((ix + 1) * g.out[2] + g.in[2] - 1) / g.in[2];
    for (int64_t oz = za; oz < zb; ++oz) {
      for (int64_t oy = ya; oy < yb; ++oy) {
        for (int64_t ox = xa; ox < xb; ++ox) {
          const int64_t o = (oz * g.out[1] + oy) * g.out[2] + ox;
          if (kMax) {
            if (arg[plane * ovol + o] == self) acc += static_cast<acc_float_t<T>>(gp[o]);
          } else {
            const int64_t n = (adaptive_hi(oz, g.in[0], g.out[0]) - adaptive_lo(oz, g.in[0], g.out[0])) *
                              (adaptive_hi(oy, g.in[1], g.out[1]) - adaptive_lo(oy, g.in[1], g.out[1])) *
                              (adaptive_hi(ox, g.in[2], g.out[2]) - adaptive_lo(ox, g.in[2], g.out[2]));
            acc += static_cast<acc_float_t<T>>(gp[o]) / static_cast<acc_float_t<T>>(n);
          }
        }
      }
    }
    dx[i] = T(acc);
  }
}

Adaptive3 adaptive_geom(const Shape& xs, const Shape& ys) {
  Adaptive3 geo{{1, 1, 1}, {1, 1, 1}};
  const int nsp = static_cast<int>(xs.size()) - 2;
  for (int d = 0; d < nsp; ++d) {
    geo.in[3 - nsp + d] = xs[2 + d];
    geo.out[3 - nsp + d] = ys[2 + d];
  }
  return geo;
}

}  // namespace
}  // namespace pyflame::backend::rocm

namespace pyflame {

using namespace backend::rocm;

void Pool::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const Tensor& x = in[0];
  const bool no_dilation = std::all_of(dilation.begin(), dilation.end(), [](int64_t d) { return d == 1; });
  // Max pooling always runs our kernel: the DNN libraries start a window's
  // maximum at -FLT_MAX, so a window of -inf would give -3.4e38, not -inf.
  if (kind != PoolKind::Max && no_dilation && divisor_override == 0) {
    const dnn::PoolMode mode = count_include_pad ? dnn::PoolMode::AvgIncludePad : dnn::PoolMode::AvgExcludePad;
    if (dnn::pool_forward(ctx, out.dtype(), mode, x.shape(), x.raw_data(), out.shape(), out.raw_data(), kernel,
                          stride, padding)) {
      return;
    }
  }
  const PoolGeom geo = pool_geom(*this, x.shape(), out.shape());
  dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const unsigned grid = grid_for(ctx, out.size(), kThreads);
    if (kind == PoolKind::Max) {
      if (max_pool_fast<T>(ctx, x.data<T>(), out.data<T>(), geo, x.size(), out.size())) return;
      max_pool_kernel<T><<<grid, kThreads, 0, ctx.stream>>>(x.data<T>(), out.data<T>(), geo, out.size());
    } else {
      avg_pool_kernel<T><<<grid, kThreads, 0, ctx.stream>>>(x.data<T>(), out.data<T>(), geo, out.size());
    }
    PF_HIP_CHECK_LAUNCH();
  });
}

void AdaptivePool::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const Tensor& x = in[0];
  const Adaptive3 geo = adaptive_geom(x.shape(), out.shape());
  dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const unsigned grid = grid_for(ctx, out.size(), kThreads);
    if (kind == PoolKind::Max) {
      adaptive_pool_kernel<T, true><<<grid, kThreads, 0, ctx.stream>>>(x.data<T>(), out.data<T>(), geo, out.size());
    } else {
      adaptive_pool_kernel<T, false><<<grid, kThreads, 0, ctx.stream>>>(x.data<T>(), out.data<T>(), geo, out.size());
    }
    PF_HIP_CHECK_LAUNCH();
  });
}

}  // namespace pyflame

namespace pyflame {

using namespace backend::rocm;

// Average pooling goes through the library where the forward pass did (same
// conditions); max pooling and the rest run the gather kernels.
void PoolGrad::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const Tensor &x = in[0], &y = in[1], &gy = in[2];
  const Pool& P = pool;
  const bool no_dilation = std::all_of(P.dilation.begin(), P.dilation.end(), [](int64_t d) { return d == 1; });
  if (P.kind == PoolKind::Avg && no_dilation && P.divisor_override == 0) {
    const dnn::PoolMode mode = P.count_include_pad ? dnn::PoolMode::AvgIncludePad : dnn::PoolMode::AvgExcludePad;
    if (dnn::pool_backward(ctx, out.dtype(), mode, x.shape(), x.raw_data(), out.raw_data(), y.shape(), y.raw_data(),
                           gy.raw_data(), P.kernel, P.stride, P.padding)) {
      return;
    }
  }
  const PoolGeom geo = pool_geom(P, x.shape(), gy.shape());
  std::shared_ptr<Buffer> arg;
  if (P.kind == PoolKind::Max) arg = temp_buffer(ctx, std::max<size_t>(gy.size(), 1) * sizeof(int64_t));
  dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    int64_t* a = arg ? static_cast<int64_t*>(arg->ptr) : nullptr;
    if (a && gy.size()) {
      max_pool_argmax<T><<<grid_for(ctx, gy.size(), kThreads), kThreads, 0, ctx.stream>>>(x.data<T>(), a, geo,
                                                                                          gy.size());
      PF_HIP_CHECK_LAUNCH();
    }
    const unsigned grid = grid_for(ctx, out.size(), kThreads);
    if (a) {
      pool_grad_gather<T, true><<<grid, kThreads, 0, ctx.stream>>>(gy.data<T>(), a, out.data<T>(), geo, out.size());
    } else {
      pool_grad_gather<T, false><<<grid, kThreads, 0, ctx.stream>>>(gy.data<T>(), a, out.data<T>(), geo, out.size());
    }
    PF_HIP_CHECK_LAUNCH();
  });
}

void AdaptivePoolGrad::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const Tensor &x = in[0], &gy = in[1];
  const Adaptive3 geo = adaptive_geom(x.shape(), gy.shape());
  std::shared_ptr<Buffer> arg;
  if (kind == PoolKind::Max) arg = temp_buffer(ctx, std::max<size_t>(gy.size(), 1) * sizeof(int64_t));
  dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    int64_t* a = arg ? static_cast<int64_t*>(arg->ptr) : nullptr;
    if (a && gy.size()) {
      adaptive_max_argmax<T><<<grid_for(ctx, gy.size(), kThreads), kThreads, 0, ctx.stream>>>(x.data<T>(), a, geo,
                                                                                              gy.size());
      PF_HIP_CHECK_LAUNCH();
    }
    const unsigned grid = grid_for(ctx, out.size(), kThreads);
    if (a) {
      adaptive_grad_gather<T, true><<<grid, kThreads, 0, ctx.stream>>>(gy.data<T>(), a, out.data<T>(), geo,
                                                                        out.size());
    } else {
      adaptive_grad_gather<T, false><<<grid, kThreads, 0, ctx.stream>>>(gy.data<T>(), a, out.data<T>(), geo,
                                                                         out.size());
    }
    PF_HIP_CHECK_LAUNCH();
  });
}

}  // namespace pyflame
