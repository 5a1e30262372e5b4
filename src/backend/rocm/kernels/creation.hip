// Creation kernels: full, arange, eye and the counter-based random draws
// (the same functions of (key, index) as the CPU backend).
#include "backend/rocm/kernels/common.h"
#include "core/random_bits.h"

namespace pyflame::backend::rocm {

namespace {

template <typename T>
__global__ void full_kernel(T* out, T v, int64_t n) {
  PF_GRID_STRIDE(i, n) out[i] = v;
}

template <typename T>
__global__ void arange_kernel(T* out, double start, double step, int64_t n) {
  PF_GRID_STRIDE(i, n) out[i] = convert<T>(static_cast<acc_t<T>>(start + static_cast<double>(i) * step));
}

template <typename T>
__global__ void eye_kernel(T* out, int64_t m, int64_t k, int64_t n) {
  PF_GRID_STRIDE(i, n) out[i] = convert<T>(i % m - i / m == k ? 1.0f : 0.0f);
}

template <typename T>
__global__ void random_kernel(T* out, int kind, uint64_t key, int64_t low, uint64_t range, int mbits, int64_t n) {
  PF_GRID_STRIDE(i, n) {
    uint64_t b = random_bits(key, static_cast<uint64_t>(i));
    if constexpr (std::is_integral_v<T>) {
      out[i] = static_cast<T>(static_cast<uint64_t>(low) + b % range);  // unsigned: no signed overflow
    } else if constexpr (std::is_same_v<T, double>) {
      out[i] = kind == Random::Normal ? normal_f64_from_bits(b) : uniform_f64_from_bits(b);
    } else {
      out[i] = T(kind == Random::Normal ? normal_from_bits(b) : uniform_from_bits(b, mbits));
    }
  }
}

template <typename Launch>
void with_ctx(const Tensor& out, Launch&& launch) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  launch(ctx, grid_for(ctx, out.size(), kThreads));
  PF_HIP_CHECK_LAUNCH();
}

}  // namespace
}  // namespace pyflame::backend::rocm

namespace pyflame {

using namespace backend::rocm;

void Full::eval_gpu(const std::vector<Tensor>&, Tensor& out) {
  with_ctx(out, [&](DeviceContext& ctx, unsigned grid) {
    dispatch(out.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T v = convert<T>(static_cast<acc_t<T>>(value));
      full_kernel<T><<<grid, kThreads, 0, ctx.stream>>>(out.data<T>(), v, out.size());
    });
  });
}

void Arange::eval_gpu(const std::vector<Tensor>&, Tensor& out) {
  with_ctx(out, [&](DeviceContext& ctx, unsigned grid) {
    dispatch(out.dtype(), [&](auto tag) {
      using T = decltype(tag);
      arange_kernel<T><<<grid, kThreads, 0, ctx.stream>>>(out.data<T>(), start, step, out.size());
    });
  });
}

void Eye::eval_gpu(const std::vector<Tensor>&, Tensor& out) {
  with_ctx(out, [&](DeviceContext& ctx, unsigned grid) {
    dispatch(out.dtype(), [&](auto tag) {
      using T = decltype(tag);
      eye_kernel<T><<<grid, kThreads, 0, ctx.stream>>>(out.data<T>(), out.shape()[1], k, out.size());
    });
  });
}

void Random::eval_gpu(const std::vector<Tensor>&, Tensor& out) {
  const int mbits = out.dtype() == Dtype::Float16 ? 11 : out.dtype() == Dtype::BFloat16 ? 8 : 24;
  with_ctx(out, [&](DeviceContext& ctx, unsigned grid) {
    dispatch(out.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        throw ValueError(errmsg(name(), "bool is not a supported dtype"));
      } else {
        random_kernel<T><<<grid, kThreads, 0, ctx.stream>>>(out.data<T>(), kind, key, low,
                                                             static_cast<uint64_t>(high) - static_cast<uint64_t>(low), mbits,
                                                             out.size());
      }
    });
  });
}

}  // namespace pyflame
