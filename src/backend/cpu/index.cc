// CPU kernels of the index family: concat, gather, pad, dropout, and the
// backward ops scatter_add and pad_backward.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/cpu/kernel_utils.h"
#include "backend/pad_fold.h"
#include "core/random_bits.h"
#include "ir/primitives.h"

namespace pyflame {

namespace {

// Copies `shape` elements from src (strides ss) to dst (strides ds).
template <typename T>
void strided_copy(const T* src, const Strides& ss, T* dst, const Strides& ds, const Shape& shape) {
  cpu::Layout<2> L = cpu::collapse<2>(shape, {&ds, &ss});
  cpu::parallel_for(shape_size(shape), cpu::kGrain, [&](int64_t b, int64_t e) {
    cpu::for_each_run<2>(L, b, e, [&](auto off, int64_t n, auto ls) {
      T* d = dst + off[0];
      const T* s = src + off[1];
      if (ls[0] == 1 && ls[1] == 1) {
        std::memcpy(d, s, n * sizeof(T));
      } else {
        for (int64_t i = 0; i < n; ++i) d[i * ls[0]] = s[i * ls[1]];
      }
    });
  });
}

// Calls f(T{}) with an unsigned type of the element size (copies move bits).
template <typename F>
void dispatch_bits(size_t itemsize, F&& f) {
  switch (itemsize) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    default: f(uint64_t{}); break;
  }
}

// Source index of output coordinate c (already shifted by the low pad) on an
// axis of size n, or -1 where constant padding applies.
inline int64_t pad_source(PadMode mode, int64_t c, int64_t n) {
  if (c >= 0 && c < n) return c;
  if (n <= 0) return -1;
  switch (mode) {
    case PadMode::Constant: return -1;
    case PadMode::Replicate: return c < 0 ? 0 : n - 1;
    case PadMode::Circular: return ((c % n) + n) % n;
    case PadMode::Reflect: {
      if (n == 1) return 0;
      const int64_t period = 2 * (n - 1);
      int64_t m = ((c % period) + period) % period;
      return m < n ? m : period - m;
    }
  }
  return -1;
}

}  // namespace

void Concat::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  const Strides& os = out.strides();
  dispatch_bits(out.itemsize(), [&](auto tag) {
    using T = decltype(tag);
    int64_t pos = 0;
    for (const Tensor& x : in) {
      if (x.size() == 0) continue;  // kept for autograd only
      strided_copy<T>(x.data<T>(), x.strides(), out.data<T>() + pos * os[axis], os, x.shape());
      pos += x.shape()[axis];
    }
  });
}

void Gather::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  const Tensor &x = in[0], &index = in[1];
  Strides xs = x.strides();
  const int64_t ax_stride = xs[axis], ax_size = x.shape()[axis];
  xs[axis] = 0;
  const Strides os = row_major_strides(out.shape());
  cpu::Layout<3> L = cpu::collapse<3>(out.shape(), {&os, &xs, &index.strides()});
  std::atomic<bool> bad{false};
  std::atomic<int64_t> bad_value{0};
  dispatch_bits(out.itemsize(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* po = out.data<T>();
    auto run = [&](auto itag) {
      using I = decltype(itag);
      const I* pi = index.data<I>();
      cpu::parallel_for(out.size(), cpu::kGrain, [&](int64_t b, int64_t e) {
        cpu::for_each_run<3>(L, b, e, [&](auto off, int64_t n, auto ls) {
          for (int64_t i = 0; i < n; ++i) {
            const int64_t j = static_cast<int64_t>(pi[off[2] + i * ls[2]]);
            if (j < 0 || j >= ax_size) {
              bad_value.store(j, std::memory_order_relaxed);
              bad.store(true, std::memory_order_relaxed);
              po[off[0] + i * ls[0]] = T{};
              continue;
            }
            po[off[0] + i * ls[0]] = px[off[1] + i * ls[1] + j * ax_stride];
          }
        });
      });
    };
    if (index.dtype() == Dtype::Int32) run(int32_t{});
    else run(int64_t{});
  });
  if (bad.load()) throw IndexError(range_error(bad_value.load(), ax_size));
}

