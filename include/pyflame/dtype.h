// Element types and promotion rules.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pyflame {

// Values are stable (appended, never renumbered): the Python enum and DLPack
// tables index by them.
enum class Dtype : uint8_t { Bool, Int32, Int64, Float16, BFloat16, Float32, Float64, Int8, Int16, UInt8 };

constexpr int kNumDtypes = 10;

size_t itemsize(Dtype t);
const char* dtype_name(Dtype t);  // "float32", "bfloat16", ...
Dtype dtype_from_string(std::string_view name, const char* fn = "dtype");

inline bool is_floating(Dtype t) {
  return t == Dtype::Float16 || t == Dtype::BFloat16 || t == Dtype::Float32 || t == Dtype::Float64;
}
// Integer dtypes (bool is not one).
inline bool is_integral(Dtype t) {
  return t == Dtype::Int8 || t == Dtype::Int16 || t == Dtype::Int32 || t == Dtype::Int64 ||
         t == Dtype::UInt8;
}
// Holds negative values: the signed integers and the floats.
inline bool is_signed(Dtype t) { return t != Dtype::Bool && t != Dtype::UInt8; }

// Range and precision of a dtype, as numpy.finfo / numpy.iinfo report them.
struct FloatInfo {
  int bits;
  double eps, max, min, smallest_normal, resolution;
};
struct IntInfo {
  int bits;
  int64_t min, max;  // uint8's range fits int64
};
FloatInfo finfo(Dtype t, const char* fn = "finfo");
IntInfo iinfo(Dtype t, const char* fn = "iinfo");

// Promotion of two tensor dtypes, by category (bool < integer < floating):
// the Array API standard's table within a category (int8 < int16 < int32 <
// int64; uint8 with a signed integer gives the smallest signed type holding
// both; float32 with float64 gives float64), the other operand's dtype across
// categories (an integer with any float keeps the float, as PyTorch does;
// the standard leaves mixed kinds unspecified). float16 with bfloat16 gives
// float32 (as PyTorch; NumPy has no bfloat16).
Dtype promote_types(Dtype a, Dtype b);

// Python scalars are weakly typed: they adopt the tensor's dtype unless their
// category is higher (an int tensor times 0.5 gives float32).
enum class ScalarKind { Bool, Int, Float };
Dtype promote_with_scalar(Dtype tensor, ScalarKind scalar);

}  // namespace pyflame
