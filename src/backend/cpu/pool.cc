// Max / average pooling and adaptive average / max pooling on the CPU: direct
// loops over (N*C planes x output rows), 1 to 3 spatial axes through one 3-d
// implementation. Max pooling propagates NaN; averages accumulate in double.
// Their input gradients scatter each output's cotangent within its plane.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "backend/cpu/conv_utils.h"
#include "ir/primitives.h"

namespace pyflame {

namespace {

cpu::Geom3 pool_geom3(const Pool& p, const Shape& in_shape, const Shape& out_shape) {
  cpu::Geom3 G;
  cpu::spatial3(in_shape, G.in);
  cpu::spatial3(out_shape, G.out);
  const int nsp = p.nspatial(), off = 3 - nsp;
  for (int d = 0; d < nsp; ++d) {
    G.k[off + d] = p.kernel[d];
    G.s[off + d] = p.stride[d];
    G.p[off + d] = p.padding[d];
    G.d[off + d] = p.dilation[d];
  }
  return G;
}

// An average-pooling window starting at (z0, y0, x0): the part inside the
// input, [za, zb) x [ya, yb) x [xa, xb), and PyTorch's divisor (the window
// clipped to the padded input, or without count_include_pad to the input).
struct AvgWindow {
  int64_t za, zb, ya, yb, xa, xb, divisor, inside;
  AvgWindow(const Pool& P, const cpu::Geom3& G, int64_t z0, int64_t y0, int64_t x0) {
    const int64_t z1 = std::min(z0 + G.k[0], G.in[0] + G.p[0]);
    const int64_t y1 = std::min(y0 + G.k[1], G.in[1] + G.p[1]);
    const int64_t x1 = std::min(x0 + G.k[2], G.in[2] + G.p[2]);
    const int64_t padded = (z1 - z0) * (y1 - y0) * (x1 - x0);
    za = std::max<int64_t>(z0, 0), zb = std::min(z1, G.in[0]);
    ya = std::max<int64_t>(y0, 0), yb = std::min(y1, G.in[1]);
    xa = std::max<int64_t>(x0, 0), xb = std::min(x1, G.in[2]);
    inside = std::max<int64_t>(zb - za, 0) * std::max<int64_t>(yb - ya, 0) * std::max<int64_t>(xb - xa, 0);
    divisor = P.divisor_override ? P.divisor_override : P.count_include_pad ? padded : inside;
  }
};

// A max-pooling window starting at (z0, y0, x0): its first maximum in scan
// order, NaN taking over (PyTorch's choice), as the value (-inf when the
// window holds no input) and the offset in the plane (-1).
template <typename T>
std::pair<cpu::acc_float_t<T>, int64_t> window_max(const cpu::Geom3& G, const T* xp, int64_t z0, int64_t y0,
                                     int64_t x0) {
  cpu::acc_float_t<T> m = -std::numeric_limits<cpu::acc_float_t<T>>::infinity();
  int64_t arg = -1;
  for (int64_t a = 0; a < G.k[0]; ++a) {
    const int64_t iz = z0 + a * G.d[0];
    if (iz < 0 || iz >= G.in[0]) continue;
    for (int64_t b = 0; b < G.k[1]; ++b) {
      const int64_t iy = y0 + b * G.d[1];
      if (iy < 0 || iy >= G.in[1]) continue;
      const int64_t row = (iz * G.in[1] + iy) * G.in[2];
      for (int64_t c = 0; c < G.k[2]; ++c) {
        const int64_t ix = x0 + c * G.d[2];
        if (ix < 0 || ix >= G.in[2]) continue;
        const cpu::acc_float_t<T> v = static_cast<cpu::acc_float_t<T>>(xp[row + ix]);
        if (arg < 0 || v > m || std::isnan(v)) m = v, arg = row + ix;
      }
    }
  }
  return {m, arg};
}

// The max of the windows starting at x0 = ox * s - p for ox in [ox0, ox1),
// each wholly inside the input (from `base`, the window rows' origin): no
// bounds to check, and tap by tap over a chunk of outputs, a branch-free
// update the compiler vectorizes; the value window_max gives (NaN takes over).
template <typename T, int K>
void max_row_inside(const cpu::Geom3& G, const T* base, T* yp, int64_t ox0, int64_t ox1) {
  using F = cpu::acc_float_t<T>;
  constexpr int64_t kChunk = 64;
  const int64_t kz = G.k[0], ky = G.k[1], kx = K ? K : G.k[2];
  const int64_t sz = G.d[0] * G.in[1] * G.in[2], sy = G.d[1] * G.in[2], sx = G.d[2], s = G.s[2];
  F m[kChunk];
  for (int64_t c0 = ox0; c0 < ox1; c0 += kChunk) {
    const int64_t n = std::min(kChunk, ox1 - c0);
    const T* w = base + c0 * s - G.p[2];
    for (int64_t i = 0; i < n; ++i) m[i] = F(w[i * s]);
    for (int64_t a = 0; a < kz; ++a) {
      for (int64_t b = 0; b < ky; ++b) {
        for (int64_t c = 0; c < kx; ++c) {
          const T* r = w + a * sz + b * sy + c * sx;
          for (int64_t i = 0; i < n; ++i) {
            const F v = F(r[i * s]);
            m[i] = (v > m[i] || v != v) ? v : m[i];
          }
        }
      }
    }
    for (int64_t i = 0; i < n; ++i) yp[c0 + i] = T(m[i]);
  }
}

// Outputs [ox0, ox1) of a row whose windows lie inside the input along x.
void interior_x(const cpu::Geom3& G, int64_t& ox0, int64_t& ox1) {
  const int64_t span = (G.k[2] - 1) * G.d[2];
  ox0 = std::min(G.out[2], (G.p[2] + G.s[2] - 1) / G.s[2]);
  ox1 = G.in[2] - span + G.p[2] <= 0 ? 0 : (G.in[2] - span + G.p[2] - 1) / G.s[2] + 1;
  ox1 = std::max(ox0, std::min(ox1, G.out[2]));
}

template <typename T>
void pool_typed(const Pool& P, const Tensor& x, Tensor& out) {
  const cpu::Geom3 G = pool_geom3(P, x.shape(), out.shape());
  const int64_t planes = out.shape(0) * out.shape(1), ivol = G.ivol(), ovol = G.ovol();
  const int64_t rows = planes * G.out[0] * G.out[1];
  const T* src = x.data<T>();
  T* dst = out.data<T>();
  const bool is_max = P.kind == PoolKind::Max;
  cpu::parallel_for(rows, std::max<int64_t>(1, 1024 / std::max<int64_t>(G.out[2] * G.kvol(), 1)),
                    [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const int64_t oy = r % G.out[1], oz = (r / G.out[1]) % G.out[0], plane = r / (G.out[1] * G.out[0]);
      const T* xp = src + plane * ivol;
      T* yp = dst + plane * ovol + (oz * G.out[1] + oy) * G.out[2];
      const int64_t z0 = oz * G.s[0] - G.p[0], y0 = oy * G.s[1] - G.p[1];
      int64_t in0 = 0, in1 = 0;  // the outputs whose windows are wholly inside
      if (is_max && z0 >= 0 && z0 + (G.k[0] - 1) * G.d[0] < G.in[0] && y0 >= 0 &&
          y0 + (G.k[1] - 1) * G.d[1] < G.in[1]) {
        interior_x(G, in0, in1);
        const T* base = xp + (z0 * G.in[1] + y0) * G.in[2];
        if (G.k[2] == 2) max_row_inside<T, 2>(G, base, yp, in0, in1);
        else if (G.k[2] == 3) max_row_inside<T, 3>(G, base, yp, in0, in1);
        else max_row_inside<T, 0>(G, base, yp, in0, in1);
      }
      for (int64_t ox = 0; ox < G.out[2]; ++ox) {
        if (ox == in0 && in1 > in0) ox = in1;
        if (ox >= G.out[2]) break;
        const int64_t x0 = ox * G.s[2] - G.p[2];
        if (is_max) {
          yp[ox] = T(window_max(G, xp, z0, y0, x0).first);
        } else {
          const AvgWindow w(P, G, z0, y0, x0);
          double sum = 0.0;
          for (int64_t iz = w.za; iz < w.zb; ++iz) {
            for (int64_t iy = w.ya; iy < w.yb; ++iy) {
              const T* row = xp + (iz * G.in[1] + iy) * G.in[2];
              for (int64_t ix = w.xa; ix < w.xb; ++ix) sum += static_cast<cpu::acc_float_t<T>>(row[ix]);
            }
          }
          yp[ox] = T(static_cast<cpu::acc_float_t<T>>(sum / static_cast<double>(w.divisor)));
        }
      }
    }
  });
}

template <typename T>
void adaptive_typed(const Tensor& x, Tensor& out, bool is_max) {
  int64_t in[3], o[3];
  cpu::spatial3(x.shape(), in);
  cpu::spatial3(out.shape(), o);
  const int64_t planes = out.shape(0) * out.shape(1), ivol = in[0] * in[1] * in[2], ovol = o[0] * o[1] * o[2];
  const int64_t rows = planes * o[0] * o[1];
  const T* src = x.data<T>();
  T* dst = out.data<T>();
  auto lo = [](int64_t i, int64_t I, int64_t O) { return (i * I) / O; };
  auto hi = [](int64_t i, int64_t I, int64_t O) { return ((i + 1) * I + O - 1) / O; };
  cpu::parallel_for(rows, 16, [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const int64_t oy = r % o[1], oz = (r / o[1]) % o[0], plane = r / (o[1] * o[0]);
      const T* xp = src + plane * ivol;
      T* yp = dst + plane * ovol + (oz * o[1] + oy) * o[2];
      const int64_t za = lo(oz, in[0], o[0]), zb = hi(oz, in[0], o[0]);
      const int64_t ya = lo(oy, in[1], o[1]), yb = hi(oy, in[1], o[1]);
      for (int64_t ox = 0; ox < o[2]; ++ox) {
        const int64_t xa = lo(ox, in[2], o[2]), xb = hi(ox, in[2], o[2]);
        double sum = 0.0;
        cpu::acc_float_t<T> m = -std::numeric_limits<cpu::acc_float_t<T>>::infinity();
        for (int64_t iz = za; iz < zb; ++iz) {
          for (int64_t iy = ya; iy < yb; ++iy) {
            const T* row = xp + (iz * in[1] + iy) * in[2];
            for (int64_t ix = xa; ix < xb; ++ix) {
              const cpu::acc_float_t<T> v = static_cast<cpu::acc_float_t<T>>(row[ix]);
              sum += v;
              if (v > m || std::isnan(v)) m = v;
            }
          }
        }
        yp[ox] = is_max ? T(m) : T(static_cast<cpu::acc_float_t<T>>(sum / static_cast<double>((zb - za) * (yb - ya) * (xb - xa))));
      }
    }
  });
}

