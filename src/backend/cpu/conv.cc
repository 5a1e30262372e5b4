// Convolution on the CPU: im2col + OpenBLAS sgemm per (batch, group), for 1
// to 3 spatial axes through one 3-d implementation (missing leading axes
// have size 1). Transposed convolution is the matching sgemm + col2im; the
// weight gradient is im2col + sgemm against the output cotangent.
// 16-bit floats are widened to float32 (fp32 accumulation, as on the GPU).
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/conv_utils.h"
#include "ir/primitives.h"

namespace pyflame {

namespace {

using cpu::Geom3;

// Column buffers are filled for a range of output (or input) positions at a
// time: 2 MiB of columns, which stay in the core's cache while the GEMM reads
// them (a whole image's columns went through memory: 1.5-2x slower for a
// 3x3 convolution of 64 channels at 56x56).
constexpr int64_t kMaxColumnFloats = int64_t(1) << 19;

Geom3 conv_geom3(const ConvGeometry& g, const Shape& in_shape, const Shape& w_shape, const Shape& out_shape) {
  Geom3 G;
  const int nsp = g.nspatial(), off = 3 - nsp;
  for (int d = 0; d < nsp; ++d) {
    G.in[off + d] = in_shape[2 + d];
    G.out[off + d] = out_shape[2 + d];
    G.k[off + d] = w_shape[2 + d];
    G.s[off + d] = g.stride[d];
    G.p[off + d] = g.padding[d];
    G.d[off + d] = g.dilation[d];
  }
  return G;
}

// o[t] = row[i0 + t * s] for t < run, 0 where that index leaves [0, n): the
// zeros of the padding filled around one copy (a plain memcpy at stride 1),
// no test per element.
void copy_row(const float* row, int64_t n, int64_t i0, int64_t s, int64_t run, float* o) {
  // The first t with i0 + t * s >= 0, and the first with i0 + t * s >= n.
  const int64_t lo = std::clamp<int64_t>(i0 >= 0 ? 0 : (-i0 + s - 1) / s, 0, run);
  const int64_t hi = std::clamp<int64_t>(n - i0 <= 0 ? 0 : (n - i0 + s - 1) / s, lo, run);
  std::fill(o, o + lo, 0.0f);
  if (s == 1) {
    std::memcpy(o + lo, row + i0 + lo, size_t(hi - lo) * sizeof(float));
  } else if (s == 2) {  // a constant stride the compiler vectorizes (even lanes of pairs)
    const float* r = row + i0;
    for (int64_t t = lo; t < hi; ++t) o[t] = r[2 * t];
  } else {
    const float* r = row + i0;
    for (int64_t t = lo; t < hi; ++t) o[t] = r[t * s];
  }
  std::fill(o + hi, o + run, 0.0f);
}

// cols[r][j - o0] for rows r = (c, kz, ky, kx) and output positions j in
// [o0, o1): the input element each kernel tap sees (0 in the padding).
void im2col(const float* x, int64_t C, const Geom3& G, int64_t o0, int64_t o1, float* cols) {
  const int64_t kvol = G.kvol(), n = o1 - o0;
  cpu::parallel_for(C * kvol, std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)), [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const int64_t c = r / kvol, kk = r % kvol;
      const int64_t kx = kk % G.k[2], ky = (kk / G.k[2]) % G.k[1], kz = kk / (G.k[2] * G.k[1]);
      const float* xc = x + c * G.ivol();
      float* dst = cols + r * n;
      int64_t j = o0;
      while (j < o1) {
        const int64_t ox0 = j % G.out[2], oy = (j / G.out[2]) % G.out[1], oz = j / (G.out[2] * G.out[1]);
        const int64_t run = std::min(G.out[2] - ox0, o1 - j);
        const int64_t iz = oz * G.s[0] - G.p[0] + kz * G.d[0], iy = oy * G.s[1] - G.p[1] + ky * G.d[1];
        float* o = dst + (j - o0);
        if (iz < 0 || iz >= G.in[0] || iy < 0 || iy >= G.in[1]) {
          std::fill(o, o + run, 0.0f);
        } else {
          copy_row(xc + (iz * G.in[1] + iy) * G.in[2], G.in[2], ox0 * G.s[2] - G.p[2] + kx * G.d[2], G.s[2], run, o);
        }
        j += run;
      }
    }
  });
}

