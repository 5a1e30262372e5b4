// The body of vec_math.h's kernels, compiled once per instruction set: the
// including file defines PF_VEC_NS (a namespace), PF_VEC_BYTES (vector
// width), PF_SLEEF_F(fn) / PF_SLEEF_D(fn) (SLEEF's 1-ulp float and double
// functions of that width), PF_SQRT_F / PF_SQRT_D (the sqrt instruction) and
// PF_FMA_F(a, b, c) (a * b + c, fused where the set has FMA; only erf_f's
// polynomials use it),
// and is built with -ffp-contract=off: the formulas round every operation,
// as the scalar formulas in elementwise_formulas.h do. Everything here is
// file-local and calls no inline library function: the AVX2 build's copy of
// a shared inline function could otherwise be the one the linker keeps.
#include <sleef.h>

#include <cstring>
#include <limits>

#include "backend/cpu/vec_math.h"

namespace pyflame::cpu::PF_VEC_NS {

namespace {

typedef float vf __attribute__((vector_size(PF_VEC_BYTES)));
typedef double vd __attribute__((vector_size(PF_VEC_BYTES)));
typedef float vh __attribute__((vector_size(PF_VEC_BYTES / 2)));  // as many floats as a vd has doubles
typedef int vi __attribute__((vector_size(PF_VEC_BYTES)));
constexpr int kWf = PF_VEC_BYTES / 4, kWd = PF_VEC_BYTES / 8;

template <typename V, typename S>
inline V load(const S* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));  // unaligned: views start anywhere
  return v;
}
template <typename V, typename S>
inline void store(S* p, V v) {
  std::memcpy(p, &v, sizeof(V));
}
inline vd widen(const float* p) { return __builtin_convertvector(load<vh>(p), vd); }

// y = f(x) vector by vector; the last partial vector is padded with zeros so
// that it runs through f exactly as a full one.
template <typename V, typename S, typename F>
inline void map(const S* x, S* y, int64_t n, F f) {
  constexpr int W = sizeof(V) / sizeof(S);
  int64_t i = 0;
  for (; i + W <= n; i += W) store(y + i, f(load<V>(x + i)));
  if (i < n) {
    S buf[W] = {};
    std::memcpy(buf, x + i, (n - i) * sizeof(S));
    store(buf, f(load<V>(buf)));
    std::memcpy(y + i, buf, (n - i) * sizeof(S));
  }
}

// The float formulas, as in elementwise_formulas.h.
inline vf exp_f(vf x) { return PF_SLEEF_F(exp)(x); }
inline vf tanh_f(vf x) { return PF_SLEEF_F(tanh)(x); }
inline vf splat(float v) { return vf{} + v; }

// U vectors at a time: the polynomials are chains of dependent operations,
// and interleaving independent ones hides their latency.
constexpr int kU = 4;
struct Batch {
  vf v[kU];
};

// Vector by vector: a 128-byte memcpy would go through 16-byte moves that
// the 32-byte reads cannot forward from.
inline Batch load_batch(const float* p) {
  Batch b;
  for (int k = 0; k < kU; ++k) b.v[k] = load<vf>(p + k * kWf);
  return b;
}
inline void store_batch(float* p, const Batch& b) {
  for (int k = 0; k < kU; ++k) store(p + k * kWf, b.v[k]);
}

// map over batches of kU vectors (for the functions taking a Batch).
template <typename F>
inline void map_batch(const float* x, float* y, int64_t n, F f) {
  constexpr int W = kU * kWf;
  int64_t i = 0;
  for (; i + W <= n; i += W) store_batch(y + i, f(load_batch(x + i)));
  if (i < n) {
    float buf[W] = {};
    std::memcpy(buf, x + i, (n - i) * sizeof(float));
    store_batch(buf, f(load_batch(buf)));
    std::memcpy(y + i, buf, (n - i) * sizeof(float));
  }
}

