// Softmax and log-softmax over the last axis of a row-major input.
#include <algorithm>
#include <cmath>

#include "backend/cpu/kernel_utils.h"
#include "backend/cpu/vec_math.h"
#include "ir/primitives.h"

namespace pyflame {

namespace {

// A float row with the vector kernels: the max, then exp(x - max) written
// to the output with its sum, then the scaling (or the log form).
void softmax_row(const float* s, float* d, int64_t cols, bool log) {
  const float mx = cpu::max_array(s, cols);  // NaN anywhere makes the row NaN, as below
  const double sum = cpu::exp_shift_sum_array(s, d, cols, mx);
  if (log) {
    const float log_sum = static_cast<float>(std::log(sum));
    for (int64_t i = 0; i < cols; ++i) d[i] = (s[i] - mx) - log_sum;
  } else {
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < cols; ++i) d[i] *= inv;
  }
}

template <typename T>
void softmax_typed(const Tensor& x, Tensor& out, bool log) {
  using F = cpu::acc_float_t<T>;  // float64 stays double
  const int64_t cols = x.shape().back();
  const int64_t rows = x.size() / cols;
  const T* p = x.data<T>();
  T* o = out.data<T>();
  cpu::parallel_for(rows, std::max<int64_t>(1, cpu::kGrain / cols), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T* s = p + r * cols;
      T* d = o + r * cols;
      if constexpr (std::is_same_v<T, float>) {
        softmax_row(s, d, cols, log);
        continue;
      }
      F mx = -INFINITY;
      for (int64_t i = 0; i < cols; ++i) mx = std::fmax(mx, F(s[i]));
      if (std::isnan(F(s[0])) || mx != mx) mx = NAN;
      double sum = 0;
      for (int64_t i = 0; i < cols; ++i) sum += std::exp(F(s[i]) - mx);
      if (log) {
        // (x - max) - log(sum), not x - (max + log(sum)): with a large max
        // the sum max + log(sum) would round log(sum) away.
        const F log_sum = static_cast<F>(std::log(sum));
        for (int64_t i = 0; i < cols; ++i) d[i] = T((F(s[i]) - mx) - log_sum);
      } else {
        F inv = static_cast<F>(1.0 / sum);
        for (int64_t i = 0; i < cols; ++i) d[i] = T(std::exp(F(s[i]) - mx) * inv);
      }
    }
  });
}
}  // namespace

void Softmax::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  cpu::dispatch_float(out.dtype(), [&](auto tag) { softmax_typed<decltype(tag)>(in[0], out, log); });
}

}  // namespace pyflame
