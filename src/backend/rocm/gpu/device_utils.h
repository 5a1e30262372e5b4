// Device-side helpers for .hip kernels: wave size, shuffles, warp/block reductions, and our own
// 16-bit storage types (half_t, bf16_t). The storage types also work in plain host C++.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/rocm/gpu/runtime.h"

#if defined(PYFLAME_GPU_CUDA) && defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace pyflame::gpu {

// Host+device-safe limits: size shared scratch with these, never with PF_WAVE_SIZE, so that the
// host and every device pass agree on layouts.
inline constexpr int kMaxBlockThreads = 1024;
inline constexpr int kMinWaveSize = 32;
inline constexpr int kMaxWavesPerBlock = kMaxBlockThreads / kMinWaveSize;  // 32

}  // namespace pyflame::gpu

// ---------------------------------------------------------------------------------------------
// PF_WAVE_SIZE: wave width of the target being compiled, for device code only.
// - NVIDIA: 32.
// - AMD device pass: from the GFX family macro. clang's __AMDGCN_WAVEFRONT_SIZE(__) is deprecated
//   (warns from LLVM 20 / ROCm 6.3.2, removed in ROCm 7.2) and, in the host pass, is always 64.
//   RDNA (gfx10+) is assumed to be built in its default wave32 mode (no -mwavefrontsize64).
// - AMD host pass: one host pass serves every offload arch, so no value is right there (clang's
//   own macro says 64 even for a gfx1100-only build). PF_WAVE_SIZE then expands to a call of a
//   non-constexpr __device__ function: fine inside device function bodies, a compile error in host
//   code and in any constant expression. That is deliberate: `k<PF_WAVE_SIZE><<<...>>>` would
//   otherwise register k<64> on the host while gfx1100 code holds k<32> (invalid device function
//   at run time). So in device code use it in ordinary expressions (`const int`, plain `if`: the
//   device pass sees a literal and folds it); never in template arguments, array bounds,
//   `if constexpr` or `#if`. Size shared scratch with kMaxWavesPerBlock; host code asks
//   device_wave_size(device).
// ---------------------------------------------------------------------------------------------
#if defined(PYFLAME_GPU_CUDA)
#define PF_WAVE_SIZE 32
#elif defined(__HIP_DEVICE_COMPILE__)
#if defined(__GFX9__) || defined(__GFX8__) || defined(__GFX7__) || defined(__GFX6__)
#define PF_WAVE_SIZE 64
#elif defined(__GFX10__) || defined(__GFX11__) || defined(__GFX12__)
#define PF_WAVE_SIZE 32
#else
#error "device_utils.h: unknown AMDGPU family, add its wave size"
#endif
#elif defined(__HIPCC__)
namespace pyflame::gpu::detail {
__device__ inline int wave_size_device_only() { return 64; }  // never executed: host pass only
}  // namespace pyflame::gpu::detail
#define PF_WAVE_SIZE (::pyflame::gpu::detail::wave_size_device_only())
#endif

// Cross-check the family table against clang's own macro while it exists. It is deprecated (even
// `defined()` warns, hence the pragmas) and gone in ROCm 7.2, where this check silently drops out.
#if defined(__HIP_DEVICE_COMPILE__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-pragma"
#if defined(__AMDGCN_WAVEFRONT_SIZE__)
static_assert(PF_WAVE_SIZE == __AMDGCN_WAVEFRONT_SIZE__,
              "PF_WAVE_SIZE disagrees with the compiler");
#endif
#pragma clang diagnostic pop
#endif