// erf in float. SLEEF 3.5's erff computes in double-float arithmetic at a
// quarter of expf's rate (gelu took 4x PyTorch's time); this one costs one
// SLEEF exp and two short polynomials, 1.5 ulp at most (checked against
// math.erf on 4M floats in [-4.5, 4.5]):
//   |x| < 0.875:  x + x * P(x^2)
//   otherwise:    sign(x) * (1 - exp(-a^2) * Q(a - 2.4375)),  a = min(|x|, 4),
// Q fitting erfc(a) e^(a^2), which is smooth there; erf is 1 in float past 3.92.
inline Batch erf_f(Batch x) {
  static constexpr float P[] = {0.12837915122509003f, -0.3761250972747803f, 0.11282195150852203f,
                                -0.02678581513464451f, 0.005027940962463617f, -0.0006197729962877929f};
  static constexpr float Q[] = {0.2155524641275406f, -0.07756085693836212f, 0.026498284190893173f,
                                -0.008647860959172249f, 0.002707528881728649f, -0.0008180084987543523f,
                                0.00024151994148269296f, -6.758079689461738e-05f, 1.6262647477560677e-05f,
                                -4.655402335629333e-06f, 2.06931508728303e-06f, -4.788855676451931e-07f};
  Batch a, c, s, p, q, r;
  vi sign[kU];
  for (int k = 0; k < kU; ++k) {
    sign[k] = vi(x.v[k]) & int(0x80000000u);
    a.v[k] = vf(vi(x.v[k]) ^ sign[k]);
    c.v[k] = a.v[k] > 4.0f ? splat(4.0f) : a.v[k];  // NaN stays NaN
    s.v[k] = x.v[k] * x.v[k];
    p.v[k] = splat(P[5]);
    q.v[k] = splat(Q[11]);
    r.v[k] = c.v[k] - 2.4375f;
  }
  for (int j = 4; j >= 0; --j) {
    for (int k = 0; k < kU; ++k) p.v[k] = PF_FMA_F(p.v[k], s.v[k], splat(P[j]));
  }
  for (int j = 10; j >= 0; --j) {
    for (int k = 0; k < kU; ++k) q.v[k] = PF_FMA_F(q.v[k], r.v[k], splat(Q[j]));
  }
  for (int k = 0; k < kU; ++k) {
    const vf small = x.v[k] + x.v[k] * p.v[k];
    const vf large = vf(vi(1.0f - exp_f(-(c.v[k] * c.v[k])) * q.v[k]) | sign[k]);
    x.v[k] = a.v[k] < 0.875f ? small : large;
  }
  return x;
}

inline Batch gelu_f(Batch x) {
  Batch e;
  for (int k = 0; k < kU; ++k) e.v[k] = x.v[k] * 0.70710678118654752f;
  e = erf_f(e);
  for (int k = 0; k < kU; ++k) x.v[k] = (0.5f * x.v[k]) * (1.0f + e.v[k]);
  return x;
}

inline vf gelu_tanh_f(vf x) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  const vf cube = ((0.044715f * x) * x) * x;
  return (0.5f * x) * (1.0f + tanh_f(k * (x + cube)));
}

void unary_f32(UnaryOp op, const float* x, float* y, int64_t n) {
  switch (op) {
    case UnaryOp::Sqrt: return map<vf>(x, y, n, [](vf v) { return vf(PF_SQRT_F(v)); });
    case UnaryOp::Exp: return map<vf>(x, y, n, exp_f);
    case UnaryOp::Log: return map<vf>(x, y, n, [](vf v) { return vf(PF_SLEEF_F(log)(v)); });
    case UnaryOp::Sin: return map<vf>(x, y, n, [](vf v) { return vf(PF_SLEEF_F(sin)(v)); });
    case UnaryOp::Cos: return map<vf>(x, y, n, [](vf v) { return vf(PF_SLEEF_F(cos)(v)); });
    case UnaryOp::Tanh: return map<vf>(x, y, n, tanh_f);
    case UnaryOp::Erf: return map_batch(x, y, n, [](Batch v) { return erf_f(v); });
    case UnaryOp::Sigmoid: return map<vf>(x, y, n, [](vf v) { return 1.0f / (1.0f + exp_f(-v)); });
    case UnaryOp::Silu: return map<vf>(x, y, n, [](vf v) { return v / (1.0f + exp_f(-v)); });
    case UnaryOp::Gelu: return map_batch(x, y, n, gelu_f);
    case UnaryOp::GeluTanh: return map<vf>(x, y, n, gelu_tanh_f);
    default: return;  // callers check vec_unary
  }
}

