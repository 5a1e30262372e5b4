// Ops of the 'math' family (see ops.h for the contract): the elementwise
// functions of the Array API standard beyond the core set, with NumPy's
// semantics. Each computes in its own kernel on every backend (log1p stays
// accurate near 0, round ties to even), never as a composition that loses
// precision. Integer inputs to transcendental functions compute in float32,
// as in PyTorch.
#pragma once
#include "pyflame/ops.h"

namespace pyflame {

// ---- unary: floating (integers promote to float32) ----
Tensor acos(const Tensor& x);
Tensor acosh(const Tensor& x);
Tensor asin(const Tensor& x);
Tensor asinh(const Tensor& x);
Tensor atan(const Tensor& x);
Tensor atanh(const Tensor& x);
Tensor cosh(const Tensor& x);
Tensor sinh(const Tensor& x);
Tensor tan(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor log10(const Tensor& x);

// ---- unary: rounding and sign (integers: floor/ceil/round/trunc return x) ----
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);  // half to even
Tensor trunc(const Tensor& x);
Tensor sign(const Tensor& x);   // -1, 0, 1; NaN stays NaN

// ---- unary predicates (bool results) ----
Tensor signbit(const Tensor& x);
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor isfinite(const Tensor& x);
Tensor logical_not(const Tensor& x);  // any dtype: x == 0

// ---- bitwise (integers and bool) ----
Tensor bitwise_invert(const Tensor& x);
Tensor bitwise_and(const Tensor& a, const Tensor& b);
Tensor bitwise_or(const Tensor& a, const Tensor& b);
Tensor bitwise_xor(const Tensor& a, const Tensor& b);
// Shifts by >= the bit width give 0 (left) or the sign fill (right), as
// NumPy; negative shift amounts give the same.
Tensor bitwise_left_shift(const Tensor& a, const Tensor& b);
Tensor bitwise_right_shift(const Tensor& a, const Tensor& b);

// ---- binary: floating ----
Tensor atan2(const Tensor& a, const Tensor& b);
Tensor hypot(const Tensor& a, const Tensor& b);
Tensor copysign(const Tensor& a, const Tensor& b);
Tensor nextafter(const Tensor& a, const Tensor& b);  // float32 (and wider) only
Tensor logaddexp(const Tensor& a, const Tensor& b);

// ---- binary: Python's floor division and modulo (sign of the divisor) ----
// Integer division by zero gives 0, as NumPy (which also warns).
Tensor floor_divide(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, const Tensor& b);

// ---- logical (any dtype, read as x != 0; bool results) ----
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);

}  // namespace pyflame
