// Primitives of the 'index' family.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/primitive.h"
#include "pyflame/ops_index.h"

// Every primitive of this family, for the backends' lists.
#define PF_INDEX_PRIMITIVES(X) \
  X(Concat)                    \
  X(Gather)                    \
  X(Pad)                       \
  X(Dropout)

namespace pyflame {

// Inputs (same dtype, any layout) joined along `axis` into a row-major output.
class Concat : public Primitive {
 public:
  explicit Concat(int ax) : axis(ax) {}
  const char* name() const override { return "concat"; }
  PF_EVAL_DECLS
  int axis;
};

// Inputs: x, index (int32/int64), both with the output's ndim; the output has
// index's shape. out[p] = x[p with p[axis] replaced by index[p]], x read
// through its own strides (its shape may be larger off `axis`; broadcast
// views serve index_select and embedding). Indices outside
// [0, x.shape[axis]) raise IndexError naming `fn`.
class Gather : public Primitive {
 public:
  Gather(int ax, const char* f) : axis(ax), fn(f) {}
  const char* name() const override { return fn; }
  PF_EVAL_DECLS
  // The IndexError message for index j on an axis of `size` entries.
  std::string range_error(int64_t j, int64_t size) const {
    std::string msg = std::string(fn) == "embedding"
                          ? "index " + std::to_string(j) + " is out of range for an embedding of " +
                                std::to_string(size) + " rows"
                          : "index " + std::to_string(j) + " is out of bounds for axis " +
                                std::to_string(axis) + " with size " + std::to_string(size);
    return errmsg(fn, msg);
  }
  int axis;
  const char* fn;  // "gather", "index_select" or "embedding"
};

// out[o] = x[map(o - lo)] per axis, `value` where constant padding applies.
// lo has one entry per axis (negative: cropping).
class Pad : public Primitive {
 public:
  Pad(PadMode m, double v, std::vector<int64_t> l) : mode(m), value(v), lo(std::move(l)) {}
  const char* name() const override { return "pad"; }
  PF_EVAL_DECLS
  PadMode mode;
  double value;
  std::vector<int64_t> lo;
};

// out[i] = x[i] * (keep_i ? 1/(1-p) : 0), keep_i = (random_bits(key, i) >> 40)
// >= threshold, i the row-major index (threshold = ceil(p * 2^24), so keep_i
// is exactly rand()[i] >= p).
class Dropout : public Primitive {
 public:
  Dropout(double prob, uint64_t k) : p(prob), key(k) {}
  const char* name() const override { return "dropout"; }
  PF_EVAL_DECLS
  uint64_t threshold() const { return static_cast<uint64_t>(std::ceil(p * 16777216.0)); }
  float scale() const { return static_cast<float>(1.0 / (1.0 - p)); }
  double p;
  uint64_t key;
};

}  // namespace pyflame
