// Batch normalization on the CPU: per-channel statistics (two passes in
// double) and the per-channel affine normalization.
#include <cmath>

#include "backend/cpu/conv_utils.h"
#include "ir/primitives.h"

namespace pyflame {

namespace {

template <typename T>
void stats_typed(const Tensor& x, Tensor& out) {
  const int64_t N = x.shape(0), C = x.shape(1), S = x.size() / std::max<int64_t>(N * C, 1);
  const T* p = x.data<T>();
  float* mean = out.data<float>();
  float* var = mean + C;
  const double count = static_cast<double>(N * S);
  cpu::parallel_for(C, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      double s = 0.0;
      for (int64_t n = 0; n < N; ++n) {
        const T* row = p + (n * C + c) * S;
        for (int64_t i = 0; i < S; ++i) s += static_cast<float>(row[i]);
      }
      const double m = s / count;
      double q = 0.0;
      for (int64_t n = 0; n < N; ++n) {
        const T* row = p + (n * C + c) * S;
        for (int64_t i = 0; i < S; ++i) {
          const double d = static_cast<float>(row[i]) - m;
          q += d * d;
        }
      }
      mean[c] = static_cast<float>(m);
      var[c] = static_cast<float>(q / count);
    }
  });
}

template <typename T>
void normalize_typed(const std::vector<Tensor>& in, Tensor& out, double eps) {
  const Tensor& x = in[0];
  const int64_t N = x.shape(0), C = x.shape(1), S = x.size() / std::max<int64_t>(N * C, 1);
  const float *mean = in[1].data<float>(), *var = in[2].data<float>();
  const float *w = in[3].data<float>(), *b = in[4].data<float>();
  std::vector<float> scale(C);
  for (int64_t c = 0; c < C; ++c) {
    scale[c] = static_cast<float>(static_cast<double>(w[c]) / std::sqrt(static_cast<double>(var[c]) + eps));
  }
  const T* p = x.data<T>();
  T* o = out.data<T>();
  cpu::parallel_for(N * C, std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(S, 1)), [&](int64_t pb, int64_t pe) {
    for (int64_t r = pb; r < pe; ++r) {
      const float sc = scale[r % C], m = mean[r % C], sh = b[r % C];
      const T* xr = p + r * S;
      T* yr = o + r * S;
      for (int64_t i = 0; i < S; ++i) yr[i] = T((static_cast<float>(xr[i]) - m) * sc + sh);
    }
  });
}

}  // namespace

void BatchNormStats::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  cpu::dispatch_float(in[0].dtype(), [&](auto tag) { stats_typed<decltype(tag)>(in[0], out); });
}

void BatchNorm::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  cpu::dispatch_float(out.dtype(), [&](auto tag) { normalize_typed<decltype(tag)>(in, out, eps); });
}

}  // namespace pyflame