// The adjoint of im2col: out[c] += cols[(c, taps)][input positions i0..i1),
// where the "input" of the transposed convolution plays the forward output's
// role. One channel per task, so no two threads add to the same element.
void col2im_add(const float* cols, int64_t C, const Geom3& G, int64_t i0, int64_t i1, float* out) {
  // Here G.out is the transposed conv's input grid and G.in its output grid.
  const int64_t kvol = G.kvol(), n = i1 - i0;
  cpu::parallel_for(C, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      float* oc = out + c * G.ivol();
      for (int64_t kk = 0; kk < kvol; ++kk) {
        const int64_t kx = kk % G.k[2], ky = (kk / G.k[2]) % G.k[1], kz = kk / (G.k[2] * G.k[1]);
        const float* src = cols + (c * kvol + kk) * n;
        int64_t j = i0;
        while (j < i1) {
          const int64_t jx0 = j % G.out[2], jy = (j / G.out[2]) % G.out[1], jz = j / (G.out[2] * G.out[1]);
          const int64_t run = std::min(G.out[2] - jx0, i1 - j);
          const int64_t oz = jz * G.s[0] - G.p[0] + kz * G.d[0], oy = jy * G.s[1] - G.p[1] + ky * G.d[1];
          if (oz >= 0 && oz < G.in[0] && oy >= 0 && oy < G.in[1]) {
            float* row = oc + (oz * G.in[1] + oy) * G.in[2];
            const float* s = src + (j - i0);
            for (int64_t t = 0; t < run; ++t) {
              const int64_t ox = (jx0 + t) * G.s[2] - G.p[2] + kx * G.d[2];
              if (ox >= 0 && ox < G.in[2]) row[ox] += s[t];
            }
          }
          j += run;
        }
      }
    }
  });
}

void conv_forward(const float* x, const float* w, float* y, int64_t N, int64_t Cin, int64_t Cout, int64_t groups,
                  const Geom3& G) {
  const int64_t Cg = Cin / groups, Kg = Cout / groups, kvol = G.kvol(), ivol = G.ivol(), ovol = G.ovol();
  const int64_t rows = Cg * kvol;
  const bool direct = kvol == 1 && G.s[0] == 1 && G.s[1] == 1 && G.s[2] == 1 && G.p[0] == 0 && G.p[1] == 0 &&
                      G.p[2] == 0;  // 1x1, stride 1, no padding: the input is its own column matrix
  const int64_t chunk = direct ? ovol : std::max<int64_t>(1, std::min(ovol, kMaxColumnFloats / std::max<int64_t>(rows, 1)));
  std::vector<float> cols(direct ? 0 : rows * chunk);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* xg = x + (n * Cin + g * Cg) * ivol;
      const float* wg = w + g * Kg * rows;
      float* yg = y + (n * Cout + g * Kg) * ovol;
      if (rows == 0) {
        for (int64_t k = 0; k < Kg; ++k) std::fill(yg + k * ovol, yg + (k + 1) * ovol, 0.0f);
        continue;
      }
      for (int64_t o0 = 0; o0 < ovol; o0 += chunk) {
        const int64_t o1 = std::min(ovol, o0 + chunk), m = o1 - o0;
        const float* b = xg;
        int64_t ldb = ivol;
        if (!direct) {
          im2col(xg, Cg, G, o0, o1, cols.data());
          b = cols.data();
          ldb = m;
        } else {
          b = xg + o0;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Kg, m, rows, 1.0f, wg, rows, b, ldb, 0.0f,
                    yg + o0, ovol);
      }
    }
  }
}

// x (N, Cin, *in) with weight (Cin, Cout/groups, *k); G.in is the output
// grid and G.out the input grid (the forward convolution's roles).
void conv_transpose_forward(const float* x, const float* w, float* y, int64_t N, int64_t Cin, int64_t Cout,
                            int64_t groups, const Geom3& G) {
  const int64_t Cig = Cin / groups, Cog = Cout / groups, kvol = G.kvol();
  const int64_t xvol = G.ovol(), yvol = G.ivol(), rows = Cog * kvol;
  std::fill(y, y + N * Cout * yvol, 0.0f);
  if (Cig == 0 || rows == 0) return;
  const int64_t chunk = std::max<int64_t>(1, std::min(xvol, kMaxColumnFloats / std::max<int64_t>(rows, 1)));
  std::vector<float> cols(rows * chunk);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* xg = x + (n * Cin + g * Cig) * xvol;
      const float* wg = w + g * Cig * rows;  // (Cig, Cog * kvol)
      float* yg = y + (n * Cout + g * Cog) * yvol;
      for (int64_t i0 = 0; i0 < xvol; i0 += chunk) {
        const int64_t i1 = std::min(xvol, i0 + chunk), m = i1 - i0;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, rows, m, Cig, 1.0f, wg, rows, xg + i0, xvol, 0.0f,
                    cols.data(), m);
        col2im_add(cols.data(), Cog, G, i0, i1, yg);
      }
    }
  }
}