void Pad::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  const Tensor& x = in[0];
  const int nd = out.ndim();
  const Shape &osh = out.shape(), &xsh = x.shape();
  const Strides& xst = x.strides();
  const int64_t last = osh[nd - 1], rows = out.size() / last;
  const PadMode m = mode;
  cpu::dispatch(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T v = T(static_cast<cpu::acc_t<T>>(value));
    const T* px = x.data<T>();
    T* po = out.data<T>();
    // Source index along the last axis for each output column.
    std::vector<int64_t> col(last);
    for (int64_t e = 0; e < last; ++e) col[e] = pad_source(m, e - lo[nd - 1], xsh[nd - 1]);
    cpu::parallel_for(rows, std::max<int64_t>(1, cpu::kGrain / last), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        int64_t rem = r, base = 0;
        bool inside = true;
        for (int d = nd - 2; d >= 0; --d) {
          const int64_t c = rem % osh[d];
          rem /= osh[d];
          const int64_t s = pad_source(m, c - lo[d], xsh[d]);
          if (s < 0) inside = false;
          else base += s * xst[d];
        }
        T* dst = po + r * last;
        if (!inside) {
          std::fill(dst, dst + last, v);
          continue;
        }
        const T* src = px + base;
        const int64_t ls = xst[nd - 1];
        for (int64_t c = 0; c < last; ++c) dst[c] = col[c] < 0 ? v : src[col[c] * ls];
      }
    });
  });
}

void Dropout::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  const Tensor& x = in[0];
  const uint64_t thr = threshold();
  const Strides os = row_major_strides(out.shape());
  cpu::Layout<2> L = cpu::collapse<2>(out.shape(), {&os, &x.strides()});
  cpu::dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using A = cpu::acc_float_t<T>;
    // float64 scales by 1/(1-p) in double; the others by its float rounding.
    const A sc = std::is_same_v<T, double> ? A(1.0 / (1.0 - p)) : A(scale());
    const T* px = x.data<T>();
    T* po = out.data<T>();
    cpu::parallel_for(out.size(), cpu::kGrain, [&](int64_t b, int64_t e) {
      cpu::for_each_run<2>(L, b, e, [&](auto off, int64_t n, auto ls) {
        for (int64_t i = 0; i < n; ++i) {
          const int64_t o = off[0] + i * ls[0];  // row-major: the element's index
          const bool keep = (random_bits(key, static_cast<uint64_t>(o)) >> 40) >= thr;
          po[o] = T(static_cast<A>(px[off[1] + i * ls[1]]) * (keep ? sc : A(0)));
        }
      });
    });
  });
}

