// Primitives of the 'index' family.
#pragma once
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/primitive.h"
#include "pyflame/ops_index.h"

// Every primitive of this family, for the backends' lists.
#define PF_INDEX_PRIMITIVES(X) \
  X(Concat)                    \
  X(Gather)                    \
  X(Pad)                       \
  X(Dropout)                   \
  X(ScatterAdd)                \
  X(PadGrad)                   \
  X(SliceUpdate)

namespace pyflame {

// Inputs (same dtype, any layout) joined along `axis` into a row-major output.
class Concat : public Primitive {
 public:
  explicit Concat(int ax) : axis(ax) {}
  const char* name() const override { return "concat"; }
  PF_PARAMS(axis)
  PF_EVAL_DECLS
  PF_VJP_DECL
  int axis;
};

// The IndexError message of a gather-family op for index j on an axis of
// `size` entries.
inline std::string gather_range_error(const char* fn, int axis, int64_t j, int64_t size) {
  std::string msg = std::string(fn) == "embedding"
                        ? "index " + std::to_string(j) + " is out of range for an embedding of " +
                              std::to_string(size) + " rows"
                        : "index " + std::to_string(j) + " is out of bounds for axis " +
                              std::to_string(axis) + " with size " + std::to_string(size);
  return errmsg(fn, msg);
}

// Inputs: x, index (int32/int64), both with the output's ndim; the output has
// index's shape. out[p] = x[p with p[axis] replaced by index[p]], x read
// through its own strides (its shape may be larger off `axis`; broadcast
// views serve index_select). Indices outside [0, x.shape[axis]) raise
// IndexError naming `fn`. padding_idx (embedding, normalized to [0, V)):
// entries gathered from that row pass no gradient back.
class Gather : public Primitive {
 public:
  Gather(int ax, const char* f, std::optional<int64_t> pad = {})
      : axis(ax), fn(f), padding_idx(pad) {}
  const char* name() const override { return fn; }
  PF_PARAMS(axis, fn, padding_idx)
  PF_EVAL_DECLS
  PF_VJP_DECL
  std::string range_error(int64_t j, int64_t size) const {
    return gather_range_error(fn, axis, j, size);
  }
  int axis;
  const char* fn;  // "gather", "index_select" or "embedding"
  std::optional<int64_t> padding_idx;
};

// Gather's backward. Inputs: src (index's shape, any layout), index. The
// output (row-major, x's shape) is zero except out[p with p[axis] =
// index[p]] += src[p]; duplicate indices accumulate. The CPU sums in index
// order (deterministic); the GPU uses float32 atomics (16-bit outputs
// accumulate in a float32 buffer and round once), so the order of the sums
// may vary between runs. Indices out of range raise IndexError naming `fn`.
class ScatterAdd : public Primitive {
 public:
  ScatterAdd(int ax, const char* f) : axis(ax), fn(f) {}
  const char* name() const override { return "scatter_add"; }
  PF_PARAMS(axis, fn)
  PF_EVAL_DECLS
  PF_VJP_DECL
  std::string range_error(int64_t j, int64_t size) const {
    return gather_range_error(fn, axis, j, size);
  }
  int axis;
  const char* fn;  // the forward gather's name, for error messages
};

// out[o] = x[map(o - lo)] per axis, `value` where constant padding applies.
// lo has one entry per axis (negative: cropping).
class Pad : public Primitive {
 public:
  Pad(PadMode m, double v, std::vector<int64_t> l) : mode(m), value(v), lo(std::move(l)) {}
  const char* name() const override { return "pad"; }
  PF_PARAMS(mode, value, lo)
  PF_EVAL_DECLS
  PF_VJP_DECL
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
  PF_PARAMS(p, key)
  PF_EVAL_DECLS
  PF_VJP_DECL
  uint64_t threshold() const { return static_cast<uint64_t>(std::ceil(p * 16777216.0)); }
  float scale() const { return static_cast<float>(1.0 / (1.0 - p)); }
  double p;
  uint64_t key;
};

// Pad's backward along one axis: folds the cotangent of a (non-constant)
// pad back onto the input. Input: the row-major cotangent with `out_size`
// entries on `axis`; output: the same shape with `size` entries there,
// out[.., i, ..] = sum of in[.., o, ..] over every o with
// pad_source(mode, o - lo, size) == i. Each output element sums its own
// preimage, so no atomics and a fixed order.
class PadGrad : public Primitive {
 public:
  PadGrad(PadMode m, int ax, int64_t l, int64_t n) : mode(m), axis(ax), lo(l), size(n) {}
  const char* name() const override { return "pad_backward"; }
  PF_PARAMS(mode, axis, lo, size)
  PF_EVAL_DECLS
  PadMode mode;
  int axis;
  int64_t lo, size;
};

// out = cache with `update` written at [start, start + update.shape[axis])
// along `axis`. Inputs: cache, update (same dtype and ndim, equal sizes off
// `axis`, any layout). When the eval loop donates the cache's buffer to the
// output (out.buffer() == cache.buffer(): see donor_input), only the update
// region is written; otherwise the whole cache is copied first.
class SliceUpdate : public Primitive {
 public:
  SliceUpdate(int ax, int64_t st) : axis(ax), start(st) {}
  const char* name() const override { return "slice_update"; }
  PF_PARAMS(axis, start)
  int donor_input() const override { return 0; }
  PF_EVAL_DECLS
  PF_VJP_DECL
  int axis;
  int64_t start;
};

}  // namespace pyflame
