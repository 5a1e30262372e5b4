// vec_math.h's AVX2 kernels: built with -mavx2 -mfma (CMakeLists.txt) and
// run only where the processor has both (vec_math.cc checks).
#include <immintrin.h>

#define PF_VEC_NS vec_avx2
#define PF_VEC_BYTES 32
#define PF_VEC_ISA "avx2"
#define PF_SLEEF_F(fn) Sleef_##fn##f8_u10avx2
#define PF_SLEEF_D(fn) Sleef_##fn##d4_u10avx2
#define PF_SQRT_F _mm256_sqrt_ps
#define PF_SQRT_D _mm256_sqrt_pd
#define PF_FMA_F(a, b, c) vf(_mm256_fmadd_ps(a, b, c))
#include "backend/cpu/vec_math_impl.h"