// Work is split into units that own disjoint parts of the output: one unit
// is a set of coordinates off `axis` and off the last axis, times a block of
// the last axis (when that is not `axis`), so writes stay contiguous. Each
// unit sums in index order in float (the float32 output itself, or a
// buffer for 16-bit outputs, which round once; float64 sums in double in
// the output): deterministic.
void ScatterAdd::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  const Tensor &src = in[0], &index = in[1];
  const int nd = index.ndim();
  const Shape& ish = index.shape();
  const Strides os = row_major_strides(out.shape());
  const int64_t K = out.shape()[axis], M = ish[axis];
  // The last axis, walked in blocks inside a unit (size 1 when it is `axis`).
  const bool has_last = axis != nd - 1;
  const int last = nd - 1;
  const int64_t L = has_last ? ish[last] : 1;
  const int64_t s_last = has_last ? src.strides()[last] : 0;
  const int64_t i_last = has_last ? index.strides()[last] : 0;
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (L + kBlock - 1) / kBlock;
  const int64_t outer = M == 0 || L == 0 ? 0 : index.size() / (M * L);
  if (out.size() > 0) std::memset(out.raw_data(), 0, out.size() * out.itemsize());
  if (index.size() == 0) return;  // nothing to add (and M or L is 0: no divisions by them below)
  std::atomic<bool> bad{false};
  std::atomic<int64_t> bad_value{0};
  cpu::dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* ps = src.data<T>();
    T* po = out.data<T>();
    auto run = [&](auto itag) {
      using I = decltype(itag);
      const I* pi = index.data<I>();
      const int64_t s_step = src.strides()[axis], i_step = index.strides()[axis];
      const int64_t grain = std::max<int64_t>(1, cpu::kGrain / ((K + M) * std::min(L, kBlock)));
      cpu::parallel_for(outer * blocks, grain, [&](int64_t b, int64_t e) {
        using A = cpu::acc_float_t<T>;
        constexpr bool direct = std::is_same_v<T, A>;  // float32, float64
        std::vector<float> acc(direct ? 0 : K * std::min(L, kBlock));
        for (int64_t u = b; u < e; ++u) {
          const int64_t t0 = (u % blocks) * kBlock, bw = std::min(kBlock, L - t0);
          int64_t rem = u / blocks;
          int64_t s_off = t0 * s_last, i_off = t0 * i_last, o_off = has_last ? t0 : 0;
          for (int d = nd - 1; d >= 0; --d) {  // the unit's coordinates off both
            if (d == axis || (has_last && d == last)) continue;
            const int64_t c = rem % ish[d];
            rem /= ish[d];
            s_off += c * src.strides()[d];
            i_off += c * index.strides()[d];
            o_off += c * os[d];
          }
          // float32 and float64 sum straight into the (zeroed) output; 16-bit into acc.
          A* a;
          if constexpr (direct) a = po + o_off;
          else a = acc.data();
          const int64_t a_row = direct ? os[axis] : bw;
          if (!direct) std::fill(acc.begin(), acc.begin() + K * bw, 0.0f);
          for (int64_t k = 0; k < M; ++k) {
            const I* pik = pi + i_off + k * i_step;
            const T* psk = ps + s_off + k * s_step;
            for (int64_t t = 0; t < bw; ++t) {
              const int64_t j = static_cast<int64_t>(pik[t * i_last]);
              if (j < 0 || j >= K) {
                bad_value.store(j, std::memory_order_relaxed);
                bad.store(true, std::memory_order_relaxed);
                continue;
              }
              a[j * a_row + t] += static_cast<A>(psk[t * s_last]);
            }
          }
          if constexpr (!direct) {
            for (int64_t j = 0; j < K; ++j) {
              T* dst = po + o_off + j * os[axis];
              for (int64_t t = 0; t < bw; ++t) dst[t] = T(acc[j * bw + t]);
            }
          }
        }
      });
    };
    if (index.dtype() == Dtype::Int32) run(int32_t{});
    else run(int64_t{});
  });
  if (bad.load()) throw IndexError(range_error(bad_value.load(), K));
}

void PadGrad::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  const Tensor& c = in[0];
  Strides cs = c.strides();
  const int64_t c_step = cs[axis], m = c.shape()[axis];
  cs[axis] = 0;  // the axis is walked by the preimage
  const Strides os = row_major_strides(out.shape());
  const int64_t inner = os[axis], n = size, l = lo;
  const PadMode md = mode;
  cpu::Layout<2> L = cpu::collapse<2>(out.shape(), {&os, &cs});
  cpu::dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* pc = c.data<T>();
    T* po = out.data<T>();
    cpu::parallel_for(out.size(), cpu::kGrain, [&](int64_t b, int64_t e) {
      cpu::for_each_run<2>(L, b, e, [&](auto off, int64_t cnt, auto ls) {
        for (int64_t k = 0; k < cnt; ++k) {
          const int64_t o = off[0] + k * ls[0];  // row-major: the element's index
          const T* line = pc + off[1] + k * ls[1];
          cpu::acc_float_t<T> acc = 0;
          auto add = [&](int64_t j) { acc += static_cast<cpu::acc_float_t<T>>(line[j * c_step]); };
          for_each_pad_preimage(md, (o / inner) % n, l, n, m, add);
          po[o] = T(acc);
        }
      });
    });
  });
}

void SliceUpdate::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  const Tensor &cache = in[0], &update = in[1];
  const Strides& os = out.strides();
  dispatch_bits(out.itemsize(), [&](auto tag) {
    using T = decltype(tag);
    // A donated buffer already holds the cache; otherwise copy it first.
    if (out.buffer() != cache.buffer()) {
      strided_copy<T>(cache.data<T>(), cache.strides(), out.data<T>(), os, out.shape());
    }
    strided_copy<T>(update.data<T>(), update.strides(), out.data<T>() + start * os[axis], os,
                    update.shape());
  });
}

}  // namespace pyflame
