// Reductions whose input a fused region computes block by block
// (backend/cpu/fused.cc): the same kernel as Reduce::eval_cpu, reading the
// values in the same order, so the result has the same bits.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "ir/primitives.h"

namespace pyflame::cpu {

constexpr int64_t kSourceBlock = 4096;

// The values of row-major input elements [start, start + n) (n at most
// kSourceBlock), in the input dtype; called from the reduction's threads.
using ReduceSource = std::function<const void*(int64_t start, int64_t n)>;

// Reduces a row-major input of `shape` and `dtype` over `axes` (sorted) into
// `out`. Exact for any axes whose elements per output are one row-major
// range: trailing axes, or leading ones.
void reduce_source(ReduceOp op, Dtype dtype, const Shape& shape, const std::vector<int>& axes,
                   const ReduceSource& source, Tensor& out);

}  // namespace pyflame::cpu
