// Convolution on the GPU through the DNN library (dnn.h: MIOpen / cuDNN):
// forward convolution, and transposed convolution as the backward-data
// convolution, and the weight gradient as the backward-weights (filter)
// convolution. Bias is added by a small kernel here, and the layout
// conversions of the channels-last path (dnn.h) are a tiled transpose.
#include <algorithm>
#include <cstdint>

#include "backend/rocm/dnn.h"
#include "backend/rocm/kernels/common.h"

namespace pyflame::backend::rocm {

namespace {

// y (N, C, inner) += b[c]
template <typename T>
__global__ void add_channel_bias(T* y, const T* b, int64_t C, int64_t inner, int64_t total) {
  PF_GRID_STRIDE(i, total) {
    const int64_t c = (i / inner) % C;
    y[i] = T(static_cast<float>(y[i]) + static_cast<float>(b[c]));
  }
}

struct Crop3 {
  int64_t src[3], dst[3], off[3];
};

// dst (planes, *dst) = src (planes, *src) shifted by off, zero outside src.
template <typename T>
__global__ void crop_copy(T* dst, const T* src, Crop3 g, int64_t total) {
  PF_GRID_STRIDE(i, total) {
    int64_t r = i;
    const int64_t x = r % g.dst[2];
    r /= g.dst[2];
    const int64_t y = r % g.dst[1];
    r /= g.dst[1];
    const int64_t z = r % g.dst[0];
    const int64_t plane = r / g.dst[0];
    const int64_t sx = x + g.off[2], sy = y + g.off[1], sz = z + g.off[0];
    T v = T(0.0f);
    if (sx < g.src[2] && sy < g.src[1] && sz < g.src[0]) {
      v = src[((plane * g.src[0] + sz) * g.src[1] + sy) * g.src[2] + sx];
    }
    dst[i] = v;
  }
}

constexpr int kTile = 32, kTileRows = 8;  // a 32x32 tile per block of 32x8 threads

// dst (B, C, R) = src (B, R, C): each block moves tiles through shared
// memory so that both the reads and the writes are coalesced. The padding
// columns keep the transposed reads free of bank conflicts. 16-bit elements
// go in 64x64 tiles, each thread moving element pairs (one 4-byte access)
// where both extents are even and the pointers 4-byte aligned: 2-byte
// accesses alone leave the memory system half idle.
// P: 2 for 16-bit T (pairs), else 1.
template <typename T, int P>
__global__ void transpose_tiles(T* dst, const T* src, int64_t batch, int64_t rows, int64_t cols, bool pairs) {
  constexpr int kT = kTile * P;
  __shared__ T tile[kT][kT + P];
  const int64_t tiles_c = (cols + kT - 1) / kT, tiles = tiles_c * ((rows + kT - 1) / kT);
  const int tx = threadIdx.x * P;
  for (int64_t b = blockIdx.y; b < batch; b += gridDim.y) {
    const T* s = src + b * rows * cols;
    T* d = dst + b * rows * cols;
    for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
      const int64_t r0 = t / tiles_c * kT, c0 = t % tiles_c * kT;
      for (int i = threadIdx.y; i < kT; i += kTileRows) {
        const int64_t r = r0 + i, c = c0 + tx;
        if (r >= rows) continue;
        if constexpr (P == 2) {
          if (pairs && c + 1 < cols) {
            const uint32_t v = *reinterpret_cast<const uint32_t*>(s + r * cols + c);
            tile[i][tx] = static_cast<T>(v & 0xffffu);
            tile[i][tx + 1] = static_cast<T>(v >> 16);
            continue;
          }
        }
#pragma unroll
        for (int e = 0; e < P; ++e) {
          if (c + e < cols) tile[i][tx + e] = s[r * cols + c + e];
        }
      }
      __syncthreads();
      for (int i = threadIdx.y; i < kT; i += kTileRows) {
        const int64_t c = c0 + i, r = r0 + tx;
        if (c >= cols) continue;
        if constexpr (P == 2) {
          if (pairs && r + 1 < rows) {
            *reinterpret_cast<uint32_t*>(d + c * rows + r) = uint32_t(tile[tx][i]) | (uint32_t(tile[tx + 1][i]) << 16);
            continue;
          }
        }
#pragma unroll
        for (int e = 0; e < P; ++e) {
          if (r + e < rows) d[c * rows + r + e] = tile[tx + e][i];
        }
      }
      __syncthreads();
    }
  }
}

// The same transpose for few columns (a filter's KCRS -> KRSC: 9 for a 3x3
// window), where a tile would be mostly empty: one thread per destination
// element (coalesced writes), the strided reads served by the caches.
template <typename T>
__global__ void transpose_narrow(T* dst, const T* src, uint32_t rows, uint32_t cols, uint32_t total) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const uint32_t r = i % rows, q = i / rows, c = q % cols, b = q / cols;
    dst[i] = src[(b * rows + r) * cols + c];
  }
}

