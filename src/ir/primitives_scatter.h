// Primitives of the 'scatter' family.
#pragma once
#include <cstdint>
#include <string>

#include "ir/primitive.h"
#include "pyflame/ops_scatter.h"

// Every primitive of this family, for the backends' lists.
#define PF_SCATTER_PRIMITIVES(X) X(Put)

namespace pyflame {

// put's IndexError message: the axis when put serves an axis-wise op, else
// the flat index j among `size` elements.
inline std::string put_range_error(const char* fn, int axis, int64_t axis_size, int64_t j,
                                   int64_t size) {
  if (axis >= 0) {
    return errmsg(fn, "an index is out of bounds for axis " + std::to_string(axis) + " with size " +
                          std::to_string(axis_size));
  }
  return errmsg(fn, "index " + std::to_string(j) + " is out of bounds for a tensor of " +
                        std::to_string(size) + " elements");
}

// Inputs: x (any layout), index (row-major int32/int64), source (row-major,
// index's shape, x's dtype). out = x (row-major) with out.flat[index[i]] =
// source[i] in index order; negative indices count from the end, others out
// of range raise IndexError. When the eval loop donates x's buffer
// (out.buffer() == x.buffer()), only the positions are written.
// scatter records Put with its own name, axis and axis size for errors.
class Put : public Primitive {
 public:
  Put(const char* f = "put", int ax = -1, int64_t ax_size = 0)
      : fn(f), axis(ax), axis_size(ax_size) {}
  const char* name() const override { return fn; }
  int donor_input() const override { return 0; }
  PF_PARAMS(fn, axis, axis_size)
  PF_EVAL_DECLS
  PF_VJP_DECL
  std::string range_error(int64_t j, int64_t size) const {
    return put_range_error(fn, axis, axis_size, j, size);
  }
  const char* fn;
  int axis;
  int64_t axis_size;
};

}  // namespace pyflame
