#include "pyflame/dtype.h"

#include <algorithm>
#include <limits>

#include "pyflame/errors.h"

namespace pyflame {

size_t itemsize(Dtype t) {
  switch (t) {
    case Dtype::Bool: return 1;
    case Dtype::Int32: return 4;
    case Dtype::Int64: return 8;
    case Dtype::Float16: return 2;
    case Dtype::BFloat16: return 2;
    case Dtype::Float32: return 4;
    case Dtype::Float64: return 8;
    case Dtype::Int8: return 1;
    case Dtype::Int16: return 2;
    case Dtype::UInt8: return 1;
  }
  return 0;
}

const char* dtype_name(Dtype t) {
  switch (t) {
    case Dtype::Bool: return "bool";
    case Dtype::Int32: return "int32";
    case Dtype::Int64: return "int64";
    case Dtype::Float16: return "float16";
    case Dtype::BFloat16: return "bfloat16";
    case Dtype::Float32: return "float32";
    case Dtype::Float64: return "float64";
    case Dtype::Int8: return "int8";
    case Dtype::Int16: return "int16";
    case Dtype::UInt8: return "uint8";
  }
  return "?";
}

Dtype dtype_from_string(std::string_view s, const char* fn) {
  if (s == "float32" || s == "float" || s == "f4") return Dtype::Float32;
  if (s == "float16" || s == "half" || s == "f2") return Dtype::Float16;
  if (s == "bfloat16") return Dtype::BFloat16;
  if (s == "int32" || s == "i4") return Dtype::Int32;
  if (s == "int64" || s == "long" || s == "i8") return Dtype::Int64;
  if (s == "float64" || s == "double" || s == "f8") return Dtype::Float64;
  if (s == "int8" || s == "i1") return Dtype::Int8;
  if (s == "int16" || s == "short" || s == "i2") return Dtype::Int16;
  if (s == "uint8" || s == "u1") return Dtype::UInt8;
  if (s == "bool") return Dtype::Bool;
  throw ValueError(errmsg(fn, "unsupported dtype '" + std::string(s) +
                                  "' (expected float64, float32, float16, bfloat16, int64, int32, "
                                  "int16, int8, uint8 or bool)"));
}

namespace {
int category(Dtype t) { return t == Dtype::Bool ? 0 : is_integral(t) ? 1 : 2; }

// The signed integer of `bytes` bytes (1, 2, 4 or 8).
Dtype signed_int(size_t bytes) {
  return bytes <= 1 ? Dtype::Int8 : bytes == 2 ? Dtype::Int16 : bytes == 4 ? Dtype::Int32 : Dtype::Int64;
}

Dtype promote_ints(Dtype a, Dtype b) {
  if (a == Dtype::UInt8 || b == Dtype::UInt8) {
    // uint8 with a signed integer: a signed type wider than 8 bits holds both
    // (int64 stays int64, as the standard's table says).
    Dtype s = a == Dtype::UInt8 ? b : a;
    return signed_int(std::max<size_t>(itemsize(s), 2));
  }
  return itemsize(a) >= itemsize(b) ? a : b;
}

Dtype promote_floats(Dtype a, Dtype b) {
  if (a == Dtype::Float64 || b == Dtype::Float64) return Dtype::Float64;
  if (a == Dtype::Float32 || b == Dtype::Float32) return Dtype::Float32;
  return Dtype::Float32;  // float16 with bfloat16: only float32 holds both
}
}  // namespace

Dtype promote_types(Dtype a, Dtype b) {
  if (a == b) return a;
  int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  return ca == 1 ? promote_ints(a, b) : promote_floats(a, b);
}

Dtype promote_with_scalar(Dtype t, ScalarKind s) {
  int cs = s == ScalarKind::Bool ? 0 : s == ScalarKind::Int ? 1 : 2;
  if (cs <= category(t)) return t;
  return cs == 1 ? Dtype::Int64 : Dtype::Float32;
}

FloatInfo finfo(Dtype t, const char* fn) {
  switch (t) {
    case Dtype::Float16: return {16, 0x1p-10, 65504.0, -65504.0, 0x1p-14, 1e-3};
    case Dtype::BFloat16: return {16, 0x1p-7, 0x1.fep127, -0x1.fep127, 0x1p-126, 1e-2};
    case Dtype::Float32:
      return {32, 0x1p-23, std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
              0x1p-126, 1e-6};
    case Dtype::Float64:
      return {64, 0x1p-52, std::numeric_limits<double>::max(), -std::numeric_limits<double>::max(),
              0x1p-1022, 1e-15};
    default: throw ValueError(errmsg(fn, std::string("not a floating dtype: ") + dtype_name(t)));
  }
}

IntInfo iinfo(Dtype t, const char* fn) {
  switch (t) {
    case Dtype::Int8: return {8, INT8_MIN, INT8_MAX};
    case Dtype::Int16: return {16, INT16_MIN, INT16_MAX};
    case Dtype::Int32: return {32, INT32_MIN, INT32_MAX};
    case Dtype::Int64: return {64, INT64_MIN, INT64_MAX};
    case Dtype::UInt8: return {8, 0, UINT8_MAX};
    default: throw ValueError(errmsg(fn, std::string("not an integer dtype: ") + dtype_name(t)));
  }
}

}  // namespace pyflame
