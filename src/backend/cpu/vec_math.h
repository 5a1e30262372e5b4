// Vectorized CPU math over contiguous arrays: SLEEF's vector functions for
// the transcendental ops, and sums, maxima and squared deviations with
// several vector accumulators. Compiled once per instruction set (AVX2+FMA,
// and the x86-64 baseline SSE2) and picked at the first call by what the
// processor supports, so one binary runs on any x86-64.
//
// Every value goes through a full vector, the last partial one included (it
// is padded), and lanes never mix: an element's result depends only on its
// value, never on its position, alignment or the array's length. The
// unfused kernels and fused regions both call these, so their results are
// bit-identical (docs/design/fusion.md).
#pragma once
#include <cstdint>

#include "ir/primitives.h"

namespace pyflame::cpu {

// Ops with an array kernel here: their float and double results come from
// unary_array, never from the scalar formulas.
constexpr bool vec_unary(UnaryOp op) {
  switch (op) {
    case UnaryOp::Sqrt: case UnaryOp::Exp: case UnaryOp::Log: case UnaryOp::Sin: case UnaryOp::Cos:
    case UnaryOp::Tanh: case UnaryOp::Sigmoid: case UnaryOp::Silu: case UnaryOp::Gelu:
    case UnaryOp::GeluTanh: case UnaryOp::Erf:
      return true;
    default:
      return false;
  }
}

// y[i] = op(x[i]) for i < n; y may equal x. op must satisfy vec_unary.
void unary_array(UnaryOp op, const float* x, float* y, int64_t n);
void unary_array(UnaryOp op, const double* x, double* y, int64_t n);

// Sum of x[0..n) accumulated in double.
double sum_array(const float* x, int64_t n);
double sum_array(const double* x, int64_t n);

// Sum of (x[i] - mean)^2 in double (mean 0: the sum of squares).
double sum_sq_dev_array(const float* x, int64_t n, double mean);

// Largest value, NaN if any is NaN; -inf for n == 0.
float max_array(const float* x, int64_t n);

// y[i] = exp(x[i] - shift) (the float exp of unary_array), returning the
// sum of the y[i] in double: a softmax row's numerators and denominator.
double exp_shift_sum_array(const float* x, float* y, int64_t n, float shift);

// y[i] = (x[i] - mean) * rstd, times w[i] and plus b[i] where given (null
// otherwise): a normalized row, rounded step by step.
void norm_row_array(const float* x, float* y, int64_t n, float mean, float rstd, const float* w,
                    const float* b);

// The instruction set the array kernels run with ("avx2" or "sse2");
// PYFLAME_CPU_ISA=sse2 (runtime/settings.h) forces the baseline.
const char* vec_isa();

namespace detail {
// One instruction set's kernels (vec_math_impl.h fills one per set).
struct VecKernels {
  const char* isa;
  void (*unary_f32)(UnaryOp, const float*, float*, int64_t);
  void (*unary_f64)(UnaryOp, const double*, double*, int64_t);
  double (*sum_f32)(const float*, int64_t);
  double (*sum_f64)(const double*, int64_t);
  double (*sum_sq_dev_f32)(const float*, int64_t, double);
  float (*max_f32)(const float*, int64_t);
  double (*exp_shift_sum_f32)(const float*, float*, int64_t, float);
  void (*norm_row_f32)(const float*, float*, int64_t, float, float, const float*, const float*);
};
}  // namespace detail

}  // namespace pyflame::cpu
