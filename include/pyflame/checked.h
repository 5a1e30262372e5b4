// Overflow-checked size arithmetic: every shape, stride, offset and byte
// count goes through these, so a shape whose size does not fit 64 bits is a
// ValueError naming the function instead of a wrapped-around tiny buffer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "pyflame/dtype.h"
#include "pyflame/errors.h"

namespace pyflame {

// a + b and a * b, or ValueError "[fn] <what> overflows 64 bits".
int64_t checked_add(int64_t a, int64_t b, const char* fn, const char* what = "size");
int64_t checked_mul(int64_t a, int64_t b, const char* fn, const char* what = "size");

// Element count of a shape. Every extent must be >= 0, and the product of
// the extents with zeros read as ones must fit int64 (as in NumPy), so the
// row-major strides of a zero-size shape fit too.
int64_t checked_shape_size(const std::vector<int64_t>& shape, const char* fn);

// Bytes of a row-major tensor: checked_shape_size * itemsize <= INT64_MAX.
int64_t checked_nbytes(const std::vector<int64_t>& shape, size_t itemsize, const char* fn);

// The lowest and highest element offsets a strided layout reaches, checked.
// For a zero-size shape both are `offset`.
struct OffsetRange {
  int64_t lo, hi;
};
OffsetRange checked_offset_range(const std::vector<int64_t>& shape,
                                 const std::vector<int64_t>& strides, int64_t offset,
                                 const char* fn);

// A value stored into an integer dtype must be finite and within its range
// (a C++ float-to-int conversion outside it is undefined; PyTorch raises).
// Floating dtypes and bool take any value (out of range is +-inf there).
void check_value_fits(double v, Dtype t, const char* fn);

}  // namespace pyflame
