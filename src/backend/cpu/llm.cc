// CPU kernels of the llm family: rotary embedding and attention.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/kernel_utils.h"
#include "ir/primitives.h"

namespace pyflame {

namespace {

// Offset of row r (row-major over `shape`) in a tensor with `strides`.
int64_t offset_of(int64_t r, const Shape& shape, const Strides& strides) {
  int64_t off = 0;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    off += (r % shape[d]) * strides[d];
    r /= shape[d];
  }
  return off;
}

}  // namespace

void Rope::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  const Tensor& x = in[0];
  const int64_t D = out.shape().back(), half = D / 2;
  if (D == 0) return;
  const int64_t rows = out.size() / D;
  const int64_t S = out.ndim() >= 2 ? out.shape()[out.ndim() - 2] : 1;
  std::vector<float> inv(half);
  for (int64_t j = 0; j < half; ++j) inv[j] = freq(j, D);
  Shape rshape;
  Strides pstr;
  const float* pp = nullptr;
  if (has_positions) {
    rshape = in[1].shape();
    pstr = in[1].strides();
    pp = in[1].data<float>();
  }
  cpu::dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* po = out.data<T>();
    cpu::parallel_for(rows, std::max<int64_t>(1, cpu::kGrain / D), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const double p0 = has_positions ? double(pp[offset_of(r, rshape, pstr)]) : double(r % S);
        const float pos = static_cast<float>(p0 + offset);
        const T* xr = px + r * D;
        T* yr = po + r * D;
        for (int64_t j = 0; j < half; ++j) {
          const float ang = pos * inv[j];
          const float c = std::cos(ang), s = std::sin(ang);
          const int64_t i0 = interleaved ? 2 * j : j, i1 = interleaved ? 2 * j + 1 : j + half;
          const float a = static_cast<float>(xr[i0]), bb = static_cast<float>(xr[i1]);
          yr[i0] = T(a * c - bb * s);
          yr[i1] = T(bb * c + a * s);
        }
      }
    });
  });
}

void Attention::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  const int64_t B = q.shape()[0], H = q.shape()[1], Sq = q.shape()[2], D = q.shape()[3];
  const int64_t Hkv = k.shape()[1], Sk = k.shape()[2], Dv = v.shape()[3];
  const int64_t G = H / Hkv;
  const Strides &qs = q.strides(), &ks = k.strides(), &vs = v.strides();
  const int64_t rows = B * H * Sq;
  const int64_t work = std::max<int64_t>(1, Sk * (D + Dv));
  const int64_t offset = causal_offset + (in.size() > 3 ? *in[3].data<int64_t>() : 0);
  cpu::dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* pq = q.data<T>();
    const T* pk = k.data<T>();
    const T* pv = v.data<T>();
    T* po = out.data<T>();
    cpu::parallel_for(rows, std::max<int64_t>(1, cpu::kGrain / work), [&](int64_t rb, int64_t re) {
      // Sk, D, Dv may come from broadcast views larger than memory.
      cpu::Scratch<float> qf(D), sc(Sk);
      cpu::Scratch<double> acc(Dv);
      for (int64_t r = rb; r < re; ++r) {
        const int64_t i = r % Sq, h = (r / Sq) % H, b = r / (Sq * H), hk = h / G;
        int64_t nk = Sk;
        if (causal) nk = std::clamp<int64_t>(i + offset + 1, 0, Sk);
        T* y = po + r * Dv;
        if (nk == 0) {
          std::fill(y, y + Dv, T(0.0f));
          continue;
        }
        const T* qr = pq + b * qs[0] + h * qs[1] + i * qs[2];
        for (int64_t d = 0; d < D; ++d) qf[d] = static_cast<float>(qr[d * qs[3]]);
        const T* kb = pk + b * ks[0] + hk * ks[1];
        const T* vb = pv + b * vs[0] + hk * vs[1];
        float mx = -std::numeric_limits<float>::infinity();
        bool nan = false;
        for (int64_t j = 0; j < nk; ++j) {
          const T* kr = kb + j * ks[2];
          float s = 0.0f;
          for (int64_t d = 0; d < D; ++d) s += qf[d] * static_cast<float>(kr[d * ks[3]]);
          s *= scale;
          sc[j] = s;
          nan |= std::isnan(s);
          mx = std::max(mx, s);
        }
        if (nan) mx = std::numeric_limits<float>::quiet_NaN();
        std::fill(acc.data(), acc.data() + Dv, 0.0);
        double sum = 0.0;
        for (int64_t j = 0; j < nk; ++j) {
          const double p = std::exp(static_cast<double>(sc[j]) - mx);
          sum += p;
          const T* vr = vb + j * vs[2];
          for (int64_t d = 0; d < Dv; ++d) acc[d] += p * static_cast<double>(static_cast<float>(vr[d * vs[3]]));
        }
        const double inv = 1.0 / sum;
        for (int64_t d = 0; d < Dv; ++d) y[d] = T(static_cast<float>(acc[d] * inv));
      }
    });
  });
}

// Made only for GPU tensors; a CPU node (none is recorded today) would run
// the unfused kernels.
void FusedGemv::eval_cpu(const std::vector<Tensor>& in, Tensor& out) { eval_unfused(in, out); }

}  // namespace pyflame
