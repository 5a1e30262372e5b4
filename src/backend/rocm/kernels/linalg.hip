// The 'linalg' family on the GPU: the dense solver library (hipSOLVER on AMD,
// cuSOLVER on NVIDIA: gpu/solver.h) on the evaluation's stream, with the CPU
// kernels' row-major reading (cpu/linalg.cc): a row-major matrix is the
// column-major transpose. Batched where both libraries are: Cholesky
// (potrfBatched), and eigh and svd of stacks of small matrices (the Jacobi
// routines syevjBatched, gesvdjBatched; cuSOLVER takes sizes up to 32). The
// other routines are queued once per matrix of the stack, on the stream;
// nothing here waits for the device. The routines'
// info words (singular, not positive definite, not converged) are read at the
// end of the evaluation (deferred_check) and raise the CPU path's exception.
// A matrix holding a NaN is never singular (the libraries may report a NaN
// pivot so): inv and solve answer all NaN for it, as the CPU does.
#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

#include "backend/rocm/kernels/common.h"
#include "backend/rocm/solver.h"

namespace pyflame::backend::rocm {

namespace {

// The s/d routine for T.
template <typename T>
struct Sv;
#define PF_SV(T, p)                                                        \
  template <>                                                              \
  struct Sv<T> {                                                           \
    static constexpr auto potrf_batched = hipsolverDn##p##potrfBatched;    \
    static constexpr auto getrf_size = hipsolverDn##p##getrf_bufferSize;   \
    static constexpr auto getrf = hipsolverDn##p##getrf;                   \
    static constexpr auto getrs = hipsolverDn##p##getrs;                   \
    static constexpr auto geqrf_size = hipsolverDn##p##geqrf_bufferSize;   \
    static constexpr auto geqrf = hipsolverDn##p##geqrf;                   \
    static constexpr auto orgqr_size = hipsolverDn##p##orgqr_bufferSize;   \
    static constexpr auto orgqr = hipsolverDn##p##orgqr;                   \
    static constexpr auto syevd_size = hipsolverDn##p##syevd_bufferSize;   \
    static constexpr auto syevd = hipsolverDn##p##syevd;                   \
    static constexpr auto gesvd_size = hipsolverDn##p##gesvd_bufferSize;   \
    static constexpr auto gesvd = hipsolverDn##p##gesvd;                   \
    static constexpr auto syevj_size = hipsolverDn##p##syevjBatched_bufferSize; \
    static constexpr auto syevj = hipsolverDn##p##syevjBatched;            \
    static constexpr auto gesvdj_size = hipsolverDn##p##gesvdjBatched_bufferSize; \
    static constexpr auto gesvdj = hipsolverDn##p##gesvdjBatched;          \
  };
PF_SV(float, S)
PF_SV(double, D)
#undef PF_SV

enum class Tri : int { All, Lower, Upper };

// Matrix b of dst (rows x cols, row-major, `ds` apart) from matrix b of src
// (`ss` apart), read row-major with row length `ld` or, with `trans`,
// transposed (src(c, r)); entries outside the kept triangle are zero.
template <typename T>
__global__ void copy_matrices(const T* src, int64_t ss, int64_t ld, bool trans, T* dst, int64_t ds,
                              int64_t rows, int64_t cols, Tri tri, int64_t total) {
  PF_GRID_STRIDE(e, total) {
    const int64_t per = rows * cols, b = e / per, r = (e % per) / cols, c = e % cols;
    const bool keep = tri == Tri::All || (tri == Tri::Lower ? c <= r : c >= r);
    const T* s = src + b * ss;
    dst[b * ds + r * cols + c] = keep ? s[trans ? c * ld + r : r * ld + c] : T(0);
  }
}

template <typename T>
__global__ void eye_matrices(T* dst, int64_t rows, int64_t cols, int64_t total) {
  PF_GRID_STRIDE(e, total) {
    const int64_t r = (e % (rows * cols)) / cols, c = e % cols;
    dst[e] = r == c ? T(1) : T(0);
  }
}

template <typename T>
__global__ void fill_pointers(T** ptrs, T* base, int64_t stride, int64_t n) {
  PF_GRID_STRIDE(i, n) ptrs[i] = base + i * stride;
}

// flag[b] = 1 when matrix b (`per` entries) holds a NaN (flag zeroed before).
template <typename T>
__global__ void flag_nan(const T* a, int64_t per, int64_t total, int* flag) {
  PF_GRID_STRIDE(e, total) {
    if (a[e] != a[e]) flag[e / per] = 1;  // NaN
  }
}

// Every entry of each flagged matrix's answer (`per` entries) becomes NaN.
template <typename T>
__global__ void fill_nan(T* out, int64_t per, int64_t total, const int* flag) {
  PF_GRID_STRIDE(e, total) {
    if (flag[e / per]) out[e] = std::numeric_limits<T>::quiet_NaN();
  }
}

// words[0]: set on any failure; words[1]: a routine's own failure (info > 0,
// when `positive_fails`, of a matrix `nan` does not flag; word i is matrix
// i % mats's); words[2]: an argument the library rejected (-info).
__global__ void check_info(const int* info, int64_t n, int64_t* words, bool positive_fails, const int* nan,
                           int64_t mats) {
  PF_GRID_STRIDE(i, n) {
    const int v = info[i];
    if (v < 0) {
      words[2] = -v;
      words[0] = 1;
    } else if (v > 0 && positive_fails && !(nan && nan[i % mats])) {
      words[1] = 1;
      words[0] = 1;
    }
  }
}

// Determinant, sign or log|det| (what: 0, 1, 2) of each LU factorization,
// as cpu/linalg.cc's determinant(): the sign from the pivots, exactly
// singular (info > 0) -> 0, 0, -inf; a matrix holding a NaN (`nan`) -> NaN,
// 0, NaN, as on the CPU.
template <typename T>
__global__ void lu_det(const T* lu, const int* ipiv, const int* info, const int* nan, int64_t n, int64_t mats,
                       int what, T* out) {
  PF_GRID_STRIDE(b, mats) {
    if (n > 0 && nan[b]) {
      out[b] = what == 1 ? T(0) : std::numeric_limits<T>::quiet_NaN();
      continue;
    }
    T sign = 1, logabs = 0, det = 1;
    for (int64_t i = 0; i < n; ++i) {
      const T d = lu[b * n * n + i * n + i];
      if (ipiv[b * n + i] != i + 1) sign = -sign;
      if (d < T(0)) sign = -sign;
      logabs += ::log(::fabs(d));
      det *= d;
    }
    if (sign * det < T(0)) det = -det;
    if (n > 0 && info[b] > 0) {
      sign = 0;
      logabs = -std::numeric_limits<T>::infinity();
      det = 0;
    }
    out[b] = what == 0 ? det : (what == 1 ? sign : logabs);
  }
}

// The largest matrices the batched Jacobi routines take (cuSOLVER's limit).
constexpr int kJacobiMax = 32;

int to_int(int64_t v, const char* fn) {
  if (v > std::numeric_limits<int>::max()) throw ValueError(errmsg(fn, "matrix too large for the solver library"));
  return static_cast<int>(v);
}

// One node's work: the handle (held for the call), scratch on the stream,
// launches and info checks.
template <typename T>
struct Job {
  const Lapack& p;
  DeviceContext& ctx;
  solver::SolverHandle& s;
  gpu::solver_handle_t h;
  int64_t mats;
  std::vector<std::shared_ptr<Buffer>> held;

