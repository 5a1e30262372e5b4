// Elementwise helpers shared by the unfused kernels (elementwise.cc) and
// fused regions (fused.cc), so both compute each value the same way.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/cpu/kernel_utils.h"

namespace pyflame::cpu {

// Conversion through a wide type: 16-bit floats via float, others direct.
template <typename From, typename To>
To convert(From v) {
  if constexpr (std::is_same_v<To, bool>) return static_cast<float>(v) != 0.0f;
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
