// Shared pieces of the HIP kernels: dtype dispatch to device storage types,
// strided indexing of operands, vectorized packs, launch helpers.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>

#include "backend/dispatch.h"
#include "backend/elementwise_math.h"
#include "backend/layout.h"
#include "backend/rocm/context.h"
#include "backend/rocm/gpu/device_utils.h"
#include "ir/primitives.h"

namespace pyflame::backend::rocm {

using gpu::bf16_t;
using gpu::half_t;

template <typename T>
constexpr bool is_half_v = std::is_same_v<T, half_t> || std::is_same_v<T, bf16_t>;
// Arithmetic type: 16-bit floats compute in float, bool in int32.
template <typename T>
using acc_t = std::conditional_t<is_half_v<T>, float, std::conditional_t<std::is_same_v<T, bool>, int32_t, T>>;

// Arithmetic type of the float kernels: double for float64, float otherwise.
template <typename T>
using acc_float_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Calls f(T{}) with T the element type of `t` (16-bit floats as our storage types).
template <typename F>
void dispatch(Dtype t, F&& f) {
  dispatch_dtype<half_t, bf16_t>(t, std::forward<F>(f));
}

template <typename F>
void dispatch_float(Dtype t, F&& f) {
  dispatch_float_dtype<half_t, bf16_t>(t, std::forward<F>(f));
}

// Conversion as on the CPU (cpu/elementwise.cc): 16-bit floats via float,
// floats to 8- and 16-bit integers via int64 (float_to_small_int).
template <typename To, typename From>
__host__ __device__ inline To convert(From v) {
  constexpr bool from_float = is_half_v<From> || std::is_floating_point_v<From>;
  if constexpr (std::is_same_v<To, bool>) {
    if constexpr (is_half_v<From>) return static_cast<float>(v) != 0.0f;
    else return v != From(0);
  } else if constexpr (from_float && std::is_integral_v<To> && sizeof(To) <= 2) {
    if constexpr (is_half_v<From>) return float_to_small_int<To>(static_cast<float>(v));
    else return float_to_small_int<To>(v);
  } else if constexpr (is_half_v<To> || is_half_v<From>) return To(static_cast<float>(v));
  else return static_cast<To>(v);
}

constexpr int kMaxDims = 8;

// Offsets of N strided operands for a linear index into a row-major shape.
template <int N>
struct Indexer {
  int nd = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};

  __device__ inline void offsets(int64_t i, int64_t (&o)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) o[k] = 0;
    for (int d = nd - 1; d >= 0; --d) {
      int64_t idx = i % shape[d];
      i /= shape[d];
#pragma unroll
      for (int k = 0; k < N; ++k) o[k] += idx * strides[k][d];
    }
  }
};

template <int N>
Indexer<N> make_indexer(const Shape& shape, const std::array<const Strides*, N>& st, const char* fn) {
  Layout<N> L = collapse<N>(shape, st);
  if (L.shape.size() > kMaxDims) {
    throw RuntimeError(errmsg(fn, "layout has more than 8 axes that cannot be merged; "
                                  "make the input contiguous first"));
  }
  Indexer<N> ix;
  ix.nd = static_cast<int>(L.shape.size());
  for (int d = 0; d < ix.nd; ++d) {
    ix.shape[d] = L.shape[d];
    for (int k = 0; k < N; ++k) ix.strides[k][d] = L.strides[k][d];
  }
  return ix;
}

// How an input is read: element i, element 0 (broadcast scalar), or strided.
enum class Access : uint8_t { Contig, Scalar, Strided };

inline Access access_of(const Shape& shape, const Strides& st) {
  bool scalar = true;
  for (size_t d = 0; d < shape.size(); ++d) scalar &= shape[d] == 1 || st[d] == 0;
  if (scalar) return Access::Scalar;
  Strides rm = row_major_strides(shape);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] != 1 && st[d] != rm[d]) return Access::Strided;
  }
  return Access::Contig;
}

template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

#define PF_GRID_STRIDE(i, n)                                                            \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);             \
       i += int64_t(gridDim.x) * blockDim.x)

constexpr int kThreads = 256;

}  // namespace pyflame::backend::rocm

namespace pyflame::backend::rocm {

// Row-major copy of a strided device array (same dtype), on ctx's stream.
void copy_strided(Dtype dtype, const void* src, const Shape& shape, const Strides& strides, void* dst,
                  DeviceContext& ctx);

// A temporary device buffer on ctx's stream; freed (stream-ordered) with the
// returned handle.
std::shared_ptr<Buffer> temp_buffer(DeviceContext& ctx, size_t bytes);


}  // namespace pyflame::backend::rocm
