// 16-bit float storage types for the CPU backend. Arithmetic happens in float;
// conversions round to nearest even and keep NaN a NaN.
#pragma once
#include <cstdint>
#include <cstring>

namespace pyflame {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct bf16_t {
  uint16_t bits = 0;
  bf16_t() = default;
  bf16_t(float f) {  // NOLINT: implicit like a float type
    uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      bits = static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
    } else {
      u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
      bits = static_cast<uint16_t>(u >> 16);
    }
  }
  operator float() const { return bits_float(static_cast<uint32_t>(bits) << 16); }
};

struct half_t {
  uint16_t bits = 0;
  half_t() = default;
  half_t(float f) { bits = from_float(f); }  // NOLINT
  operator float() const { return to_float(bits); }

  static uint16_t from_float(float f) {
    uint32_t u = float_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t mag = u & 0x7fffffffu;
    if (mag > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
    if (mag >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
    if (mag < 0x38800000u) {  // subnormal or zero in half
      // Scale so the float adder does the rounding: 0.5 shifts the mantissa.
      float v = bits_float(mag) + 0.5f;
      return static_cast<uint16_t>(sign | (float_bits(v) - 0x3f000000u));
    }
    uint32_t odd = (mag >> 13) & 1u;
    mag += 0xc8000fffu + odd;  // rebias exponent (-112 << 23) and round to even
    return static_cast<uint16_t>(sign | (mag >> 13));
  }
  static float to_float(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {  // subnormal: value = man * 2^-24
      float v = static_cast<float>(man) * 5.9604644775390625e-8f;
      return sign ? -v : v;
    }
    return bits_float(sign | ((exp + 112) << 23) | (man << 13));
  }
};

static_assert(sizeof(half_t) == 2 && sizeof(bf16_t) == 2);

}  // namespace pyflame