constexpr int64_t kNarrowCols = 16;

template <typename T>
void launch_transpose(DeviceContext& ctx, int64_t batch, int64_t rows, int64_t cols, const void* src, void* dst) {
  const int64_t total = batch * rows * cols;
  if (cols < kNarrowCols && total < (int64_t(1) << 31)) {
    transpose_narrow<T><<<grid_for(ctx, total, kThreads), kThreads, 0, ctx.stream>>>(
        static_cast<T*>(dst), static_cast<const T*>(src), uint32_t(rows), uint32_t(cols), uint32_t(total));
    PF_HIP_CHECK_LAUNCH();
    return;
  }
  constexpr int P = sizeof(T) == 2 ? 2 : 1;
  constexpr int64_t kT = kTile * P;
  const bool pairs = rows % 2 == 0 && cols % 2 == 0 && (reinterpret_cast<uintptr_t>(src) % 4) == 0 &&
                     (reinterpret_cast<uintptr_t>(dst) % 4) == 0;
  const int64_t tiles = ((rows + kT - 1) / kT) * ((cols + kT - 1) / kT);
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(tiles, 1 << 20)),
                  static_cast<unsigned>(std::min<int64_t>(batch, 65535)));
  transpose_tiles<T, P><<<grid, dim3(kTile, kTileRows), 0, ctx.stream>>>(
      static_cast<T*>(dst), static_cast<const T*>(src), batch, rows, cols, pairs);
  PF_HIP_CHECK_LAUNCH();
}

// Whether a convolution's data input is channels-last (else row-major:
// conv_data_input gives nothing else).
bool input_channels_last(const Tensor& x, const char* fn) {
  if (x.is_row_contiguous()) return false;
  if (!is_channels_last(x)) {
    throw RuntimeError(errmsg(fn, "internal: the input is neither row-major nor channels-last"));
  }
  return true;
}

}  // namespace

namespace dnn {

void transpose_batched(DeviceContext& ctx, size_t itemsize, int64_t batch, int64_t rows, int64_t cols,
                       const void* src, void* dst) {
  if (batch == 0 || rows == 0 || cols == 0) return;
  if (rows == 1 || cols == 1) {  // the same memory order: a plain copy
    PF_HIP_CHECK(hipMemcpyAsync(dst, src, batch * rows * cols * itemsize, hipMemcpyDeviceToDevice, ctx.stream));
    return;
  }
  switch (itemsize) {
    case 2: launch_transpose<uint16_t>(ctx, batch, rows, cols, src, dst); break;
    case 4: launch_transpose<uint32_t>(ctx, batch, rows, cols, src, dst); break;
    case 8: launch_transpose<uint64_t>(ctx, batch, rows, cols, src, dst); break;
    default:
      throw RuntimeError(errmsg("conv", "no layout conversion for " + std::to_string(itemsize) + "-byte elements"));
  }
}

}  // namespace dnn
}  // namespace pyflame::backend::rocm

