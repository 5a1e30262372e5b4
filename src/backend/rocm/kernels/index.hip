// GPU kernels of the index family: concat (one strided copy per input),
// gather (with a device-side range check read back before returning), pad
// and dropout (the counter-based bits of core/random_bits.h, so a seed gives
// the CPU's mask).
#include <algorithm>
#include <cstring>

#include "backend/rocm/kernels/common.h"
#include "backend/rocm/memory.h"
#include "core/random_bits.h"

namespace pyflame::backend::rocm {

namespace {

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

template <typename T>
__global__ void copy_into_kernel(T* dst, const T* src, Indexer<2> ix, int64_t n) {
  PF_GRID_STRIDE(i, n) {
    int64_t o[2];
    ix.offsets(i, o);
    dst[o[0]] = src[o[1]];
  }
}

// flag[0] = 1 and flag[1] = the index when some index is out of range (any
// one of them: plain stores, every writer stores a valid report).
template <typename T, typename I>
__global__ void gather_kernel(T* out, const T* x, const I* idx, Indexer<2> ix, int64_t ax_stride,
                              int64_t ax_size, int64_t n, long long* flag) {
  PF_GRID_STRIDE(i, n) {
    int64_t o[2];
    ix.offsets(i, o);
    const int64_t j = static_cast<int64_t>(idx[o[1]]);
    if (j < 0 || j >= ax_size) {
      flag[1] = static_cast<long long>(j);
      flag[0] = 1;
      out[i] = T{};
      continue;
    }
    out[i] = x[o[0] + j * ax_stride];
  }
}

struct PadParams {
  int nd = 0;
  int mode = 0;
  int64_t out_shape[kMaxDims] = {};
  int64_t x_shape[kMaxDims] = {};
  int64_t x_strides[kMaxDims] = {};
  int64_t lo[kMaxDims] = {};
};

// Source index of coordinate c (shifted by the low pad) on an axis of size n,
// or -1 where constant padding applies (as in backend/cpu/index.cc).
__device__ inline int64_t pad_source(int mode, int64_t c, int64_t n) {
  if (c >= 0 && c < n) return c;
  if (n <= 0) return -1;
  switch (static_cast<PadMode>(mode)) {
    case PadMode::Constant: return -1;
    case PadMode::Replicate: return c < 0 ? 0 : n - 1;
    case PadMode::Circular: return ((c % n) + n) % n;
    case PadMode::Reflect: {
      if (n == 1) return 0;
      const int64_t period = 2 * (n - 1);
      const int64_t m = ((c % period) + period) % period;
      return m < n ? m : period - m;
    }
  }
  return -1;
}

template <typename T>
__global__ void pad_kernel(T* out, const T* x, PadParams p, T value, int64_t n) {
  PF_GRID_STRIDE(i, n) {
    int64_t rem = i, off = 0;
    bool inside = true;
    for (int d = p.nd - 1; d >= 0; --d) {
      const int64_t c = rem % p.out_shape[d];
      rem /= p.out_shape[d];
      const int64_t s = pad_source(p.mode, c - p.lo[d], p.x_shape[d]);
      if (s < 0) inside = false;
      else off += s * p.x_strides[d];
    }
    out[i] = inside ? x[off] : value;
  }
}

template <typename T>
__global__ void dropout_kernel(T* out, const T* x, Indexer<1> ix, uint64_t key, uint64_t threshold,
                               float scale, int64_t n) {
  PF_GRID_STRIDE(i, n) {
    int64_t o[1];
    ix.offsets(i, o);
    const bool keep = (random_bits(key, static_cast<uint64_t>(i)) >> 40) >= threshold;
    out[i] = T(static_cast<float>(x[o[0]]) * (keep ? scale : 0.0f));
  }
}

}  // namespace
}  // namespace pyflame::backend::rocm