namespace pyflame::gpu {

// ---------------------------------------------------------------------------------------------
// 16-bit storage types. Conversions round to nearest even and keep NaN a NaN (quiet).
// ---------------------------------------------------------------------------------------------
namespace detail {

__host__ __device__ inline uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
__host__ __device__ inline float f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

__host__ __device__ inline uint16_t float_to_half_bits_sw(float f) {
  const uint32_t x = f32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u | ((a >> 13) & 0x3ffu);  // NaN: quiet, top payload
  if (a >= 0x47800000u) return sign | 0x7c00u;                        // >= 2^16 (and inf): inf
  if (a >= 0x38800000u) {                                             // normal half
    const uint32_t r = a + 0xc8000fffu + ((a >> 13) & 1u);  // rebias exponent, round half even
    return sign | static_cast<uint16_t>(r >> 13);           // a carry into 0x7c00 is inf: correct
  }
  if (a < 0x33000000u) return sign;  // < 2^-25 (ties at 2^-25 go to even 0)
  // Subnormal half: shift the full mantissa by 14..24 and round half even.
  const uint32_t shift = 126u - (a >> 23);
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;
  uint32_t h = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  h += (rem > half || (rem == half && (h & 1u))) ? 1u : 0u;
  return sign | static_cast<uint16_t>(h);
}

__host__ __device__ inline float half_bits_to_float_sw(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  uint32_t m = h & 0x3ffu;
  if (e == 0x1fu) return f32_from_bits(sign | 0x7f800000u | (m << 13));  // inf / NaN payload
  if (e != 0) return f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
  if (m == 0) return f32_from_bits(sign);
  uint32_t ef = 113u;  // subnormal: normalize
  while (!(m & 0x400u)) {
    m <<= 1;
    --ef;
  }
  return f32_from_bits(sign | (ef << 23) | ((m & 0x3ffu) << 13));
}

__host__ __device__ inline uint16_t float_to_bf16_bits_sw(float f) {
  const uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

__host__ __device__ inline uint16_t float_to_half_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(f));
#elif defined(__HIP_DEVICE_COMPILE__)
  return __builtin_bit_cast(uint16_t, static_cast<_Float16>(f));  // v_cvt_f16_f32, RNE
#else
  return float_to_half_bits_sw(f);
#endif
}

__host__ __device__ inline float half_bits_to_float(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#elif defined(__HIP_DEVICE_COMPILE__)
  return static_cast<float>(__builtin_bit_cast(_Float16, h));
#else
  return half_bits_to_float_sw(h);
#endif
}

__host__ __device__ inline uint16_t float_to_bf16_bits(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
  return float_to_bf16_bits_sw(f);
#endif
}

}  // namespace detail

// IEEE binary16 storage. Arithmetic happens in float.
struct alignas(2) half_t {
  uint16_t bits;
  half_t() = default;
  __host__ __device__ explicit half_t(float f) : bits(detail::float_to_half_bits(f)) {}
  __host__ __device__ operator float() const { return detail::half_bits_to_float(bits); }
  __host__ __device__ static half_t from_bits(uint16_t b) {
    half_t h;
    h.bits = b;
    return h;
  }
};

// bfloat16 storage (upper half of a float). Arithmetic happens in float.
struct alignas(2) bf16_t {
  uint16_t bits;
  bf16_t() = default;
  __host__ __device__ explicit bf16_t(float f) : bits(detail::float_to_bf16_bits(f)) {}
  __host__ __device__ operator float() const {
    return detail::f32_from_bits(static_cast<uint32_t>(bits) << 16);
  }
  __host__ __device__ static bf16_t from_bits(uint16_t b) {
    bf16_t h;
    h.bits = b;
    return h;
  }
};

static_assert(sizeof(half_t) == 2 && std::is_trivially_copyable_v<half_t>);
static_assert(sizeof(bf16_t) == 2 && std::is_trivially_copyable_v<bf16_t>);

