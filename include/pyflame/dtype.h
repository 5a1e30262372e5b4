// Element types and promotion rules.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pyflame {

enum class Dtype : uint8_t { Bool, Int32, Int64, Float16, BFloat16, Float32 };

constexpr int kNumDtypes = 6;

size_t itemsize(Dtype t);
const char* dtype_name(Dtype t);  // "float32", "bfloat16", ...
Dtype dtype_from_string(std::string_view name, const char* fn = "dtype");

inline bool is_floating(Dtype t) {
  return t == Dtype::Float16 || t == Dtype::BFloat16 || t == Dtype::Float32;
}
inline bool is_integral(Dtype t) { return t == Dtype::Int32 || t == Dtype::Int64; }

// Promotion of two tensor dtypes, by category (bool < integer < floating),
// then width. float16 with bfloat16 gives float32; an integer with a 16-bit
// float keeps the float (as PyTorch and MLX do; NumPy has no bfloat16).
Dtype promote_types(Dtype a, Dtype b);

// Python scalars are weakly typed: they adopt the tensor's dtype unless their
// category is higher (an int tensor times 0.5 gives float32).
enum class ScalarKind { Bool, Int, Float };
Dtype promote_with_scalar(Dtype tensor, ScalarKind scalar);

}  // namespace pyflame
