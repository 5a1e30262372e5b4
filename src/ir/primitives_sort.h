// Primitives of the 'sort' family: arg-reductions, sorting, cumulative sums
// and categorical sampling. Inputs are row-major (the op functions make them
// so); each kernel walks lines of `n` elements along one axis, viewed as
// (outer, n, inner).
#pragma once
#include <cstdint>
#include <string>

#include "ir/primitive.h"

// Every primitive of this family, for the backends' lists.
#define PF_SORT_PRIMITIVES(X) \
  X(ArgReduce)                \
  X(ArgSort)                  \
  X(Cumsum)                   \
  X(Multinomial)

namespace pyflame {

// (outer, n, inner) of a row-major shape around `axis`.
struct LineShape {
  int64_t outer = 1, n = 1, inner = 1;
};
inline LineShape line_shape(const Shape& shape, int axis) {
  LineShape s;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (d < axis) s.outer *= shape[d];
    else if (d == axis) s.n = shape[d];
    else s.inner *= shape[d];
  }
  return s;
}

// Strict "a comes before b" of the sort order, NaN counting as the largest
// value (NumPy and PyTorch): ascending puts NaN last, descending first.
// Equal keys keep index order (ties are broken by the caller).
template <typename K>
#if defined(__HIPCC__) || defined(__CUDACC__)
__host__ __device__
#endif
inline bool sort_before(K a, K b, bool descending) {
  const bool an = a != a, bn = b != b;  // NaN (false for integers)
  if (descending) return an ? !bn : (!bn && a > b);
  return bn ? !an : (!an && a < b);
}

// Whether v replaces the best so far in argmax (is_max) / argmin: strictly
// better only, so the first index keeps ties; NaN beats every number.
template <typename K>
#if defined(__HIPCC__) || defined(__CUDACC__)
__host__ __device__
#endif
inline bool arg_better(K v, K best, bool is_max) {
  const bool vn = v != v, bn = best != best;
  if (vn || bn) return vn && !bn;
  return is_max ? v > best : v < best;
}

// argmax / argmin along `axis` of a row-major input; the output keeps the
// axis with size 1 (int64). The first index wins ties; NaN beats every
// number and the first NaN wins (NumPy, PyTorch).
class ArgReduce : public Primitive {
 public:
  ArgReduce(bool mx, int ax) : is_max(mx), axis(ax) {}
  const char* name() const override { return is_max ? "argmax" : "argmin"; }
  PF_PARAMS(is_max, axis)
  PF_EVAL_DECLS
  bool is_max;
  int axis;
};

// Indices (int64) that sort each row of a row-major input along its last
// axis: stable (equal keys keep their order), NaN largest. Values come from
// gather(x, axis, indices), which carries the gradient.
class ArgSort : public Primitive {
 public:
  explicit ArgSort(bool desc) : descending(desc) {}
  const char* name() const override { return "argsort"; }
  PF_PARAMS(descending)
  PF_EVAL_DECLS
  bool descending;
};

// Inclusive cumulative sum along `axis` of a row-major input already in the
// output dtype; `reverse` sums from the end (the gradient of the forward
// sum). 16-bit floats accumulate in float32, rounding each output once.
class Cumsum : public Primitive {
 public:
  Cumsum(int ax, bool rev) : axis(ax), reverse(rev) {}
  const char* name() const override { return "cumsum"; }
  PF_PARAMS(axis, reverse)
  PF_EVAL_DECLS
  PF_VJP_DECL
  int axis;
  bool reverse;
};

// Categorical draws from the rows of a row-major (R, V) float tensor of
// non-negative weights; output (R, num_samples) int64. The same on every
// device: a row is cut into kChunks chunks of ceil(V / kChunks) entries;
// chunk sums are sequential float64 sums, and draw s of row r takes
// u = (random_bits(key, r * num_samples + s) >> 11) * 2^-53, t = u * total,
// the first chunk whose running total exceeds t, then the first entry with
// positive weight whose running sum within that chunk exceeds t minus the
// totals before it (the chunk's last positive entry if rounding leaves none).
// (More than sampling::kSequentialMax such draws are found by binary
// searches over those same running sums, in parallel: the same indices.)
// Without replacement a drawn entry's weight becomes 0 for the next draws;
// more than sampling::kSequentialMax draws without replacement are instead
// an exponential race (backend/sampling.h): the entries of positive weight
// in increasing order of -log(u_i) / w_i, one sort, the same law.
// Invalid rows (negative, inf or NaN weights, a zero total, fewer positive
// weights than draws without replacement) raise.
class Multinomial : public Primitive {
 public:
  static constexpr int kChunks = 256;
  Multinomial(int64_t ns, bool repl, uint64_t k) : num_samples(ns), replacement(repl), key(k) {}
  const char* name() const override { return "multinomial"; }
  PF_PARAMS(num_samples, replacement, key)
  PF_EVAL_DECLS
  int64_t num_samples;
  bool replacement;
  uint64_t key;
};

// Error messages of multinomial's evaluation (status codes of the kernels).
inline std::string multinomial_error(int code) {
  switch (code) {
    case 1: return errmsg("multinomial", "probability tensor contains either inf, nan or element < 0");
    case 2: return errmsg("multinomial", "invalid distribution: a row sums to 0");
    default:
      return errmsg("multinomial", "a row has fewer non-zero probabilities than num_samples "
                                   "(sampling without replacement)");
  }
}

}  // namespace pyflame
