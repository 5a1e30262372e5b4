// Pooling on the GPU: max / average pooling through the DNN library where
// it expresses the problem exactly (no dilation, floor-rule output size,
// no divisor override); our own kernels for the rest (dilation, ceil_mode
// windows, divisor_override) and for adaptive average and max pooling. 1 to 3
// spatial axes through one 3-d indexing (missing leading axes of size 1).
#include <algorithm>

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
    float m = -INFINITY;
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
          const float v = static_cast<float>(row[ix]);
          if (v > m || v != v) m = v;
        }
      }
    }
    y[i] = T(m);
  }
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
    float sum = 0.0f;
    for (int64_t iz = za; iz < zb; ++iz) {
      for (int64_t iy = ya; iy < yb; ++iy) {
        const T* row = xp + (iz * g.in[1] + iy) * g.in[2];
        for (int64_t ix = xa; ix < xb; ++ix) sum += static_cast<float>(row[ix]);
      }
    }
    const int64_t inside = imax(zb - za, 0) * imax(yb - ya, 0) * imax(xb - xa, 0);
    const int64_t div = g.divisor ? g.divisor : g.include_pad ? padded : inside;
    y[i] = T(sum / static_cast<float>(div));
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
    float acc = kMax ? -INFINITY : 0.0f;
    for (int64_t iz = za; iz < zb; ++iz) {
      for (int64_t iy = ya; iy < yb; ++iy) {
        const T* row = xp + (iz * g.in[1] + iy) * g.in[2];
        for (int64_t ix = xa; ix < xb; ++ix) {
          const float v = static_cast<float>(row[ix]);
          if (kMax) {
            if (v > acc || v != v) acc = v;
          } else {
            acc += v;
          }
        }
      }
    }
    y[i] = kMax ? T(acc) : T(acc / static_cast<float>((zb - za) * (yb - ya) * (xb - xa)));
  }
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
  if (no_dilation && divisor_override == 0) {
    const dnn::PoolMode mode = kind == PoolKind::Max ? dnn::PoolMode::Max
                               : count_include_pad  ? dnn::PoolMode::AvgIncludePad
                                                    : dnn::PoolMode::AvgExcludePad;
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
  Adaptive3 geo{{1, 1, 1}, {1, 1, 1}};
  const int nsp = x.ndim() - 2;
  for (int d = 0; d < nsp; ++d) {
    geo.in[3 - nsp + d] = x.shape(2 + d);
    geo.out[3 - nsp + d] = out.shape(2 + d);
  }
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
