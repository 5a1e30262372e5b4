// Elementwise helpers shared by the unfused kernels (elementwise.cc) and
// fused regions (fused.cc), so both compute each value the same way.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/cpu/kernel_utils.h"
#include "backend/elementwise_math.h"

namespace pyflame::cpu {

// Conversion through a wide type: 16-bit floats via float, floats to 8- and
// 16-bit integers via int64 (float_to_small_int), others direct.
template <typename From, typename To>
To convert(From v) {
  constexpr bool from_float = is_half_v<From> || std::is_floating_point_v<From>;
  if constexpr (std::is_same_v<To, bool>) return static_cast<acc_t<From>>(v) != acc_t<From>(0);
  else if constexpr (from_float && std::is_integral_v<To> && sizeof(To) <= 2) return float_to_small_int<To>(acc_t<From>(v));
  else if constexpr (is_half_v<From> || is_half_v<To>) return To(static_cast<float>(v));
  else return static_cast<To>(v);
}

// m ? u : v as a bitwise select: compilers branch on `m ? u : v`, and a
// random mask (a ReLU gradient) mispredicts half the time; the mask form
// vectorizes.
template <typename T>
inline T select(bool m, T u, T v) {
  using U = std::conditional_t<sizeof(T) == 1, uint8_t,
            std::conditional_t<sizeof(T) == 2, uint16_t,
            std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;
  static_assert(sizeof(U) == sizeof(T));
  U a, b;
  std::memcpy(&a, &u, sizeof(T));
  std::memcpy(&b, &v, sizeof(T));
  const U mask = static_cast<U>(U(0) - static_cast<U>(m));
  const U r = static_cast<U>((a & mask) | (b & static_cast<U>(~mask)));
  T out;
  std::memcpy(static_cast<void*>(&out), &r, sizeof(T));
  return out;
}

}  // namespace pyflame::cpu
