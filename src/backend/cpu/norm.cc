// layer_norm, rms_norm and group_norm on the CPU: one row (a sample's
// normalized dims, or one (sample, group)) at a time, rows spread over the
// threads. Statistics in double (two passes: mean, then squared deviations;
// float32 rows through vec_math.h's vector sums); the output pass in float.
#include <algorithm>
#include <cmath>

#include "backend/cpu/kernel_utils.h"
#include "backend/cpu/vec_math.h"
#include "ir/primitives.h"

namespace pyflame {

namespace {

enum class Kind { Layer, RMS, Group };

struct Affine {
  const float* w = nullptr;
  const float* b = nullptr;
  int64_t groups = 1;  // Group: row r holds channels (r % groups) * per_group ...
  int64_t hw = 1;      // ... each of hw contiguous elements
};

template <typename T, Kind K>
void norm_rows(const T* x, T* y, int64_t rows, int64_t cols, double eps, const Affine& a) {
  cpu::parallel_for(rows, std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(cols, 1)),
                    [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * cols;
      T* yr = y + r * cols;
      double mean = 0.0, ms = 0.0;
      if constexpr (std::is_same_v<T, float>) {
        // The vector kernels' several accumulators (same sums, other order).
        if constexpr (K != Kind::RMS) mean = cpu::sum_array(xr, cols) / double(cols);
        ms = cpu::sum_sq_dev_array(xr, cols, mean) / double(cols);
      } else if constexpr (K == Kind::RMS) {
        for (int64_t j = 0; j < cols; ++j) {
          const double v = float(xr[j]);
          ms += v * v;
        }
        ms /= double(cols);
      } else {
        double s = 0.0;
        for (int64_t j = 0; j < cols; ++j) s += float(xr[j]);
        mean = s / double(cols);
        for (int64_t j = 0; j < cols; ++j) {
          const double d = double(float(xr[j])) - mean;
          ms += d * d;
        }
        ms /= double(cols);
      }
      const double rstd = 1.0 / std::sqrt(ms + eps);
      if constexpr (K == Kind::Group) {
        // Channel by channel: scale and shift fold into y = x * sc + sh.
        const int64_t per_group = cols / a.hw, c0 = (r % a.groups) * per_group;
        for (int64_t c = 0; c < per_group; ++c) {
          const double g = a.w ? a.w[c0 + c] : 1.0, bb = a.b ? a.b[c0 + c] : 0.0;
          const float sc = float(rstd * g), sh = float(bb - mean * rstd * g);
          const T* xc = xr + c * a.hw;
          T* yc = yr + c * a.hw;
          for (int64_t j = 0; j < a.hw; ++j) yc[j] = T(float(xc[j]) * sc + sh);
        }
      } else {
        const float m = float(mean), rs = float(rstd);
        if constexpr (std::is_same_v<T, float>) {
          cpu::norm_row_array(xr, yr, cols, m, rs, a.w, a.b);
          continue;
        }
        for (int64_t j = 0; j < cols; ++j) {
          float v = (float(xr[j]) - m) * rs;
          if (a.w) v *= a.w[j];
          if (a.b) v += a.b[j];
          yr[j] = T(v);
        }
      }
    }
  });
}

template <Kind K>
void run(const std::vector<Tensor>& in, Tensor& out, int64_t cols, double eps, Affine a) {
  const int64_t rows = out.size() / cols;
  cpu::dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    norm_rows<T, K>(in[0].data<T>(), out.data<T>(), rows, cols, eps, a);
  });
}

}  // namespace

void LayerNorm::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  Affine a;
  if (has_weight) a.w = in[1].data<float>();
  if (has_bias) a.b = in[has_weight ? 2 : 1].data<float>();
  run<Kind::Layer>(in, out, cols, eps, a);
}

void RMSNorm::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  Affine a;
  if (has_weight) a.w = in[1].data<float>();
  run<Kind::RMS>(in, out, out.shape().back(), eps, a);
}

void GroupNorm::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  Affine a;
  if (has_weight) a.w = in[1].data<float>();
  if (has_bias) a.b = in[has_weight ? 2 : 1].data<float>();
  const int64_t N = out.shape()[0], C = out.shape()[1];
  a.groups = groups;
  a.hw = out.size() / (N * C);
  run<Kind::Group>(in, out, (C / groups) * a.hw, eps, a);
}

}  // namespace pyflame