#if defined(__HIPCC__) || defined(__CUDACC__)
// ---------------------------------------------------------------------------------------------
// Shuffles over a full wave. All lanes of the wave must be active and converged (CUDA uses the
// full 32-bit mask; AMD waves run in lock step, so the non-_sync forms are exact there and exist
// in every HIP version, unlike the 64-bit-mask _sync forms of HIP >= 6.2).
// Any trivially copyable T up to 8 bytes is moved as 32-bit words.
// ---------------------------------------------------------------------------------------------
namespace detail {
__device__ __forceinline__ int shfl_xor_word(int v, int lane_mask) {
#if defined(PYFLAME_GPU_CUDA)
  return __shfl_xor_sync(0xffffffffu, v, lane_mask, 32);
#else
  return __shfl_xor(v, lane_mask, PF_WAVE_SIZE);
#endif
}
__device__ __forceinline__ int shfl_down_word(int v, unsigned delta) {
#if defined(PYFLAME_GPU_CUDA)
  return __shfl_down_sync(0xffffffffu, v, delta, 32);
#else
  return __shfl_down(v, delta, PF_WAVE_SIZE);
#endif
}
template <class T, class F>
__device__ __forceinline__ T shfl_words(T v, F&& word_op) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "shuffle: T must be <= 8 bytes");
  constexpr int kWords = (sizeof(T) + 3) / 4;
  int w[kWords] = {};
  memcpy(w, &v, sizeof(T));
#pragma unroll
  for (int i = 0; i < kWords; ++i) w[i] = word_op(w[i]);
  T r;
  memcpy(&r, w, sizeof(T));
  return r;
}
}  // namespace detail

// Value of lane (lane ^ lane_mask).
template <class T>
__device__ __forceinline__ T warp_shfl_xor(T v, int lane_mask) {
  return detail::shfl_words(v, [=](int w) { return detail::shfl_xor_word(w, lane_mask); });
}
// Value of lane (lane + delta); lanes past the end keep their own value.
template <class T>
__device__ __forceinline__ T warp_shfl_down(T v, unsigned delta) {
  return detail::shfl_words(v, [=](int w) { return detail::shfl_down_word(w, delta); });
}

// Reduction ops. max/min propagate NaN (like NumPy).
struct SumOp {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return (a > b || a != a) ? a : b;
  }
};
struct MinOp {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return (a < b || a != a) ? a : b;
  }
};

// Butterfly reduction: every lane of the wave gets the result.
template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int offset = PF_WAVE_SIZE / 2; offset > 0; offset /= 2) v = op(v, warp_shfl_xor(v, offset));
  return v;
}
template <class T>
__device__ __forceinline__ T warp_reduce_sum(T v) {
  return warp_reduce(v, SumOp{});
}
template <class T>
__device__ __forceinline__ T warp_reduce_max(T v) {
  return warp_reduce(v, MaxOp{});
}
template <class T>
__device__ __forceinline__ T warp_reduce_min(T v) {
  return warp_reduce(v, MinOp{});
}

// Linear thread index / count for 1D, 2D or 3D blocks.
__device__ __forceinline__ unsigned block_thread_id() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
__device__ __forceinline__ unsigned block_num_threads() {
  return blockDim.x * blockDim.y * blockDim.z;
}

// Whole-block reduction; every thread gets the result. Call from all threads of the block
// (uniform control flow); block size must be a multiple of the wave size, at most 1024.
// Two __syncthreads(): consecutive calls may reuse the scratch safely.
// kIdempotent (max/min): missing waves are filled with wave 0's value; otherwise with T(0).
template <bool kIdempotent, class T, class Op>
__device__ T block_reduce(T v, Op op) {
  __shared__ T partial[kMaxWavesPerBlock];
  const unsigned tid = block_thread_id();
  const unsigned lane = tid % PF_WAVE_SIZE, wave = tid / PF_WAVE_SIZE;
  const unsigned num_waves = block_num_threads() / PF_WAVE_SIZE;
  v = warp_reduce(v, op);
  if (lane == 0) partial[wave] = v;
  __syncthreads();
  // Each wave reduces the per-wave partials itself: no broadcast step needed.
  v = lane < num_waves ? partial[lane] : (kIdempotent ? partial[0] : T(0));
  v = warp_reduce(v, op);
  __syncthreads();
  return v;
}
template <class T>
__device__ T block_reduce_sum(T v) {
  return block_reduce<false>(v, SumOp{});
}
template <class T>
__device__ T block_reduce_max(T v) {
  return block_reduce<true>(v, MaxOp{});
}
template <class T>
__device__ T block_reduce_min(T v) {
  return block_reduce<true>(v, MinOp{});
}
#endif  // __HIPCC__ || __CUDACC__

}  // namespace pyflame::gpu
