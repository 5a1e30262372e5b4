// Batch normalization on the GPU. The normalization (inference, and
// training once the batch statistics are known) runs through the DNN
// library's batch-norm inference (dnn.h), with our kernel where the library
// cannot (e.g. bfloat16 on MIOpen). The per-channel batch statistics are a
// two-pass reduction here: partial sums over (channel, chunk) blocks, then
// one block per channel combines them.
#include <algorithm>

#include "backend/rocm/dnn.h"
#include "backend/rocm/kernels/common.h"

namespace pyflame::backend::rocm {

namespace {

constexpr int kStatThreads = 256;

// partial[c * chunks + j] = sum over chunk j of channel c of f(x), where f is
// x (kSq = false) or (x - mean[c])^2. Channel c's elements are (n, s) pairs
// at (n * C + c) * S + s.
template <typename T, bool kSq>
__global__ void channel_partial_sums(const T* x, const float* mean, float* partial, int64_t c0, int64_t C,
                                     int64_t S, int64_t count, int64_t per_chunk) {
  const int64_t c = c0 + blockIdx.y, j = blockIdx.x, chunks = gridDim.x;
  const int64_t begin = j * per_chunk, end = begin + per_chunk < count ? begin + per_chunk : count;
  const float m = kSq ? mean[c] : 0.0f;
  float acc = 0.0f;
  for (int64_t e = begin + threadIdx.x; e < end; e += blockDim.x) {
    const int64_t n = e / S, s = e - n * S;
    const float v = static_cast<float>(x[(n * C + c) * S + s]);
    if (kSq) {
      const float d = v - m;
      acc += d * d;
    } else {
      acc += v;
    }
  }
  acc = gpu::block_reduce_sum(acc);
  if (threadIdx.x == 0) partial[c * chunks + j] = acc;
}

// out[c] = sum of channel c's partials / count
__global__ void channel_finish(const float* partial, float* out, int64_t chunks, float inv_count) {
  const int64_t c = blockIdx.x;
  float acc = 0.0f;
  for (int64_t j = threadIdx.x; j < chunks; j += blockDim.x) acc += partial[c * chunks + j];
  acc = gpu::block_reduce_sum(acc);
  if (threadIdx.x == 0) out[c] = acc * inv_count;
}

template <typename T>
__global__ void batch_norm_apply(const T* x, T* y, const float* mean, const float* var, const float* w,
                                 const float* b, float eps, int64_t C, int64_t S, int64_t total) {
  PF_GRID_STRIDE(i, total) {
    const int64_t c = (i / S) % C;
    const float scale = w[c] * rsqrtf(var[c] + eps);
    y[i] = T((static_cast<float>(x[i]) - mean[c]) * scale + b[c]);
  }
}

}  // namespace
}  // namespace pyflame::backend::rocm

namespace pyflame {

using namespace backend::rocm;

void BatchNormStats::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const Tensor& x = in[0];
  const int64_t N = x.shape(0), C = x.shape(1), S = x.size() / std::max<int64_t>(N * C, 1), count = N * S;
  // Enough blocks to fill the device, each with at least a few thousand elements.
  const int64_t want = std::max<int64_t>(1, int64_t(ctx.multiprocessors) * 8 / std::max<int64_t>(C, 1));
  const int64_t chunks = std::clamp<int64_t>((count + 4095) / 4096, 1, std::min<int64_t>(want, 65535));
  const int64_t per_chunk = (count + chunks - 1) / chunks;
  auto partial = temp_buffer(ctx, size_t(C * chunks) * sizeof(float));
  float* part = static_cast<float*>(partial->ptr);
  float* mean = out.data<float>();
  float* var = mean + C;
  const float inv = 1.0f / static_cast<float>(count);
  constexpr int64_t kMaxGridY = 65535;
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // Pass 1 (sums) and pass 2 (squared deviations from the mean), each over
    // channel slices that fit the grid's y limit.
    for (int pass = 0; pass < 2; ++pass) {
      for (int64_t c0 = 0; c0 < C; c0 += kMaxGridY) {
        const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(std::min(kMaxGridY, C - c0)));
        if (pass == 0) {
          channel_partial_sums<T, false><<<grid, kStatThreads, 0, ctx.stream>>>(x.data<T>(), nullptr, part, c0, C, S,
                                                                                count, per_chunk);
        } else {
          channel_partial_sums<T, true><<<grid, kStatThreads, 0, ctx.stream>>>(x.data<T>(), mean, part, c0, C, S,
                                                                               count, per_chunk);
        }
        PF_HIP_CHECK_LAUNCH();
      }
      channel_finish<<<static_cast<unsigned>(C), kStatThreads, 0, ctx.stream>>>(part, pass == 0 ? mean : var, chunks,
                                                                               inv);
      PF_HIP_CHECK_LAUNCH();
    }
  });
}

void BatchNorm::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const Tensor& x = in[0];
  const float *mean = in[1].data<float>(), *var = in[2].data<float>();
  const float *w = in[3].data<float>(), *b = in[4].data<float>();
  if (dnn::batch_norm_inference(ctx, out.dtype(), x.shape(), x.raw_data(), out.raw_data(), w, b, mean, var, eps)) {
    return;
  }
  const int64_t N = x.shape(0), C = x.shape(1), S = x.size() / std::max<int64_t>(N * C, 1);
  dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    batch_norm_apply<T><<<grid_for(ctx, out.size(), kThreads), kThreads, 0, ctx.stream>>>(
        x.data<T>(), out.data<T>(), mean, var, w, b, static_cast<float>(eps), C, S, out.size());
    PF_HIP_CHECK_LAUNCH();
  });
}

}  // namespace pyflame
