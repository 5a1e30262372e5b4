#include "pyflame/checked.h"

#include <algorithm>
#include <limits>
#include <iomanip>
#include <sstream>

namespace pyflame {

namespace {
std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

[[noreturn]] void overflow(const char* fn, const std::string& what) {
  throw ValueError(errmsg(fn, what + " overflows 64 bits"));
}
}  // namespace

int64_t checked_add(int64_t a, int64_t b, const char* fn, const char* what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) overflow(fn, what);
  return r;
}

int64_t checked_mul(int64_t a, int64_t b, const char* fn, const char* what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) overflow(fn, what);
  return r;
}

int64_t checked_shape_size(const std::vector<int64_t>& shape, const char* fn) {
  int64_t n = 1, span = 1;
  for (int64_t d : shape) {
    if (d < 0) throw ValueError(errmsg(fn, "negative dimension in shape " + shape_text(shape)));
    if (__builtin_mul_overflow(span, std::max<int64_t>(d, 1), &span)) {
      throw ValueError(errmsg(fn, "shape " + shape_text(shape) + " is too large: its size overflows 64 bits"));
    }
    n *= d;  // <= span in magnitude: cannot overflow
  }
  return n;
}

int64_t checked_nbytes(const std::vector<int64_t>& shape, size_t itemsize, const char* fn) {
  const int64_t n = checked_shape_size(shape, fn);
  int64_t span = 1;
  for (int64_t d : shape) span *= std::max<int64_t>(d, 1);  // fits: checked above
  int64_t bytes;
  if (__builtin_mul_overflow(span, static_cast<int64_t>(itemsize), &bytes)) {
    throw ValueError(errmsg(fn, "shape " + shape_text(shape) + " is too large: " +
                                    std::to_string(itemsize) + "-byte elements overflow 64 bits"));
  }
  return n * static_cast<int64_t>(itemsize);
}

OffsetRange checked_offset_range(const std::vector<int64_t>& shape,
                                 const std::vector<int64_t>& strides, int64_t offset,
                                 const char* fn) {
  if (shape.size() != strides.size()) throw ValueError(errmsg(fn, "strides do not match the shape"));
  OffsetRange r{offset, offset};
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return {offset, offset};
  }
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t reach = checked_mul(shape[i] - 1, strides[i], fn, "offset");
    if (reach < 0) r.lo = checked_add(r.lo, reach, fn, "offset");
    else r.hi = checked_add(r.hi, reach, fn, "offset");
  }
  return r;
}

void check_value_fits(double v, Dtype t, const char* fn) {
  if (!is_integral(t)) return;
  // Conversion truncates toward zero: int32 takes (-2^31 - 1, 2^31), uint8
  // (-1, 256), int64 [-2^63, 2^63) (-2^63 - 1 is not a double). NaN fails all.
  const IntInfo r = iinfo(t, fn);
  const bool ok = t == Dtype::Int64 ? v >= -0x1p63 && v < 0x1p63
                                    : v > static_cast<double>(r.min) - 1 && v < static_cast<double>(r.max) + 1;
  if (!ok) {
    std::ostringstream os;
    os << std::setprecision(17) << "value " << v << " cannot be converted to " << dtype_name(t) << " without overflow";
    throw ValueError(errmsg(fn, os.str()));
  }
}

}  // namespace pyflame