namespace pyflame {

using namespace backend::rocm;

void Conv::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const Tensor &x = in[0], &w = in[1];
  const int nsp = geom.nspatial();
  const int64_t N = x.shape(0), Cin = x.shape(1), Cout = out.shape(1);
  if (Cin == 0) {  // an empty sum: bias (or zero) everywhere
    PF_HIP_CHECK(hipMemsetAsync(out.raw_data(), 0, out.nbytes(), ctx.stream));
  } else if (!geom.transposed) {
    dnn::ConvProblem p{out.dtype(), x.shape(), w.shape(), out.shape(), geom.stride, geom.padding, geom.dilation,
                       geom.groups};
    p.x_channels_last = input_channels_last(x, name());
    dnn::conv_forward(ctx, p, x.raw_data(), w.raw_data(), out.raw_data());
  } else {
    // The transposed convolution's output is the forward convolution's
    // input. The forward rule fixes that size up to stride - 1 trailing
    // elements; a larger output_padding (allowed when dilation exceeds the
    // stride) is computed unpadded and cropped, zero beyond.
    bool direct = true;
    for (int d = 0; d < nsp; ++d) {
      const int64_t o = out.shape(2 + d), k = w.shape(2 + d);
      const int64_t num = o + 2 * geom.padding[d] - geom.dilation[d] * (k - 1) - 1;
      direct = direct && num >= 0 && num / geom.stride[d] + 1 == x.shape(2 + d);
    }
    if (direct) {
      dnn::ConvProblem p{out.dtype(), out.shape(), w.shape(), x.shape(), geom.stride, geom.padding, geom.dilation,
                         geom.groups};
      dnn::conv_backward_data(ctx, p, out.raw_data(), w.raw_data(), x.raw_data());
    } else {
      Shape full{N, Cout};
      Crop3 c{{1, 1, 1}, {1, 1, 1}, {0, 0, 0}};
      for (int d = 0; d < nsp; ++d) {
        const int64_t k = w.shape(2 + d), i = x.shape(2 + d);
        full.push_back((i - 1) * geom.stride[d] + geom.dilation[d] * (k - 1) + 1);
        c.src[3 - nsp + d] = full.back();
        c.dst[3 - nsp + d] = out.shape(2 + d);
        c.off[3 - nsp + d] = geom.padding[d];
      }
      auto tmp = temp_buffer(ctx, shape_size(full) * out.itemsize());
      dnn::ConvProblem p{out.dtype(), full, w.shape(), x.shape(), geom.stride, std::vector<int64_t>(nsp, 0),
                         geom.dilation, geom.groups};
      dnn::conv_backward_data(ctx, p, tmp->ptr, w.raw_data(), x.raw_data());
      dispatch_float(out.dtype(), [&](auto tag) {
        using T = decltype(tag);
        crop_copy<T><<<grid_for(ctx, out.size(), kThreads), kThreads, 0, ctx.stream>>>(
            out.data<T>(), static_cast<const T*>(tmp->ptr), c, out.size());
        PF_HIP_CHECK_LAUNCH();
      });
    }
  }
  if (has_bias) {
    const int64_t inner = out.size() / std::max<int64_t>(N * Cout, 1);
    dispatch_float(out.dtype(), [&](auto tag) {
      using T = decltype(tag);
      add_channel_bias<T><<<grid_for(ctx, out.size(), kThreads), kThreads, 0, ctx.stream>>>(
          out.data<T>(), in[2].data<T>(), Cout, inner, out.size());
      PF_HIP_CHECK_LAUNCH();
    });
  }
}

void ConvWeightGrad::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  const Tensor &x = in[0], &gy = in[1];
  if (x.size() == 0 || gy.size() == 0 || out.size() == 0) {  // an empty sum
    if (out.size()) PF_HIP_CHECK(hipMemsetAsync(out.raw_data(), 0, out.nbytes(), ctx.stream));
    return;
  }
  dnn::ConvProblem p{out.dtype(), x.shape(), out.shape(), gy.shape(), geom.stride, geom.padding, geom.dilation,
                     geom.groups};
  p.x_channels_last = input_channels_last(x, name());
  dnn::conv_backward_weights(ctx, p, x.raw_data(), out.raw_data(), gy.raw_data());
}

}  // namespace pyflame