  template <typename U = T>
  U* scratch(int64_t count) {
    held.push_back(temp_buffer(ctx, sizeof(U) * size_t(std::max<int64_t>(count, 1))));
    return static_cast<U*>(held.back()->ptr);
  }
  T* copy_of(const T* a, int64_t count) {
    T* w = scratch(count);
    if (count) PF_HIP_CHECK(hipMemcpyAsync(w, a, sizeof(T) * count, hipMemcpyDeviceToDevice, ctx.stream));
    return w;
  }
  void copy(const T* src, int64_t ss, int64_t ld, bool trans, T* dst, int64_t ds, int64_t rows, int64_t cols,
            Tri tri = Tri::All) {
    const int64_t total = mats * rows * cols;
    if (!total) return;
    copy_matrices<T><<<grid_for(ctx, total, kThreads), kThreads, 0, ctx.stream>>>(src, ss, ld, trans, dst, ds, rows,
                                                                                  cols, tri, total);
    PF_HIP_CHECK_LAUNCH();
  }
  void eye(T* dst, int64_t rows, int64_t cols) {
    const int64_t total = mats * rows * cols;
    if (!total) return;
    eye_matrices<T><<<grid_for(ctx, total, kThreads), kThreads, 0, ctx.stream>>>(dst, rows, cols, total);
    PF_HIP_CHECK_LAUNCH();
  }
  // One word per matrix of `a` (`per` entries each): 1 where it holds a NaN.
  const int* nan_flags(const T* a, int64_t per) {
    int* flag = scratch<int>(mats);
    PF_HIP_CHECK(hipMemsetAsync(flag, 0, sizeof(int) * size_t(std::max<int64_t>(mats, 1)), ctx.stream));
    const int64_t total = mats * per;
    if (total) {
      flag_nan<T><<<grid_for(ctx, total, kThreads), kThreads, 0, ctx.stream>>>(a, per, total, flag);
      PF_HIP_CHECK_LAUNCH();
    }
    return flag;
  }
  // The answers (`per` entries each) of the matrices `flag` marks: all NaN.
  void fill_nan_where(T* out, int64_t per, const int* flag) {
    const int64_t total = mats * per;
    if (!total) return;
    fill_nan<T><<<grid_for(ctx, total, kThreads), kThreads, 0, ctx.stream>>>(out, per, total, flag);
    PF_HIP_CHECK_LAUNCH();
  }
  // `count` info words, read at the end of the evaluation: a positive one
  // raises ValueError(what) (never when `what` is null, nor for a matrix
  // `nan` flags).
  void check(const int* info, int64_t count, const char* what, const int* nan = nullptr) {
    const char* fn = p.name();
    int64_t* words = deferred_check(ctx, 3, [fn, what](const int64_t* w) {
      if (w[2]) throw RuntimeError(errmsg(fn, "the solver library rejected argument " + std::to_string(w[2])));
      throw ValueError(errmsg(fn, what));
    });
    check_info<<<grid_for(ctx, count, kThreads), kThreads, 0, ctx.stream>>>(info, count, words, what != nullptr,
                                                                            nan, std::max<int64_t>(mats, 1));
    PF_HIP_CHECK_LAUNCH();
  }
};

// As on the CPU: the column-major upper factor of the buffer (which reads
// A's row-major lower triangle) is, read row-major, the lower factor L; the
// column-major lower one, for `upper`, the upper factor.
template <typename T>
void cholesky(Job<T>& j, const T* a, T* out, int n) {
  const int64_t nn = int64_t(n) * n;
  T* w = j.copy_of(a, j.mats * nn);
  T** ptrs = j.template scratch<T*>(j.mats);
  fill_pointers<T><<<grid_for(j.ctx, j.mats, kThreads), kThreads, 0, j.ctx.stream>>>(ptrs, w, nn, j.mats);
  PF_HIP_CHECK_LAUNCH();
  int* info = j.template scratch<int>(j.mats);
  const auto uplo = j.p.flag ? HIPSOLVER_FILL_MODE_LOWER : HIPSOLVER_FILL_MODE_UPPER;
  PF_SOLVER_CHECK(Sv<T>::potrf_batched(j.h, uplo, n, ptrs, std::max(n, 1), info, to_int(j.mats, j.p.name())));
  j.check(info, j.mats, "the matrix is not positive definite");
  j.copy(w, nn, n, false, out, nn, n, n, j.p.flag ? Tri::Upper : Tri::Lower);  // the other part is scratch
}

// LU of each matrix's buffer as is (the column-major A^T) into a copy;
// `info` gets one word per matrix.
template <typename T>
T* lu(Job<T>& j, const T* a, int n, int* ipiv, int* info) {
  const int64_t nn = int64_t(n) * n;
  T* w = j.copy_of(a, j.mats * nn);
  int lwork = 0;
  PF_SOLVER_CHECK(Sv<T>::getrf_size(j.h, n, n, w, n, &lwork));
  T* work = j.scratch(lwork);
  for (int64_t b = 0; b < j.mats; ++b) {
    PF_SOLVER_CHECK(Sv<T>::getrf(j.h, n, n, w + b * nn, n, work, ipiv + b * n, info + b));
  }
  return w;
}

// inv(A^T) = inv(A)^T: solving the column-major A^T against I gives the
// row-major inverse.
template <typename T>
void inverse(Job<T>& j, const T* a, T* out, int n) {
  const int64_t nn = int64_t(n) * n;
  int* ipiv = j.template scratch<int>(j.mats * n);
  int* info = j.template scratch<int>(2 * j.mats);  // getrf's, then getrs's
  const int* nan = j.nan_flags(a, nn);
  T* w = lu(j, a, n, ipiv, info);
  j.eye(out, n, n);
  for (int64_t b = 0; b < j.mats; ++b) {
    PF_SOLVER_CHECK(Sv<T>::getrs(j.h, HIPSOLVER_OP_N, n, n, w + b * nn, n, ipiv + b * n, out + b * nn, n,
                                 info + j.mats + b));
  }
  j.check(info, 2 * j.mats, "the matrix is singular", nan);
  j.fill_nan_where(out, nn, nan);
}

// A X = B: with the LU of the column-major A^T, getrs('T') solves A X = B for
// a column-major B (k == 1: the row-major vector as is).
template <typename T>
void solve(Job<T>& j, const T* a, const T* bm, T* out, int n, int k) {
  const int64_t nn = int64_t(n) * n, nk = int64_t(n) * k;
  int* ipiv = j.template scratch<int>(j.mats * n);
  int* info = j.template scratch<int>(2 * j.mats);
  const int* nan = j.nan_flags(a, nn);
  T* w = lu(j, a, n, ipiv, info);
  T* x = out;
  if (k == 1) {
    PF_HIP_CHECK(hipMemcpyAsync(out, bm, sizeof(T) * j.mats * nk, hipMemcpyDeviceToDevice, j.ctx.stream));
  } else {
    x = j.scratch(j.mats * nk);
    j.copy(bm, nk, k, true, x, nk, k, n);  // column-major (n x k)
  }
  for (int64_t b = 0; b < j.mats; ++b) {
    PF_SOLVER_CHECK(Sv<T>::getrs(j.h, HIPSOLVER_OP_T, n, k, w + b * nn, n, ipiv + b * n, x + b * nk, n,
                                 info + j.mats + b));
  }
  j.check(info, 2 * j.mats, "the matrix is singular", nan);
  if (k != 1) j.copy(x, nk, n, true, out, nk, n, k);
  j.fill_nan_where(out, nk, nan);
}

// det(A^T) = det(A); an exactly singular matrix is no error.
template <typename T>
void determinant(Job<T>& j, const T* a, T* out, int n, int what) {
  const int* ipiv = nullptr;
  const int* info = nullptr;
  const int* nan = nullptr;
  const T* w = nullptr;
  if (n > 0) {
    int* piv = j.template scratch<int>(j.mats * n);
    int* inf = j.template scratch<int>(j.mats);
    nan = j.nan_flags(a, int64_t(n) * n);
    w = lu(j, a, n, piv, inf);
    j.check(inf, j.mats, nullptr);
    ipiv = piv;
    info = inf;
  }
  lu_det<T><<<grid_for(j.ctx, j.mats, kThreads), kThreads, 0, j.ctx.stream>>>(w, ipiv, info, nan, n, j.mats, what,
                                                                             out);
  PF_HIP_CHECK_LAUNCH();
}

// QR of a column-major copy (m x max(n, Q's columns), zeroed beyond A);
// R's upper triangle or Q written row-major.
template <typename T>
void qr(Job<T>& j, const T* a, T* out, int m, int n) {
  const int k = std::min(m, n), qc = j.p.flag ? m : k, rr = j.p.flag ? m : k;
  if (k == 0) {  // no reflectors: Q is the identity, R zero
    if (j.p.output == 0) j.eye(out, m, qc);
    else PF_HIP_CHECK(hipMemsetAsync(out, 0, sizeof(T) * j.mats * rr * n, j.ctx.stream));
    return;
  }
  const int64_t ws = int64_t(m) * std::max(n, qc);
  T* w = j.scratch(j.mats * ws);
  PF_HIP_CHECK(hipMemsetAsync(w, 0, sizeof(T) * j.mats * ws, j.ctx.stream));
  j.copy(a, int64_t(m) * n, n, true, w, ws, n, m);
  T* tau = j.scratch(j.mats * k);
  int* info = j.template scratch<int>(j.mats);
  int lwork = 0, lq = 0;
  PF_SOLVER_CHECK(Sv<T>::geqrf_size(j.h, m, n, w, m, &lwork));
  if (j.p.output == 0) PF_SOLVER_CHECK(Sv<T>::orgqr_size(j.h, m, qc, k, w, m, tau, &lq));
  T* work = j.scratch(std::max(lwork, lq));
  lwork = std::max({lwork, lq, 1});
  for (int64_t b = 0; b < j.mats; ++b) {
    PF_SOLVER_CHECK(Sv<T>::geqrf(j.h, m, n, w + b * ws, m, tau + b * k, work, lwork, info + b));
  }
  if (j.p.output == 1) {
    j.copy(w, ws, m, true, out, int64_t(rr) * n, rr, n, Tri::Upper);
  } else {
    for (int64_t b = 0; b < j.mats; ++b) {
      PF_SOLVER_CHECK(Sv<T>::orgqr(j.h, m, qc, k, w + b * ws, m, tau + b * k, work, lwork, info + b));
    }
    j.copy(w, ws, m, true, out, int64_t(m) * qc, m, qc);
  }
  j.check(info, j.mats, "QR failed");
}

// Symmetric: the row-major lower triangle is the column-major upper one.
template <typename T>
void eigh(Job<T>& j, const T* a, T* out, int n) {
  const int64_t nn = int64_t(n) * n;
  const bool values = j.p.output == 0;
  const auto jobz = values ? HIPSOLVER_EIG_MODE_NOVECTOR : HIPSOLVER_EIG_MODE_VECTOR;
  T* w = j.copy_of(a, j.mats * nn);
  T* vals = values ? out : j.scratch(j.mats * n);
  int* info = j.template scratch<int>(j.mats);
  const auto up = HIPSOLVER_FILL_MODE_UPPER;
  int lwork = 0;
  if (j.mats > 1 && n <= kJacobiMax) {  // the whole stack in one call
    const int nb = to_int(j.mats, j.p.name());
    PF_SOLVER_CHECK(Sv<T>::syevj_size(j.h, jobz, up, n, w, n, vals, &lwork, j.s.syevj, nb));
    T* work = j.scratch(lwork);
    PF_SOLVER_CHECK(Sv<T>::syevj(j.h, jobz, up, n, w, n, vals, work, lwork, info, j.s.syevj, nb));
  } else {
    PF_SOLVER_CHECK(Sv<T>::syevd_size(j.h, jobz, up, n, w, n, vals, &lwork));
    T* work = j.scratch(lwork);
    for (int64_t b = 0; b < j.mats; ++b) {
      PF_SOLVER_CHECK(Sv<T>::syevd(j.h, jobz, up, n, w + b * nn, n, vals + b * n, work, lwork, info + b));
    }
  }
  j.check(info, j.mats, "the eigenvalue iteration did not converge");
  if (!values) j.copy(w, nn, n, true, out, nn, n, n);  // column c is eigenvector c
}

// A stack of small matrices in one call. The buffer as is is the
// column-major (n x m) A^T = V S U^T: gesvdj's full left factor is V
// (n x n), its right factor U (m x m), both column-major.
template <typename T>
void svd_batched(Job<T>& j, const T* a, T* out, int m, int n) {
  const int k = std::min(m, n), output = j.p.output;  // 0: U, 1: S, 2: Vh
  const int64_t mn = int64_t(m) * n, nn = int64_t(n) * n, mm = int64_t(m) * m;
  const int nb = to_int(j.mats, j.p.name());
  const auto jobz = output == 1 ? HIPSOLVER_EIG_MODE_NOVECTOR : HIPSOLVER_EIG_MODE_VECTOR;
  T* w = j.copy_of(a, j.mats * mn);
  T* s = output == 1 ? out : j.scratch(j.mats * k);
  T* v = j.scratch(j.mats * nn);
  T* u = j.scratch(j.mats * mm);
  int* info = j.template scratch<int>(j.mats);
  int lwork = 0;
  PF_SOLVER_CHECK(Sv<T>::gesvdj_size(j.h, jobz, n, m, w, n, s, v, n, u, m, &lwork, j.s.gesvdj, nb));
  T* work = j.scratch(lwork);
  PF_SOLVER_CHECK(Sv<T>::gesvdj(j.h, jobz, n, m, w, n, s, v, n, u, m, work, lwork, info, j.s.gesvdj, nb));
  j.check(info, j.mats, "the SVD did not converge");
  const int ucols = j.p.flag ? m : k, vrows = j.p.flag ? n : k;
  if (output == 0) j.copy(u, mm, m, true, out, int64_t(m) * ucols, m, ucols);
  else if (output == 2) j.copy(v, nn, n, false, out, int64_t(vrows) * n, vrows, n);  // Vh = V^T
}

// gesvd takes M >= N. A wide row-major A (n >= m) is, as is, the column-major
// (n x m) A^T = V S U^T: its left factor read row-major is Vh, its right
// factor U, each written straight into the output. A tall one is transposed
// into a column-major copy of A, and its factors transposed out.
template <typename T>
void svd(Job<T>& j, const T* a, T* out, int m, int n) {
  const int k = std::min(m, n);
  const bool full = j.p.flag;
  const int output = j.p.output;  // 0: U, 1: S, 2: Vh
  if (k == 0) {  // no singular values: full factors are identities
    if (output != 1) j.eye(out, output == 0 ? m : n, output == 0 ? m : n);
    return;
  }
  if (j.mats > 1 && m <= kJacobiMax && n <= kJacobiMax) return svd_batched(j, a, out, m, n);
  const bool wide = n >= m;
  const int M = wide ? n : m, N = wide ? m : n;
  const int64_t mn = int64_t(m) * n, ucols = full ? M : N;
  T* w;
  if (wide) {
    w = j.copy_of(a, j.mats * mn);
  } else {
    w = j.scratch(j.mats * mn);
    j.copy(a, mn, n, true, w, mn, n, m);
  }
  // Which factor the output is: the left (M x ucols) or the right (N x N).
  const bool left = output != 1 && (output == 2) == wide;
  const bool direct = output == 1 || wide;  // written in place in `out`
  const int64_t per = output == 1 ? k : (left ? M * ucols : int64_t(N) * N);
  T* f = direct ? out : j.scratch(j.mats * per);
  T* s = output == 1 ? out : j.scratch(j.mats * k);
  const signed char jobu = output == 1 || !left ? 'N' : (full ? 'A' : 'S');
  const signed char jobvt = output == 1 || left ? 'N' : 'A';
  int lwork = 0;
  PF_SOLVER_CHECK(Sv<T>::gesvd_size(j.h, M, N, &lwork));
  T* work = j.scratch(lwork);
  T* rwork = j.scratch(k);
  int* info = j.template scratch<int>(j.mats);
  for (int64_t b = 0; b < j.mats; ++b) {
    T* fb = output == 1 ? nullptr : f + b * per;
    PF_SOLVER_CHECK(Sv<T>::gesvd(j.h, jobu, jobvt, M, N, w + b * mn, M, s + b * k, left ? fb : nullptr, M,
                                 left ? nullptr : fb, N, work, lwork, rwork, info + b));
  }
  j.check(info, j.mats, "the SVD did not converge");
  if (direct) return;
  // Tall: U (m x ucols) from the left factor, Vh (n x n) from the right one.
  if (left) j.copy(f, per, M, true, out, int64_t(m) * ucols, m, ucols);
  else j.copy(f, per, N, true, out, int64_t(n) * n, n, n);
}

template <typename T>
void run(const Lapack& p, const std::vector<Tensor>& in, Tensor& out) {
  const Tensor& x = in[0];
  const char* fn = p.name();
  const int m = to_int(x.shape(-2), fn), n = to_int(x.shape(-1), fn);
  const int64_t mats = shape_size(Shape(x.shape().begin(), x.shape().end() - 2));
  if (out.size() == 0) return;
  DeviceContext& ctx = context(out.device().index);
  DeviceGuard g(ctx.device);
  solver::SolverHandle& sh = solver::handle_for(ctx);
  std::lock_guard lk(sh.mu);  // the library handle serves one thread at a time
  Job<T> j{p, ctx, sh, sh.h, mats, {}};
  const T* a = x.data<T>();
  T* o = out.data<T>();
  switch (p.op) {
    case LapackOp::Cholesky: cholesky(j, a, o, n); break;
    case LapackOp::Inv: inverse(j, a, o, n); break;
    case LapackOp::Det: determinant(j, a, o, n, 0); break;
    case LapackOp::Slogdet: determinant(j, a, o, n, p.output == 0 ? 1 : 2); break;
    case LapackOp::Solve: solve(j, a, in[1].data<T>(), o, n, to_int(in[1].shape(-1), fn)); break;
    case LapackOp::Qr: qr(j, a, o, m, n); break;
    case LapackOp::Eigh: eigh(j, a, o, n); break;
    case LapackOp::Svd: svd(j, a, o, m, n); break;
  }
}

}  // namespace

}  // namespace pyflame::backend::rocm

namespace pyflame {

using namespace backend::rocm;

void Lapack::eval_gpu(const std::vector<Tensor>& in, Tensor& out) {
  if (out.dtype() == Dtype::Float32) run<float>(*this, in, out);
  else if (out.dtype() == Dtype::Float64) run<double>(*this, in, out);
  else throw ValueError(errmsg(name(), std::string("not supported for ") + dtype_name(out.dtype())));
}

}  // namespace pyflame
