// Ops of the 'scatter' family (see ops.h for the contract): writes of values
// at computed positions, the primitives behind item assignment and in-place
// tensor methods (docs/design/inplace.md).
#pragma once
#include <cstdint>

#include "pyflame/ops.h"

namespace pyflame {

// torch.put: a new version of x with source written at the flat (row-major)
// positions `index` (integer, any shape; negative counts from the end).
// source broadcasts to index's shape and is cast to x's dtype. Where an
// index repeats, the CPU keeps the last write in index order; the GPU keeps
// one of them (as in PyTorch). Out-of-range indices raise IndexError at
// evaluation. When nothing else can observe the old x, evaluation reuses its
// buffer and writes only the positions (buffer donation, as slice_update).
Tensor put(const Tensor& x, const Tensor& index, const Tensor& source);

// torch.scatter_add: x + (src scattered along `axis` at `index`), with
// out[.., index[p], ..] += src[p] for each position p of index. index has
// x's ndim, index.shape[d] <= src.shape[d] for every d and <= x.shape[d]
// off `axis`; only the first index.shape entries of src are read. Floating
// point only.
Tensor scatter_add(const Tensor& x, int axis, const Tensor& index, const Tensor& src);

// torch.scatter: x with src[p] written at out[.., index[p], ..] (the same
// index rules as scatter_add). Repeated targets keep one of the writes.
Tensor scatter(const Tensor& x, int axis, const Tensor& index, const Tensor& src);

// torch.clone: a copy of x (row-major) with its own buffer and version
// counter, differentiable as the identity.
Tensor clone(const Tensor& x);

}  // namespace pyflame