namespace pyflame {

using namespace backend::rocm;

void Concat::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const Strides& os = out.strides();
  dispatch_bits(out.itemsize(), [&](auto tag) {
    using T = decltype(tag);
    int64_t pos = 0;
    for (const Tensor& x : in) {
      const int64_t n = x.size();
      Indexer<2> ix = make_indexer<2>(x.shape(), {&os, &x.strides()}, name());
      copy_into_kernel<T><<<grid_for(ctx, n, kThreads), kThreads, 0, ctx.stream>>>(
          out.data<T>() + pos * os[axis], x.data<T>(), ix, n);
      PF_HIP_CHECK_LAUNCH();
      pos += x.shape()[axis];
    }
  });
}

void Gather::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const Tensor &x = in[0], &index = in[1];
  Strides xs = x.strides();
  const int64_t ax_stride = xs[axis], ax_size = x.shape()[axis];
  xs[axis] = 0;
  const int64_t n = out.size();
  Indexer<2> ix = make_indexer<2>(out.shape(), {&xs, &index.strides()}, name());
  auto flag = temp_buffer(ctx, 2 * sizeof(long long));
  PF_HIP_CHECK(hipMemsetAsync(flag->ptr, 0, 2 * sizeof(long long), ctx.stream));
  dispatch_bits(out.itemsize(), [&](auto tag) {
    using T = decltype(tag);
    auto run = [&](auto itag) {
      using I = decltype(itag);
      gather_kernel<T, I><<<grid_for(ctx, n, kThreads), kThreads, 0, ctx.stream>>>(
          out.data<T>(), x.data<T>(), index.data<I>(), ix, ax_stride, ax_size, n,
          static_cast<long long*>(flag->ptr));
      PF_HIP_CHECK_LAUNCH();
    };
    if (index.dtype() == Dtype::Int32) run(int32_t{});
    else run(int64_t{});
  });
  // Read the range flag back (stream-ordered) and raise on the host.
  long long report[2] = {0, 0};
  PinnedMemoryPool& pool = get_pinned_pool();
  void* host = pool.acquire(sizeof(report));
  hipError_t err = hipMemcpyAsync(host, flag->ptr, sizeof(report), hipMemcpyDeviceToHost, ctx.stream);
  if (err == hipSuccess) err = hipStreamSynchronize(ctx.stream);
  if (err == hipSuccess) std::memcpy(report, host, sizeof(report));
  pool.release(host);
  PF_HIP_CHECK(err);
  if (report[0]) throw IndexError(range_error(report[1], ax_size));
}

void Pad::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const Tensor& x = in[0];
  const int nd = out.ndim();
  if (nd > kMaxDims) throw RuntimeError(errmsg(name(), "more than 8 axes"));
  PadParams p;
  p.nd = nd;
  p.mode = static_cast<int>(mode);
  for (int d = 0; d < nd; ++d) {
    p.out_shape[d] = out.shape()[d];
    p.x_shape[d] = x.shape()[d];
    p.x_strides[d] = x.strides()[d];
    p.lo[d] = lo[d];
  }
  const int64_t n = out.size();
  dispatch(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T v;
    if constexpr (std::is_same_v<T, bool>) v = value != 0.0;
    else v = convert<T>(static_cast<acc_t<T>>(value));
    pad_kernel<T><<<grid_for(ctx, n, kThreads), kThreads, 0, ctx.stream>>>(out.data<T>(), x.data<T>(), p, v, n);
    PF_HIP_CHECK_LAUNCH();
  });
}

void Dropout::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const Tensor& x = in[0];
  const int64_t n = out.size();
  Indexer<1> ix = make_indexer<1>(out.shape(), {&x.strides()}, name());
  dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    dropout_kernel<T><<<grid_for(ctx, n, kThreads), kThreads, 0, ctx.stream>>>(
        out.data<T>(), x.data<T>(), ix, key, threshold(), scale(), n);
    PF_HIP_CHECK_LAUNCH();
  });
}

}  // namespace pyflame