// The input gradient, one (n, c) plane per task (windows overlap only
// within a plane): max sends each output's cotangent to its window's
// argmax, average spreads it over the window, accumulating in float
// (double for float64).
// Input gradients: for each (N*C) plane, scatter(plane, acc) adds the
// plane's output cotangents into a zeroed float32 (float64: double) accumulator of the input
// plane's size, which is then stored into dx.
template <typename T, typename F>
void scatter_planes(int64_t planes, int64_t ivol, T* ds, F&& scatter) {
  cpu::parallel_for(planes, 1, [&](int64_t pb, int64_t pe) {
    std::vector<cpu::acc_float_t<T>> acc(ivol);
    for (int64_t plane = pb; plane < pe; ++plane) {
      std::fill(acc.begin(), acc.end(), cpu::acc_float_t<T>(0));
      scatter(plane, acc.data());
      T* dp = ds + plane * ivol;
      for (int64_t i = 0; i < ivol; ++i) dp[i] = T(acc[i]);
    }
  });
}

template <typename T>
void pool_grad_typed(const Pool& P, const Tensor& x, const Tensor& gy, Tensor& dx) {
  const cpu::Geom3 G = pool_geom3(P, x.shape(), gy.shape());
  const int64_t planes = x.shape(0) * x.shape(1), ivol = G.ivol(), ovol = G.ovol();
  const T* xs = x.data<T>();
  const T* gs = gy.data<T>();
  T* ds = dx.data<T>();
  const bool is_max = P.kind == PoolKind::Max;
  scatter_planes(planes, ivol, ds, [&](int64_t plane, cpu::acc_float_t<T>* acc) {
    const T* xp = xs + plane * ivol;
    const T* gp = gs + plane * ovol;
    for (int64_t o = 0; o < ovol; ++o) {
      const int64_t ox = o % G.out[2], oy = (o / G.out[2]) % G.out[1], oz = o / (G.out[2] * G.out[1]);
      const int64_t z0 = oz * G.s[0] - G.p[0], y0 = oy * G.s[1] - G.p[1], x0 = ox * G.s[2] - G.p[2];
      const cpu::acc_float_t<T> g = static_cast<cpu::acc_float_t<T>>(gp[o]);
      if (is_max) {
        const int64_t arg = window_max(G, xp, z0, y0, x0).second;
        if (arg >= 0) acc[arg] += g;
      } else {
        const AvgWindow w(P, G, z0, y0, x0);
        if (w.inside == 0) continue;
        const cpu::acc_float_t<T> share = g / static_cast<cpu::acc_float_t<T>>(w.divisor);
        for (int64_t iz = w.za; iz < w.zb; ++iz) {
          for (int64_t iy = w.ya; iy < w.yb; ++iy) {
            cpu::acc_float_t<T>* row = acc + (iz * G.in[1] + iy) * G.in[2];
            for (int64_t ix = w.xa; ix < w.xb; ++ix) row[ix] += share;
          }
        }
      }
    }
  });
}