// The double formulas, as unary_apply_f64 in elementwise_math.h.
inline vd exp_d(vd x) { return PF_SLEEF_D(exp)(x); }
inline vd gelu_d(vd x) { return 0.5 * x * (1.0 + PF_SLEEF_D(erf)(x * 0.70710678118654752)); }
inline vd gelu_tanh_d(vd x) {
  const double k = 0.7978845608028654;  // sqrt(2/pi)
  return 0.5 * x * (1.0 + PF_SLEEF_D(tanh)(k * (x + 0.044715 * x * x * x)));
}

void unary_f64(UnaryOp op, const double* x, double* y, int64_t n) {
  switch (op) {
    case UnaryOp::Sqrt: return map<vd>(x, y, n, [](vd v) { return vd(PF_SQRT_D(v)); });
    case UnaryOp::Exp: return map<vd>(x, y, n, exp_d);
    case UnaryOp::Log: return map<vd>(x, y, n, [](vd v) { return vd(PF_SLEEF_D(log)(v)); });
    case UnaryOp::Sin: return map<vd>(x, y, n, [](vd v) { return vd(PF_SLEEF_D(sin)(v)); });
    case UnaryOp::Cos: return map<vd>(x, y, n, [](vd v) { return vd(PF_SLEEF_D(cos)(v)); });
    case UnaryOp::Tanh: return map<vd>(x, y, n, [](vd v) { return vd(PF_SLEEF_D(tanh)(v)); });
    case UnaryOp::Erf: return map<vd>(x, y, n, [](vd v) { return vd(PF_SLEEF_D(erf)(v)); });
    case UnaryOp::Sigmoid: return map<vd>(x, y, n, [](vd v) { return 1.0 / (1.0 + exp_d(-v)); });
    case UnaryOp::Silu: return map<vd>(x, y, n, [](vd v) { return v / (1.0 + exp_d(-v)); });
    case UnaryOp::Gelu: return map<vd>(x, y, n, gelu_d);
    case UnaryOp::GeluTanh: return map<vd>(x, y, n, gelu_tanh_d);
    default: return;
  }
}

// Reductions: four independent accumulators hide the add latency.
template <typename Load>
double sum4(int64_t n, Load ld, double tail_sum, int64_t& done) {
  vd a0{}, a1{}, a2{}, a3{};
  int64_t i = 0;
  for (; i + 4 * kWd <= n; i += 4 * kWd) {
    a0 += ld(i);
    a1 += ld(i + kWd);
    a2 += ld(i + 2 * kWd);
    a3 += ld(i + 3 * kWd);
  }
  for (; i + kWd <= n; i += kWd) a0 += ld(i);
  const vd t = (a0 + a1) + (a2 + a3);
  double s = tail_sum;
  for (int k = 0; k < kWd; ++k) s += t[k];
  done = i;
  return s;
}

