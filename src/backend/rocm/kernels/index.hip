// GPU kernels of the index family: concat (one strided copy per input),
// gather (with a device-side range check read back before returning), pad
// and dropout (the counter-based bits of core/random_bits.h, so a seed gives
// the CPU's mask); and the backward ops: scatter_add (float32 atomics, range
// checked like gather) and pad_backward (each element sums its preimage).
#include <algorithm>
#include <cstring>
#include <optional>

#include "backend/pad_fold.h"
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
                               double scale, int64_t n) {
  PF_GRID_STRIDE(i, n) {
    int64_t o[1];
    ix.offsets(i, o);
    const bool keep = (random_bits(key, static_cast<uint64_t>(i)) >> 40) >= threshold;
    using A = acc_float_t<T>;  // float64 scales in double
    out[i] = T(static_cast<A>(x[o[0]]) * (keep ? static_cast<A>(scale) : A(0)));
  }
}

// out[o[2] + j * ax_stride] += src[o[0]], j = idx[o[1]]; out is float32
// (the output itself, or the float32 buffer of a 16-bit one) or float64.
// Range flag as in gather_kernel.
template <typename T, typename I, typename A>
__global__ void scatter_add_kernel(A* out, const T* src, const I* idx, Indexer<3> ix,
                                   int64_t ax_stride, int64_t ax_size, int64_t n, long long* flag) {
  PF_GRID_STRIDE(i, n) {
    int64_t o[3];
    ix.offsets(i, o);
    const int64_t j = static_cast<int64_t>(idx[o[1]]);
    if (j < 0 || j >= ax_size) {
      flag[1] = static_cast<long long>(j);
      flag[0] = 1;
      continue;
    }
    atomicAdd(out + o[2] + j * ax_stride, static_cast<A>(src[o[0]]));
  }
}

template <typename T>
__global__ void round_from_float_kernel(T* out, const float* x, int64_t n) {
  PF_GRID_STRIDE(i, n) out[i] = convert<T>(x[i]);
}

// out[i] = sum of c over the preimage of i's coordinate on the padded axis;
// ix maps i to c's offset with that axis at 0.
template <typename T>
__global__ void pad_grad_kernel(T* out, const T* c, Indexer<1> ix, int64_t c_step, int64_t inner,
                                int mode, int64_t lo, int64_t size, int64_t m, int64_t n) {
  PF_GRID_STRIDE(i, n) {
    int64_t o[1];
    ix.offsets(i, o);
    const T* line = c + o[0];
    acc_float_t<T> acc = 0;
    auto add = [&](int64_t j) { acc += static_cast<acc_float_t<T>>(line[j * c_step]); };
    for_each_pad_preimage(static_cast<PadMode>(mode), (i / inner) % size, lo, size, m, add);
    out[i] = convert<T>(acc);
  }
}

// A range flag for gather_kernel / scatter_add_kernel, read at the end of
// the evaluation: IndexError naming `fn` with the bad index.
long long* range_flag(DeviceContext& ctx, const char* fn, int axis, int64_t ax_size) {
  return reinterpret_cast<long long*>(deferred_check(ctx, 2, [fn, axis, ax_size](const int64_t* w) {
    throw IndexError(gather_range_error(fn, axis, w[1], ax_size));
  }));
}

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
      if (n == 0) continue;  // zero-size inputs are kept for autograd only
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
  long long* flag = range_flag(ctx, fn, axis, ax_size);
  dispatch_bits(out.itemsize(), [&](auto tag) {
    using T = decltype(tag);
    auto run = [&](auto itag) {
      using I = decltype(itag);
      gather_kernel<T, I><<<grid_for(ctx, n, kThreads), kThreads, 0, ctx.stream>>>(
          out.data<T>(), x.data<T>(), index.data<I>(), ix, ax_stride, ax_size, n, flag);
      PF_HIP_CHECK_LAUNCH();
    };
    if (index.dtype() == Dtype::Int32) run(int32_t{});
    else run(int64_t{});
  });
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
        out.data<T>(), x.data<T>(), ix, key, threshold(),
        std::is_same_v<T, double> ? 1.0 / (1.0 - p) : double(scale()), n);  // as the CPU
    PF_HIP_CHECK_LAUNCH();
  });
}

