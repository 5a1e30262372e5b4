// Ops of the 'sort' family (see ops.h for the contract): arg-reductions,
// sorting and top-k, cumulative sums and categorical sampling.
#pragma once
#include <cstdint>
#include <optional>

#include "pyflame/ops.h"

namespace pyflame {

// Index (int64) of the largest / smallest entry along `axis` (none: of the
// flattened tensor, a 0-d result). First index on ties; NaN counts as the
// maximum (and, as in NumPy, argmin also returns the first NaN).
Tensor argmax(const Tensor& x, std::optional<int> axis = {}, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int> axis = {}, bool keepdim = false);

struct ValuesIndices {
  Tensor values, indices;  // indices int64
};
// Indices that sort x along `axis`; the sort is always stable (equal entries
// keep their order), so `stable` is accepted for compatibility. NaN sorts as
// the largest value.
Tensor argsort(const Tensor& x, int axis = -1, bool descending = false, bool stable = true);
// torch.sort: (values, indices). Values carry the gradient (a gather).
ValuesIndices sort(const Tensor& x, int axis = -1, bool descending = false, bool stable = true);
// torch.topk: the k largest (or smallest) entries along `axis` and their
// indices, in sorted order (also when sorted == false); ties keep the lower
// index first.
ValuesIndices topk(const Tensor& x, int64_t k, int axis = -1, bool largest = true,
                   bool sorted = true);

// torch.cumsum: inclusive running sum along `axis`. dtype (optional) is
// the accumulation and output dtype; by default integers and bool give
// int64, floats keep their dtype.
Tensor cumsum(const Tensor& x, int axis, std::optional<Dtype> dtype = {});

// torch.multinomial: num_samples category indices (int64) per row of a 1-d
// (V,) or 2-d (R, V) tensor of non-negative weights (need not sum to 1).
// Drawn from the counter-based generator (pf.manual_seed), so a seed gives
// the same indices on every device.
Tensor multinomial(const Tensor& probs, int64_t num_samples = 1, bool replacement = false);

}  // namespace pyflame