template <typename T>
void adaptive_grad_typed(const Tensor& x, const Tensor& gy, Tensor& dx, bool is_max) {
  int64_t in[3], o[3];
  cpu::spatial3(x.shape(), in);
  cpu::spatial3(gy.shape(), o);
  const int64_t planes = x.shape(0) * x.shape(1), ivol = in[0] * in[1] * in[2], ovol = o[0] * o[1] * o[2];
  const T* xs = x.data<T>();
  const T* gs = gy.data<T>();
  T* ds = dx.data<T>();
  auto lo = [](int64_t i, int64_t I, int64_t O) { return (i * I) / O; };
  auto hi = [](int64_t i, int64_t I, int64_t O) { return ((i + 1) * I + O - 1) / O; };
  scatter_planes(planes, ivol, ds, [&](int64_t plane, cpu::acc_float_t<T>* acc) {
    const T* xp = xs + plane * ivol;
    const T* gp = gs + plane * ovol;
    for (int64_t q = 0; q < ovol; ++q) {
      const int64_t ox = q % o[2], oy = (q / o[2]) % o[1], oz = q / (o[2] * o[1]);
      const int64_t za = lo(oz, in[0], o[0]), zb = hi(oz, in[0], o[0]);
      const int64_t ya = lo(oy, in[1], o[1]), yb = hi(oy, in[1], o[1]);
      const int64_t xa = lo(ox, in[2], o[2]), xb = hi(ox, in[2], o[2]);
      const cpu::acc_float_t<T> g = static_cast<cpu::acc_float_t<T>>(gp[q]);
      if (is_max) {
        int64_t arg = -1;
        cpu::acc_float_t<T> m = cpu::acc_float_t<T>(0);
        for (int64_t iz = za; iz < zb; ++iz) {
          for (int64_t iy = ya; iy < yb; ++iy) {
            for (int64_t ix = xa; ix < xb; ++ix) {
              const int64_t at = (iz * in[1] + iy) * in[2] + ix;
              const cpu::acc_float_t<T> v = static_cast<cpu::acc_float_t<T>>(xp[at]);
              if (arg < 0 || v > m || std::isnan(v)) m = v, arg = at;
            }
          }
        }
        if (arg >= 0) acc[arg] += g;
      } else {
        const cpu::acc_float_t<T> share = g / static_cast<cpu::acc_float_t<T>>((zb - za) * (yb - ya) * (xb - xa));
        for (int64_t iz = za; iz < zb; ++iz) {
          for (int64_t iy = ya; iy < yb; ++iy) {
            cpu::acc_float_t<T>* row = acc + (iz * in[1] + iy) * in[2];
            for (int64_t ix = xa; ix < xb; ++ix) row[ix] += share;
          }
        }
      }
    }
  });
}

}  // namespace

void PoolGrad::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  cpu::dispatch_float(out.dtype(), [&](auto tag) { pool_grad_typed<decltype(tag)>(pool, in[0], in[2], out); });
}

void AdaptivePoolGrad::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  cpu::dispatch_float(out.dtype(), [&](auto tag) {
    adaptive_grad_typed<decltype(tag)>(in[0], in[1], out, kind == PoolKind::Max);
  });
}

void Pool::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  cpu::dispatch_float(out.dtype(), [&](auto tag) { pool_typed<decltype(tag)>(*this, in[0], out); });
}

void AdaptivePool::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  cpu::dispatch_float(out.dtype(), [&](auto tag) { adaptive_typed<decltype(tag)>(in[0], out, kind == PoolKind::Max); });
}

}  // namespace pyflame