// Floats add in float vectors over blocks short enough (each lane adds at
// most 64 values) to keep float rounding below the result's own, then the
// block totals in double: twice the rate of widening every value.
double sum_f32(const float* x, int64_t n) {
  constexpr int64_t kStep = 4 * kWf, kBlock = 64 * kStep;
  vd total{};
  int64_t i = 0;
  while (n - i >= kStep) {
    const int64_t left = (n - i) / kStep * kStep;
    const int64_t start = i, end = i + (left < kBlock ? left : kBlock);
    vf a0{}, a1{}, a2{}, a3{};
    for (; i < end; i += kStep) {
      a0 += load<vf>(x + i);
      a1 += load<vf>(x + i + kWf);
      a2 += load<vf>(x + i + 2 * kWf);
      a3 += load<vf>(x + i + 3 * kWf);
    }
    float t[kWf];
    store(t, (a0 + a1) + (a2 + a3));
    bool finite = true;
    for (int k = 0; k < kWf; ++k) finite &= t[k] - t[k] == 0.0f;
    if (finite) {
      total += widen(t) + widen(t + kWd);
    } else {
      // Inf or NaN: an input one, or float overflow the double sum avoids.
      int64_t done;
      total[0] += sum4(end - start, [x, start](int64_t j) { return widen(x + start + j); }, 0.0, done);
    }
  }
  double s = 0.0;
  for (int k = 0; k < kWd; ++k) s += total[k];
  for (; i < n; ++i) s += x[i];
  return s;
}

double sum_f64(const double* x, int64_t n) {
  int64_t i;
  double s = sum4(n, [x](int64_t j) { return load<vd>(x + j); }, 0.0, i);
  for (; i < n; ++i) s += x[i];
  return s;
}

double sum_sq_dev_f32(const float* x, int64_t n, double mean) {
  int64_t i;
  double s = sum4(n, [x, mean](int64_t j) { const vd d = widen(x + j) - mean; return d * d; }, 0.0, i);
  for (; i < n; ++i) {
    const double d = double(x[i]) - mean;
    s += d * d;
  }
  return s;
}

float max_f32(const float* x, int64_t n) {
  const float lo = -std::numeric_limits<float>::infinity();
  vf m0 = vf{} + lo, m1 = m0;
  vi nan{};
  int64_t i = 0;
  for (; i + 2 * kWf <= n; i += 2 * kWf) {
    const vf u = load<vf>(x + i), v = load<vf>(x + i + kWf);
    m0 = u > m0 ? u : m0;
    m1 = v > m1 ? v : m1;
    nan |= (u != u) | (v != v);
  }
  float m = lo;
  bool any_nan = false;
  auto keep = [&m, &any_nan](float v) {
    any_nan |= v != v;
    m = v > m ? v : m;
  };
  for (int k = 0; k < kWf; ++k) {
    keep(m0[k]);
    keep(m1[k]);
    any_nan |= nan[k] != 0;
  }
  for (; i < n; ++i) keep(x[i]);
  return any_nan ? std::numeric_limits<float>::quiet_NaN() : m;
}

double exp_shift_sum_f32(const float* x, float* y, int64_t n, float shift) {
  map<vf>(x, y, n, [shift](vf v) { return exp_f(v - shift); });
  return sum_f32(y, n);
}

template <bool W, bool B>
void norm_row(const float* x, float* y, int64_t n, float mean, float rstd, const float* w, const float* b) {
  auto f = [=](auto v, int64_t i, auto ld) {
    v = (v - mean) * rstd;
    if constexpr (W) v *= ld(w + i);
    if constexpr (B) v += ld(b + i);
    return v;
  };
  int64_t i = 0;
  for (; i + kWf <= n; i += kWf) {
    store(y + i, f(load<vf>(x + i), i, [](const float* p) { return load<vf>(p); }));
  }
  for (; i < n; ++i) y[i] = f(x[i], i, [](const float* p) { return *p; });
}

void norm_row_f32(const float* x, float* y, int64_t n, float mean, float rstd, const float* w, const float* b) {
  if (w && b) norm_row<true, true>(x, y, n, mean, rstd, w, b);
  else if (w) norm_row<true, false>(x, y, n, mean, rstd, w, b);
  else if (b) norm_row<false, true>(x, y, n, mean, rstd, w, b);
  else norm_row<false, false>(x, y, n, mean, rstd, w, b);
}

}  // namespace

extern const detail::VecKernels kernels = {
    PF_VEC_ISA, unary_f32, unary_f64, sum_f32, sum_f64, sum_sq_dev_f32, max_f32, exp_shift_sum_f32,
    norm_row_f32,
};

}  // namespace pyflame::cpu::PF_VEC_NS
