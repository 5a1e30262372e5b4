// Matmul through OpenBLAS sgemm (dgemm for float64; gemv for one row). 16-bit floats are
// widened to float32 (fp32 accumulation, as on the GPU); integers use a plain
// loop.
#include <algorithm>
#include <cblas.h>
#include <cstdint>
#include <optional>
#include <string>

#include "backend/cpu/kernel_utils.h"
#include "ir/primitives.h"

namespace pyflame {

namespace {

// Offsets of each batch's matrix (batch axes are all but the last two).
std::vector<int64_t> batch_offsets(const Tensor& t) {
  int nb = t.ndim() - 2;
  Shape bs(t.shape().begin(), t.shape().begin() + nb);
  Strides st(t.strides().begin(), t.strides().begin() + nb);
  std::vector<int64_t> offs;
  offs.reserve(shape_size(bs));
  cpu::Layout<1> L = cpu::collapse<1>(bs, {&st});
  cpu::for_each_run<1>(L, 0, shape_size(bs), [&](auto off, int64_t n, auto ls) {
    for (int64_t i = 0; i < n; ++i) offs.push_back(off[0] + i * ls[0]);
  });
  return offs;
}

// Row-major copy of a tensor in the BLAS type S, for the 16-bit and strided
// paths; a broadcast operand may be larger than memory (then OutOfMemoryError).
template <typename S>
cpu::Scratch<S> to_blas_rows(const Tensor& t) {
  cpu::Scratch<S> v(t.size());
  cpu::dispatch(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    Strides dst = row_major_strides(t.shape());
    cpu::Layout<2> L = cpu::collapse<2>(t.shape(), {&dst, &t.strides()});
    cpu::for_each_run<2>(L, 0, t.size(), [&](auto off, int64_t n, auto ls) {
      for (int64_t i = 0; i < n; ++i) v[off[0] + i] = static_cast<S>(p[off[1] + i * ls[1]]);
    });
  });
  return v;
}

template <typename S>
void gemm_batched(const Tensor& a, const Tensor& b, S* c, const S* pa, const S* pb,
                   const Strides& sa, const Strides& sb, const std::vector<int64_t>& oa,
                   const std::vector<int64_t>& ob) {
  const int nd = a.ndim();
  const int64_t M = a.shape()[nd - 2], K = a.shape()[nd - 1], N = b.shape()[nd - 1];
  bool ta = false, tb = false;
  int64_t lda = 0, ldb = 0;
  matrix_layout(M, K, sa[nd - 2], sa[nd - 1], ta, lda);
  matrix_layout(K, N, sb[nd - 2], sb[nd - 1], tb, ldb);
  // OpenBLAS takes 32-bit sizes: a larger one must be an error, not a truncation.
  for (int64_t v : {M, N, K, lda, ldb}) {
    if (v > INT32_MAX) {
      throw ValueError(errmsg("matmul", "matrix dimension " + std::to_string(v) +
                                            " exceeds the CPU BLAS limit of 2^31 - 1"));
    }
  }
  if (M == 1 && N > 1) {
    // One row times a matrix (a decode step's projections): GEMV reads b once,
    // where GEMM would first pack it. c (N) = op(b)^T a; b is K x N row-major,
    // or (tb) stored as its N x K transpose.
    const auto op = tb ? CblasNoTrans : CblasTrans;
    const int64_t rows = tb ? N : K, cols = tb ? K : N, inc = ta ? lda : 1;
    for (size_t i = 0; i < oa.size(); ++i) {
      if constexpr (std::is_same_v<S, double>) {
        cblas_dgemv(CblasRowMajor, op, rows, cols, 1.0, pb + ob[i], ldb, pa + oa[i], inc, 0.0, c + i * N, 1);
      } else {
        cblas_sgemv(CblasRowMajor, op, rows, cols, 1.0f, pb + ob[i], ldb, pa + oa[i], inc, 0.0f, c + i * N, 1);
      }
    }
    return;
  }
  const auto opa = ta ? CblasTrans : CblasNoTrans, opb = tb ? CblasTrans : CblasNoTrans;
  for (size_t i = 0; i < oa.size(); ++i) {
    if constexpr (std::is_same_v<S, double>) {
      cblas_dgemm(CblasRowMajor, opa, opb, M, N, K, 1.0, pa + oa[i], lda, pb + ob[i], ldb, 0.0, c + i * M * N, N);
    } else {
      cblas_sgemm(CblasRowMajor, opa, opb, M, N, K, 1.0f, pa + oa[i], lda, pb + ob[i], ldb, 0.0f, c + i * M * N, N);
    }
  }
}

bool blas_ready(const Tensor& t, Dtype blas) {
  int nd = t.ndim();
  bool tr;
  int64_t ld;
  return t.dtype() == blas &&
         matrix_layout(t.shape()[nd - 2], t.shape()[nd - 1], t.strides()[nd - 2],
                     t.strides()[nd - 1], tr, ld);
}

template <typename T>
void matmul_int(const Tensor& a, const Tensor& b, Tensor& out) {
  const int nd = a.ndim();
  const int64_t M = a.shape()[nd - 2], K = a.shape()[nd - 1], N = b.shape()[nd - 1];
  auto oa = batch_offsets(a), ob = batch_offsets(b);
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* c = out.data<T>();
  const int64_t ar = a.strides()[nd - 2], ac = a.strides()[nd - 1];
  const int64_t br = b.strides()[nd - 2], bc = b.strides()[nd - 1];
  for (size_t bi = 0; bi < oa.size(); ++bi) {
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        int64_t acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += int64_t(pa[oa[bi] + i * ar + k * ac]) * pb[ob[bi] + k * br + j * bc];
        c[(bi * M + i) * N + j] = static_cast<T>(acc);
      }
    }
  }
}

