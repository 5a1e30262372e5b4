// vec_math.h's baseline kernels (SSE2, which every x86-64 has) and the
// choice between them and the AVX2 ones, made once.
#include <immintrin.h>


#define PF_VEC_NS vec_sse2
#define PF_VEC_BYTES 16
#define PF_VEC_ISA "sse2"
#define PF_SLEEF_F(fn) Sleef_##fn##f4_u10sse2
#define PF_SLEEF_D(fn) Sleef_##fn##d2_u10sse2
#define PF_SQRT_F _mm_sqrt_ps
#define PF_SQRT_D _mm_sqrt_pd
#define PF_FMA_F(a, b, c) ((a) * (b) + (c))
#include "backend/cpu/vec_math_impl.h"
#include "runtime/settings.h"

namespace pyflame::cpu {

namespace vec_avx2 {
extern const detail::VecKernels kernels;  // vec_math_avx2.cc
}

namespace {

const detail::VecKernels& pick() {
  if (!settings::cpu_baseline_isa() && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return vec_avx2::kernels;
  return vec_sse2::kernels;
}

const detail::VecKernels& K() {
  static const detail::VecKernels& k = pick();
  return k;
}

}  // namespace

void unary_array(UnaryOp op, const float* x, float* y, int64_t n) { K().unary_f32(op, x, y, n); }
void unary_array(UnaryOp op, const double* x, double* y, int64_t n) { K().unary_f64(op, x, y, n); }
double sum_array(const float* x, int64_t n) { return K().sum_f32(x, n); }
double sum_array(const double* x, int64_t n) { return K().sum_f64(x, n); }
double sum_sq_dev_array(const float* x, int64_t n, double mean) { return K().sum_sq_dev_f32(x, n, mean); }
float max_array(const float* x, int64_t n) { return K().max_f32(x, n); }
double exp_shift_sum_array(const float* x, float* y, int64_t n, float shift) {
  return K().exp_shift_sum_f32(x, y, n, shift);
}
void norm_row_array(const float* x, float* y, int64_t n, float mean, float rstd, const float* w,
                    const float* b) {
  K().norm_row_f32(x, y, n, mean, rstd, w, b);
}
const char* vec_isa() { return K().isa; }

}  // namespace pyflame::cpu