// dw (Cout, Cin/groups * kvol) = sum over n of gy[n] (Cout, ovol) times the
// column matrix of x[n] (Cin/groups * kvol, ovol) transposed, per group: the
// forward sgemm with the roles of weight and output swapped.
void conv_weight_backward(const float* x, const float* gy, float* dw, int64_t N, int64_t Cin, int64_t Cout,
                          int64_t groups, const Geom3& G) {
  const int64_t Cg = Cin / groups, Kg = Cout / groups, kvol = G.kvol(), ivol = G.ivol(), ovol = G.ovol();
  const int64_t rows = Cg * kvol;
  std::fill(dw, dw + Cout * rows, 0.0f);
  if (rows == 0 || Kg == 0 || ovol == 0) return;
  const bool direct = kvol == 1 && G.s[0] == 1 && G.s[1] == 1 && G.s[2] == 1 && G.p[0] == 0 && G.p[1] == 0 &&
                      G.p[2] == 0;
  const int64_t chunk = direct ? ovol : std::max<int64_t>(1, std::min(ovol, kMaxColumnFloats / rows));
  std::vector<float> cols(direct ? 0 : rows * chunk);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* xg = x + (n * Cin + g * Cg) * ivol;
      const float* gyg = gy + (n * Cout + g * Kg) * ovol;
      float* dwg = dw + g * Kg * rows;
      for (int64_t o0 = 0; o0 < ovol; o0 += chunk) {
        const int64_t o1 = std::min(ovol, o0 + chunk), m = o1 - o0;
        const float* b = xg + o0;
        int64_t ldb = ivol;
        if (!direct) {
          im2col(xg, Cg, G, o0, o1, cols.data());
          b = cols.data();
          ldb = m;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Kg, rows, m, 1.0f, gyg + o0, ovol, b, ldb, 1.0f, dwg,
                    rows);
      }
    }
  }
}

}  // namespace

void ConvWeightGrad::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  const Tensor &x = in[0], &gy = in[1];
  const Geom3 G = conv_geom3(geom, x.shape(), out.shape(), gy.shape());
  cpu::FloatView xf(x), gf(gy);
  cpu::FloatOut wf(out);
  conv_weight_backward(xf.data(), gf.data(), wf.data(), x.shape(0), x.shape(1), gy.shape(1), geom.groups, G);
  wf.commit();
}

void Conv::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  const Tensor &x = in[0], &w = in[1];
  const int64_t N = x.shape(0), Cin = x.shape(1), Cout = out.shape(1);
  Geom3 G = geom.transposed ? conv_geom3(geom, out.shape(), w.shape(), x.shape())
                            : conv_geom3(geom, x.shape(), w.shape(), out.shape());
  cpu::FloatView xf(x), wf(w);
  cpu::FloatOut yf(out);
  if (geom.transposed) {
    conv_transpose_forward(xf.data(), wf.data(), yf.data(), N, Cin, Cout, geom.groups, G);
  } else {
    conv_forward(xf.data(), wf.data(), yf.data(), N, Cin, Cout, geom.groups, G);
  }
  if (has_bias) {
    cpu::FloatView bf(in[2]);
    const float* b = bf.data();
    float* y = yf.data();
    const int64_t vol = out.size() / std::max<int64_t>(N * Cout, 1);
    cpu::parallel_for(N * Cout, std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(vol, 1)),
                      [&](int64_t pb, int64_t pe) {
      for (int64_t p = pb; p < pe; ++p) {
        const float bv = b[p % Cout];
        float* row = y + p * vol;
        for (int64_t i = 0; i < vol; ++i) row[i] += bv;
      }
    });
  }
  yf.commit();
}

}  // namespace pyflame