// Floating matmul in the BLAS type S (float, or double for float64).
template <typename S>
void matmul_float(const Tensor& a, const Tensor& b, Tensor& out) {
  // Operands already of type S in a BLAS-compatible layout go straight to
  // gemm; others are first copied to row-major S.
  constexpr Dtype kBlas = std::is_same_v<S, double> ? Dtype::Float64 : Dtype::Float32;
  std::optional<cpu::Scratch<S>> fa, fb;
  const S* pa;
  const S* pb;
  Strides sa = a.strides(), sb = b.strides();
  std::vector<int64_t> oa = batch_offsets(a), ob = batch_offsets(b);
  auto prepare = [](const Tensor& t, std::optional<cpu::Scratch<S>>& buf, const S*& p, Strides& st,
                    std::vector<int64_t>& offs) {
    if (blas_ready(t, kBlas)) {
      p = t.data<S>();
      return;
    }
    buf = to_blas_rows<S>(t);
    p = buf->data();
    st = row_major_strides(t.shape());
    int64_t mat = t.shape()[t.ndim() - 2] * t.shape()[t.ndim() - 1];
    for (size_t i = 0; i < offs.size(); ++i) offs[i] = static_cast<int64_t>(i) * mat;
  };
  prepare(a, fa, pa, sa, oa);
  prepare(b, fb, pb, sb, ob);
  if (out.dtype() == kBlas) {
    gemm_batched<S>(a, b, out.data<S>(), pa, pb, sa, sb, oa, ob);
    return;
  }
  cpu::Scratch<S> c(out.size());
  gemm_batched<S>(a, b, c.data(), pa, pb, sa, sb, oa, ob);
  cpu::dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    for (int64_t i = 0; i < out.size(); ++i) o[i] = T(c[i]);
  });
}

}  // namespace

void Matmul::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  const Tensor &a = in[0], &b = in[1];
  if (is_integral(out.dtype())) {
    cpu::dispatch(out.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) matmul_int<T>(a, b, out);
    });
    return;
  }
  const int nd = a.ndim();
  if (a.shape()[nd - 1] == 0) {  // K == 0: the product is all zeros
    cpu::dispatch_float(out.dtype(), [&](auto tag) {
      using T = decltype(tag);
      std::fill(out.data<T>(), out.data<T>() + out.size(), T(0.0f));
    });
    return;
  }
  if (out.dtype() == Dtype::Float64) matmul_float<double>(a, b, out);
  else matmul_float<float>(a, b, out);
}

}  // namespace pyflame

namespace pyflame {
// Recorded only on a GPU; a CPU evaluation runs its steps one by one.
void FusedGemm::eval_cpu(const std::vector<Tensor>& in, Tensor& out) { eval_unfused(in, out); }
}  // namespace pyflame