void ScatterAdd::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const Tensor &src = in[0], &index = in[1];
  Strides os = row_major_strides(out.shape());
  const int64_t ax_stride = os[axis], ax_size = out.shape()[axis];
  os[axis] = 0;
  const int64_t n = index.size(), total = out.size();
  // 16-bit outputs accumulate in a float32 buffer and round once at the end;
  // float32 and float64 ones accumulate in place.
  std::shared_ptr<Buffer> acc;
  void* dst = nullptr;
  if (out.dtype() == Dtype::Float32 || out.dtype() == Dtype::Float64) {
    dst = out.raw_data();
  } else {
    acc = temp_buffer(ctx, std::max<int64_t>(total, 1) * sizeof(float));
    dst = acc->ptr;
  }
  const size_t acc_size = out.dtype() == Dtype::Float64 ? sizeof(double) : sizeof(float);
  if (total > 0) PF_HIP_CHECK(hipMemsetAsync(dst, 0, total * acc_size, ctx.stream));
  long long* flag = n > 0 ? range_flag(ctx, fn, axis, ax_size) : nullptr;
  Indexer<3> ix = make_indexer<3>(index.shape(), {&src.strides(), &index.strides(), &os}, name());
  dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using A = acc_float_t<T>;
    auto run = [&](auto itag) {
      using I = decltype(itag);
      if (n > 0) {
        scatter_add_kernel<T, I, A><<<grid_for(ctx, n, kThreads), kThreads, 0, ctx.stream>>>(
            static_cast<A*>(dst), src.data<T>(), index.data<I>(), ix, ax_stride, ax_size, n, flag);
        PF_HIP_CHECK_LAUNCH();
      }
      if constexpr (is_half_v<T>) {
        if (total > 0) {
          round_from_float_kernel<T><<<grid_for(ctx, total, kThreads), kThreads, 0, ctx.stream>>>(
              out.data<T>(), static_cast<const float*>(dst), total);
          PF_HIP_CHECK_LAUNCH();
        }
      }
    };
    if (index.dtype() == Dtype::Int32) run(int32_t{});
    else run(int64_t{});
  });
}

void PadGrad::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const Tensor& c = in[0];
  Strides cs = c.strides();
  const int64_t c_step = cs[axis], m = c.shape()[axis];
  cs[axis] = 0;  // the axis is walked by the preimage
  const int64_t inner = row_major_strides(out.shape())[axis], n = out.size();
  if (n == 0) return;
  Indexer<1> ix = make_indexer<1>(out.shape(), {&cs}, name());
  dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    pad_grad_kernel<T><<<grid_for(ctx, n, kThreads), kThreads, 0, ctx.stream>>>(
        out.data<T>(), c.data<T>(), ix, c_step, inner, static_cast<int>(mode), lo, size, m, n);
    PF_HIP_CHECK_LAUNCH();
  });
}

void SliceUpdate::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const Tensor &cache = in[0], &update = in[1];
  const Strides& os = out.strides();
  dispatch_bits(out.itemsize(), [&](auto tag) {
    using T = decltype(tag);
    auto copy = [&](const Tensor& src, T* dst) {
      const int64_t n = src.size();
      if (n == 0) return;
      Indexer<2> ix = make_indexer<2>(src.shape(), {&os, &src.strides()}, name());
      copy_into_kernel<T><<<grid_for(ctx, n, kThreads), kThreads, 0, ctx.stream>>>(dst, src.data<T>(), ix, n);
      PF_HIP_CHECK_LAUNCH();
    };
    // A donated buffer already holds the cache; otherwise copy it first.
    if (out.buffer() != cache.buffer()) copy(cache, out.data<T>());
    copy(update, out.data<T>() + start * os[axis]);
  });
}

}  // namespace pyflame
