// Per-target parts of cross_entropy and nll_loss on the CPU, and the target
// weights of their means. Targets are range-checked; a bad one raises
// IndexError once the parallel loop is done. CheckRange: bce_loss's
// probability check.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <string>

#include "backend/cpu/kernel_utils.h"
#include "ir/primitives.h"

namespace pyflame {

namespace {

// Scores viewed as (N, C, S): row r = (n, s) reads C values S apart.
struct Rows {
  int64_t n = 0, classes = 0, inner = 1;
  int64_t count() const { return n * inner; }
  int64_t base(int64_t r) const { return (r / inner) * classes * inner + r % inner; }
};

Rows rows_of(const Tensor& scores) {
  Rows R;
  R.n = scores.shape()[0];
  R.classes = scores.shape()[1];
  R.inner = scores.size() / std::max<int64_t>(R.n * R.classes, 1);
  return R;
}

// The first out-of-range target any thread saw.
struct BadTarget {
  std::atomic<bool> found{false};
  std::atomic<int64_t> value{0};
  void note(int64_t v) {
    bool expect = false;
    if (found.compare_exchange_strong(expect, true)) value = v;
  }
  void raise_if_any(const char* fn, int64_t classes, int64_t ignore) const {
    if (!found) return;
    throw IndexError(loss_target_error(fn, value.load(), classes, ignore));
  }
};

template <typename F>
void dispatch_index(Dtype t, F&& f) {
  if (t == Dtype::Int32) f(int32_t{});
  else f(int64_t{});
}

template <typename T, typename I>
void cross_entropy_rows(const T* x, const I* tgt, const float* w, float* out, const Rows& R,
                        int64_t ignore, double smoothing, BadTarget& bad) {
  const int64_t C = R.classes, S = R.inner;
  cpu::parallel_for(R.count(), std::max<int64_t>(1, cpu::kGrain / C), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t t = static_cast<int64_t>(tgt[r]);
      if (t == ignore) {
        out[r] = 0.0f;
        continue;
      }
      if (t < 0 || t >= C) {
        bad.note(t);
        out[r] = 0.0f;
        continue;
      }
      const T* p = x + R.base(r);
      float mx = -INFINITY;
      bool nan = false;
      for (int64_t c = 0; c < C; ++c) {
        const float v = float(p[c * S]);
        nan |= v != v;
        mx = std::fmax(mx, v);
      }
      double se = 0.0, swx = 0.0, sw = 0.0;  // sum exp(x - max), sum w*(x - max), sum w
      for (int64_t c = 0; c < C; ++c) {
        const double d = double(float(p[c * S])) - double(mx);
        se += std::exp(d);
        if (smoothing != 0.0) {
          const double wc = w ? w[c] : 1.0;
          swx += wc * d;
          sw += wc;
        }
      }
      const double lse = std::log(se);  // log-sum-exp minus the max
      const double wt = w ? w[t] : 1.0;
      const double nll = -wt * ((double(float(p[t * S])) - double(mx)) - lse);
      double loss = nll;
      if (smoothing != 0.0) {
        const double smooth = -(swx - lse * sw);
        loss = (1.0 - smoothing) * nll + smoothing / double(C) * smooth;
      }
      out[r] = (nan || mx != mx) ? NAN : float(loss);
    }
  });
}

template <typename T, typename I>
void nll_rows(const T* x, const I* tgt, const float* w, float* out, const Rows& R, int64_t ignore,
              BadTarget& bad) {
  const int64_t C = R.classes, S = R.inner;
  cpu::parallel_for(R.count(), cpu::kGrain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t t = static_cast<int64_t>(tgt[r]);
      if (t == ignore) {
        out[r] = 0.0f;
      } else if (t < 0 || t >= C) {
        bad.note(t);
        out[r] = 0.0f;
      } else {
        out[r] = -(w ? w[t] : 1.0f) * float(x[R.base(r) + t * S]);
      }
    }
  });
}

}  // namespace

namespace {
// Runs rows(T{}, I{}, R, w, bad) for the score and target dtypes, then raises
// for any out-of-range target the rows met.
template <typename F>
void class_loss(const char* fn, const std::vector<Tensor>& in, bool has_weight,
                int64_t ignore_index, F&& rows) {
  const Rows R = rows_of(in[0]);
  const float* w = has_weight ? in[2].data<float>() : nullptr;
  BadTarget bad;
  cpu::dispatch_float(in[0].dtype(), [&](auto tag) {
    dispatch_index(in[1].dtype(), [&](auto itag) { rows(tag, itag, R, w, bad); });
  });
  bad.raise_if_any(fn, R.classes, ignore_index);
}
}  // namespace

void CrossEntropy::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  class_loss(name(), in, has_weight, ignore_index, [&](auto tag, auto itag, const Rows& R, const float* w,
                                                       BadTarget& bad) {
    using T = decltype(tag);
    using I = decltype(itag);
    cross_entropy_rows<T, I>(in[0].data<T>(), in[1].data<I>(), w, out.data<float>(), R, ignore_index,
                             label_smoothing, bad);
  });
}

void NllLoss::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  class_loss(name(), in, has_weight, ignore_index, [&](auto tag, auto itag, const Rows& R, const float* w,
                                                       BadTarget& bad) {
    using T = decltype(tag);
    using I = decltype(itag);
    nll_rows<T, I>(in[0].data<T>(), in[1].data<I>(), w, out.data<float>(), R, ignore_index, bad);
  });
}

void TargetWeight::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  const float* w = has_weight ? in[1].data<float>() : nullptr;
  float* o = out.data<float>();
  const int64_t C = classes, ignore = ignore_index;
  dispatch_index(in[0].dtype(), [&](auto itag) {
    using I = decltype(itag);
    const I* t = in[0].data<I>();
    cpu::parallel_for(out.size(), cpu::kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const int64_t v = static_cast<int64_t>(t[i]);
        o[i] = (v == ignore || v < 0 || v >= C) ? 0.0f : (w ? w[v] : 1.0f);
      }
    });
  });
}

void CheckRange::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  const float* x = in[0].data<float>();
  float* o = out.data<float>();
  const int64_t n = out.size();
  bool bad = false;
  for (int64_t i = 0; i < n && !bad; ++i) bad = !(x[i] >= lo && x[i] <= hi);
  if (bad) throw ValueError(message);
  std::copy(x, x + n, o);
}

}  // namespace pyflame
