// Counter-based random bits shared by the CPU and GPU backends, so a seed
// gives the same numbers on every device.
#pragma once
#include <cmath>
#include <cstdint>

#if defined(__HIPCC__) || defined(__CUDACC__)
#define PF_HD __host__ __device__
#else
#define PF_HD
#endif

namespace pyflame {

PF_HD inline uint64_t mix64(uint64_t z) {  // splitmix64 finalizer
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

PF_HD inline uint64_t random_bits(uint64_t key, uint64_t i) { return mix64(mix64(i) ^ key); }

// Uniform in [0, 1) with `mbits` bits of precision (24 for float32, 11 for
// float16, 8 for bfloat16) so rounding to the storage type never gives 1.
PF_HD inline float uniform_from_bits(uint64_t b, int mbits) {
  return static_cast<float>(b >> (64 - mbits)) * (1.0f / static_cast<float>(1ull << mbits));
}

// Standard normal by Box-Muller from one 64-bit draw.
PF_HD inline float normal_from_bits(uint64_t b) {
  float u1 = (static_cast<float>(b >> 40) + 1.0f) * (1.0f / 16777216.0f);  // (0, 1]
  float u2 = static_cast<float>(b & 0xffffffull) * (1.0f / 16777216.0f);
  return sqrtf(-2.0f * logf(u1)) * cosf(6.283185307179586f * u2);
}

// float64 draws use all of double's precision: 53 bits for uniforms, two
// 32-bit halves for Box-Muller.
PF_HD inline double uniform_f64_from_bits(uint64_t b) { return static_cast<double>(b >> 11) * 0x1p-53; }
PF_HD inline double normal_f64_from_bits(uint64_t b) {
  double u1 = (static_cast<double>(b >> 32) + 1.0) * 0x1p-32;  // (0, 1]
  double u2 = static_cast<double>(b & 0xffffffffull) * 0x1p-32;
  return ::sqrt(-2.0 * ::log(u1)) * ::cos(6.283185307179586 * u2);
}

}  // namespace pyflame
