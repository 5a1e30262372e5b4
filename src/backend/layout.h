// Layout simplification shared by the CPU and GPU kernels (host code).
#pragma once
#include <array>

#include "pyflame/tensor.h"

namespace pyflame {

// Shape and per-operand strides with size-1 axes dropped and axes merged
// where every operand is contiguous across them.
template <int N>
struct Layout {
  Shape shape;
  std::array<Strides, N> strides;
};

template <int N>
Layout<N> collapse(const Shape& shape, const std::array<const Strides*, N>& st) {
  Layout<N> L;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !L.shape.empty();
    for (int k = 0; k < N && merge; ++k) merge = L.strides[k].back() == (*st[k])[d] * shape[d];
    if (merge) {
      L.shape.back() *= shape[d];
      for (int k = 0; k < N; ++k) L.strides[k].back() = (*st[k])[d];
    } else {
      L.shape.push_back(shape[d]);
      for (int k = 0; k < N; ++k) L.strides[k].push_back((*st[k])[d]);
    }
  }
  return L;
}

}  // namespace pyflame

namespace pyflame {

// How a strided (rows x cols) matrix is passed to a row-major BLAS call:
// as is (trans = false) or transposed, with leading dimension ld. Returns
// false when neither axis has unit stride and the matrix must be copied.
inline bool matrix_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool& trans, int64_t& ld) {
  auto at_least = [](int64_t v, int64_t lo) { return v > lo ? v : lo; };
  if (cs == 1 && (rows == 1 || rs >= at_least(cols, 1))) {
    trans = false;
    ld = rows == 1 ? at_least(cols, 1) : rs;
    return true;
  }
  if (rs == 1 && (cols == 1 || cs >= at_least(rows, 1))) {
    trans = true;
    ld = cols == 1 ? at_least(rows, 1) : cs;
    return true;
  }
  return false;
}

}  // namespace pyflame
