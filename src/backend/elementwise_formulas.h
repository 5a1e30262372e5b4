// The scalar formula of every elementwise op, once. Includes nothing, so
// the same text compiles in host C++, in the prebuilt HIP/CUDA kernels (via
// elementwise_math.h) and in run-time compiled fused kernels (NVRTC and
// hipRTC get this file's text verbatim: see backend/rocm/fused.cc). Integer
// arithmetic wraps (two's complement, as NumPy and PyTorch) by computing in
// the unsigned type; 16-bit floats arrive as float.
#pragma once

#ifndef PF_HD
#if defined(__HIPCC__) || defined(__CUDACC__) || defined(__CUDACC_RTC__) || defined(__HIPCC_RTC__)
#define PF_HD __host__ __device__
#else
#define PF_HD
#endif
#endif

// No FMA contraction anywhere in these formulas, on any compiler: an unfused
// kernel rounds each op's result to memory, so a fused kernel, where one op's
// multiply meets the next op's add, must not contract them either. clang
// (host, AMD device, hipRTC) honours this pragma; nvcc and NVRTC get
// explicitly rounded intrinsics (mul.rn / add.rn are never contracted); GCC
// on x86-64 without FMA instructions never contracts.
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace pyflame {
namespace formulas {

#if defined(__CUDA_ARCH__)
__device__ inline float fadd(float a, float b) { return __fadd_rn(a, b); }
__device__ inline float fsub(float a, float b) { return __fsub_rn(a, b); }
__device__ inline float fmul(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double dadd(double a, double b) { return __dadd_rn(a, b); }
__device__ inline double dsub(double a, double b) { return __dsub_rn(a, b); }
__device__ inline double dmul(double a, double b) { return __dmul_rn(a, b); }
#else
PF_HD inline float fadd(float a, float b) { return a + b; }
PF_HD inline float fsub(float a, float b) { return a - b; }
PF_HD inline float fmul(float a, float b) { return a * b; }
PF_HD inline double dadd(double a, double b) { return a + b; }
PF_HD inline double dsub(double a, double b) { return a - b; }
PF_HD inline double dmul(double a, double b) { return a * b; }
#endif

// The unsigned twin of an integer type (floats and bool map to themselves).
template <typename T> struct wrap { typedef T type; };
template <> struct wrap<signed char> { typedef unsigned char type; };
template <> struct wrap<short> { typedef unsigned short type; };
template <> struct wrap<int> { typedef unsigned int type; };
template <> struct wrap<long> { typedef unsigned long type; };
template <> struct wrap<long long> { typedef unsigned long long type; };
template <typename T> struct is_float { static const bool value = false; };
template <> struct is_float<float> { static const bool value = true; };
template <> struct is_float<double> { static const bool value = true; };

// NaN propagates, as in NumPy and PyTorch (x != x is false for integers).
template <typename T>
PF_HD inline T max(T a, T b) {
  if (a != a) return a;
  if (b != b) return b;
  return a > b ? a : b;
}
template <typename T>
PF_HD inline T min(T a, T b) {
  if (a != a) return a;
  if (b != b) return b;
  return a < b ? a : b;
}

// Negative exponents are rejected before the kernels run; the e < 0 branch
// only keeps this total. uint8 has none (overloads: compilers warn on
// comparing an unsigned type with 0 or -1).
template <typename T> PF_HD inline bool negative(T e) { return e < T(0); }
template <typename T> PF_HD inline T pow_negative(T base, T e) {
  return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;
}
PF_HD inline bool negative(unsigned char) { return false; }
PF_HD inline unsigned char pow_negative(unsigned char, unsigned char) { return 0; }

template <typename T>
PF_HD inline T int_pow(T base, T e) {
  if (negative(e)) return pow_negative(base, e);
  typedef typename wrap<T>::type U;
  U r = 1, b = static_cast<U>(base);
  while (e) {
    if (e & 1) r *= b;
    b *= b;
    e >>= 1;
  }
  return static_cast<T>(r);
}

template <typename T> PF_HD inline T neg(T x) { return T(-typename wrap<T>::type(x)); }  // -INT_MIN wraps
template <typename T> PF_HD inline T abs(T x) { return x < T(0) ? T(-typename wrap<T>::type(x)) : x; }
template <typename T> PF_HD inline T relu(T x) { return x < T(0) ? T(0) : x; }  // keeps NaN
PF_HD inline float sqrt(float x) { return sqrtf(x); }
PF_HD inline float exp(float x) { return expf(x); }
PF_HD inline float log(float x) { return logf(x); }
PF_HD inline float sin(float x) { return sinf(x); }
PF_HD inline float cos(float x) { return cosf(x); }
PF_HD inline float tanh(float x) { return tanhf(x); }
PF_HD inline float erf(float x) { return erff(x); }
PF_HD inline float sigmoid(float x) { return 1.0f / fadd(1.0f, expf(-x)); }
PF_HD inline float silu(float x) { return x / fadd(1.0f, expf(-x)); }
PF_HD inline float gelu(float x) {
  return fmul(fmul(0.5f, x), fadd(1.0f, erff(fmul(x, 0.70710678118654752f))));
}
PF_HD inline float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  const float cube = fmul(fmul(fmul(0.044715f, x), x), x);
  return fmul(fmul(0.5f, x), fadd(1.0f, tanhf(fmul(k, fadd(x, cube)))));
}

template <typename T> PF_HD inline T add(T a, T b) {
  typedef typename wrap<T>::type W;
  return T(W(a) + W(b));
}
template <typename T> PF_HD inline T sub(T a, T b) {
  typedef typename wrap<T>::type W;
  return T(W(a) - W(b));
}
template <typename T> PF_HD inline T mul(T a, T b) {
  typedef typename wrap<T>::type W;
  return T(W(a) * W(b));
}
// Floats: rounded operations (see above); integers wrap.
PF_HD inline float add(float a, float b) { return fadd(a, b); }
PF_HD inline float sub(float a, float b) { return fsub(a, b); }
PF_HD inline float mul(float a, float b) { return fmul(a, b); }
PF_HD inline double add(double a, double b) { return dadd(a, b); }
PF_HD inline double sub(double a, double b) { return dsub(a, b); }
PF_HD inline double mul(double a, double b) { return dmul(a, b); }
template <typename T> PF_HD inline T div(T a, T b) { return T(a / b); }
PF_HD inline float pow(float a, float b) { return powf(a, b); }
PF_HD inline double pow(double a, double b) { return ::pow(a, b); }
template <typename T> PF_HD inline T pow(T a, T b) { return int_pow(a, b); }

// float64 computes in double precision (the float formulas would round
// through float), without contraction either. The math library's double
// functions come from <cmath> on the host and are built in on the devices.
PF_HD inline double sqrt_f64(double x) { return ::sqrt(x); }
PF_HD inline double exp_f64(double x) { return ::exp(x); }
PF_HD inline double log_f64(double x) { return ::log(x); }
PF_HD inline double sin_f64(double x) { return ::sin(x); }
PF_HD inline double cos_f64(double x) { return ::cos(x); }
PF_HD inline double tanh_f64(double x) { return ::tanh(x); }
PF_HD inline double erf_f64(double x) { return ::erf(x); }
PF_HD inline double sigmoid_f64(double x) { return 1.0 / dadd(1.0, ::exp(-x)); }
PF_HD inline double silu_f64(double x) { return x / dadd(1.0, ::exp(-x)); }
PF_HD inline double gelu_f64(double x) {
  return dmul(dmul(0.5, x), dadd(1.0, ::erf(dmul(x, 0.70710678118654752))));
}
PF_HD inline double gelu_tanh_f64(double x) {
  const double k = 0.7978845608028654;  // sqrt(2/pi)
  const double cube = dmul(dmul(dmul(0.044715, x), x), x);
  return dmul(dmul(0.5, x), dadd(1.0, ::tanh(dmul(k, dadd(x, cube)))));
}

}  // namespace formulas
}  // namespace pyflame
