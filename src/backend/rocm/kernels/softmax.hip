// Softmax / log-softmax over the last axis of a row-major input: one block
// per row, float accumulation, max subtracted for stability.
#include <algorithm>
#include <cmath>

#include "backend/rocm/kernels/common.h"

namespace pyflame::backend::rocm {

namespace {

template <typename T, bool kLog>
__global__ void softmax_rows(const T* in, T* out, int64_t rows, int64_t cols) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* x = in + r * cols;
    T* y = out + r * cols;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) mx = gpu::MaxOp{}(mx, float(x[j]));
    mx = gpu::block_reduce_max(mx);
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) sum += expf(float(x[j]) - mx);
    sum = gpu::block_reduce_sum(sum);
    if (kLog) {
      // (x - max) - log(sum): adding log(sum) to a large max first would round it away.
      const float log_sum = logf(sum);
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) y[j] = T((float(x[j]) - mx) - log_sum);
    } else {
      const float inv = 1.0f / sum;
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) y[j] = T(expf(float(x[j]) - mx) * inv);
    }
  }
}

}  // namespace
}  // namespace pyflame::backend::rocm

namespace pyflame {

using namespace backend::rocm;

void Softmax::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const int64_t cols = out.shape().back(), rows = out.size() / cols;
  const int threads = cols >= 1024 ? 512 : cols >= 256 ? 256 : 64;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(rows, int64_t(ctx.multiprocessors) * 32));
  dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (log) {
      softmax_rows<T, true><<<grid, threads, 0, ctx.stream>>>(in[0].data<T>(), out.data<T>(), rows, cols);
    } else {
      softmax_rows<T, false><<<grid, threads, 0, ctx.stream>>>(in[0].data<T>(), out.data<T>(), rows, cols);
    }
    PF_HIP_CHECK_LAUNCH();
  });
}

}  // namespace pyflame
