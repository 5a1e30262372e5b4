#include "pyflame/dtype.h"

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
  }
  return "?";
}

Dtype dtype_from_string(std::string_view s, const char* fn) {
  if (s == "float32" || s == "float" || s == "f4") return Dtype::Float32;
  if (s == "float16" || s == "half" || s == "f2") return Dtype::Float16;
  if (s == "bfloat16") return Dtype::BFloat16;
  if (s == "int32" || s == "i4") return Dtype::Int32;
  if (s == "int64" || s == "long" || s == "i8") return Dtype::Int64;
  if (s == "bool") return Dtype::Bool;
  throw ValueError(errmsg(fn, "unsupported dtype '" + std::string(s) +
                                  "' (expected float32, float16, bfloat16, int32, int64 or bool)"));
}

namespace {
int category(Dtype t) { return t == Dtype::Bool ? 0 : is_integral(t) ? 1 : 2; }
}  // namespace

Dtype promote_types(Dtype a, Dtype b) {
  if (a == b) return a;
  int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 1) return Dtype::Int64;  // int32 with int64
  // Two different floats: only float32 holds both float16 and bfloat16.
  return Dtype::Float32;
}

Dtype promote_with_scalar(Dtype t, ScalarKind s) {
  int cs = s == ScalarKind::Bool ? 0 : s == ScalarKind::Int ? 1 : 2;
  if (cs <= category(t)) return t;
  return cs == 1 ? Dtype::Int64 : Dtype::Float32;
}

}  // namespace pyflame
