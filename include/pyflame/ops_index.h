// Ops of the 'index' family (see ops.h for the contract): joining and
// splitting, gathers, padding, dropout and batched matmul.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pyflame/ops.h"

namespace pyflame {

// ---- joining and splitting ----
// torch.cat: shapes equal except along `axis`; dtypes promote.
Tensor concat(const std::vector<Tensor>& tensors, int axis = 0);
// torch.stack: equal shapes, a new axis at `axis` (in [-(ndim+1), ndim]).
Tensor stack(const std::vector<Tensor>& tensors, int axis = 0);
// torch.split with an int: chunks of `split_size` (the last may be smaller).
// The pieces are views of x.
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int axis = 0);
// torch.split with a list: pieces of the given sizes, which sum to the axis size.
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sections, int axis = 0);

// ---- gathers (integer indices in [0, size); others raise IndexError at evaluation) ----
// torch.gather: out[i][j][k] = x[index[i][j][k]][j][k] (axis 0); index has x's
// ndim and index.shape[d] <= x.shape[d] for d != axis; out has index's shape.
Tensor gather(const Tensor& x, int axis, const Tensor& index);
// torch.index_select: entries `index` (0-d or 1-d) of x along `axis`.
Tensor index_select(const Tensor& x, int axis, const Tensor& index);
// torch.nn.functional.embedding: rows of weight (V, D) -> indices.shape + (D,).
// padding_idx is validated (in [-V, V)); as in PyTorch it only matters for
// gradients: the forward value is weight[indices] either way, and row
// padding_idx of weight gets no gradient.
Tensor embedding(const Tensor& indices, const Tensor& weight,
                 std::optional<int64_t> padding_idx = {});

// ---- padding ----
enum class PadMode : uint8_t { Constant, Reflect, Replicate, Circular };
// torch.nn.functional.pad: `pad` = (last_lo, last_hi, prev_lo, prev_hi, ...).
// Negative pads crop. Constant fills with `value`; reflect mirrors without
// repeating the edge (pad < size); replicate repeats the edge; circular wraps
// (pad <= size). Only constant mode takes a (non-zero) value.
Tensor pad(const Tensor& x, const std::vector<int64_t>& pad, PadMode mode = PadMode::Constant,
           double value = 0.0);
PadMode pad_mode_from_string(const std::string& mode);

// ---- dropout ----
// Zeroes each element with probability p and scales the rest by 1/(1-p).
// The mask comes from the counter-based generator (pf.manual_seed): element i
// is kept when rand(x.shape)[i] >= p for the draw taken at this point, so a
// seed gives the same mask on every device. p must be in [0, 1); p == 0 or
// training == false returns x.
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);

// ---- in-place writes ----
// A new version of `cache` with `update` written at positions [start, start
// + update.shape[axis]) along `axis` (MLX's slice_update); update has cache's
// ndim and sizes off `axis`, and is cast to cache's dtype. When the old
// version is not observable afterwards (no other tensor holds it or its
// buffer), evaluation reuses its buffer and writes only the update: a
// fixed-capacity KV cache written in place, with static shapes.
Tensor slice_update(const Tensor& cache, const Tensor& update, int64_t start, int axis = 0);

// ---- batched matmul ----
// torch.bmm: (B, M, K) x (B, K, N) -> (B, M, N); no broadcasting.
Tensor batch_matmul(const Tensor& a, const Tensor& b);

}  // namespace pyflame
