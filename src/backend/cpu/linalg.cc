// The 'linalg' family's CPU kernels: LAPACK (the copy inside OpenBLAS) on
// each matrix of a row-major stack. A row-major matrix is the column-major
// transpose, which most routines can use as is (see each case).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/kernel_utils.h"
#include "ir/primitives.h"

extern "C" {
// Fortran LAPACK; the trailing size_t arguments are gfortran's hidden
// lengths of the character arguments.
void spotrf_(const char*, const int*, float*, const int*, int*, size_t);
void dpotrf_(const char*, const int*, double*, const int*, int*, size_t);
void sgetrf_(const int*, const int*, float*, const int*, int*, int*);
void dgetrf_(const int*, const int*, double*, const int*, int*, int*);
void sgetri_(const int*, float*, const int*, const int*, float*, const int*, int*);
void dgetri_(const int*, double*, const int*, const int*, double*, const int*, int*);
void sgesv_(const int*, const int*, float*, const int*, int*, float*, const int*, int*);
void dgesv_(const int*, const int*, double*, const int*, int*, double*, const int*, int*);
void sgeqrf_(const int*, const int*, float*, const int*, float*, float*, const int*, int*);
void dgeqrf_(const int*, const int*, double*, const int*, double*, double*, const int*, int*);
void sorgqr_(const int*, const int*, const int*, float*, const int*, const float*, float*, const int*, int*);
void dorgqr_(const int*, const int*, const int*, double*, const int*, const double*, double*, const int*, int*);
void ssyevd_(const char*, const char*, const int*, float*, const int*, float*, float*, const int*, int*,
             const int*, int*, size_t, size_t);
void dsyevd_(const char*, const char*, const int*, double*, const int*, double*, double*, const int*, int*,
             const int*, int*, size_t, size_t);
void sgesdd_(const char*, const int*, const int*, float*, const int*, float*, float*, const int*, float*,
             const int*, float*, const int*, int*, int*, size_t);
void dgesdd_(const char*, const int*, const int*, double*, const int*, double*, double*, const int*, double*,
             const int*, double*, const int*, int*, int*, size_t);
}

namespace pyflame {

namespace {

// The s/d routine for T.
template <typename T>
struct Lp;
#define PF_LP(T, p)                                                                                    \
  template <>                                                                                          \
  struct Lp<T> {                                                                                       \
    static void potrf(const char* u, const int* n, T* a, const int* l, int* i) { p##potrf_(u, n, a, l, i, 1); } \
    static constexpr auto getrf = p##getrf_;                                                           \
    static constexpr auto getri = p##getri_;                                                           \
    static constexpr auto gesv = p##gesv_;                                                             \
    static constexpr auto geqrf = p##geqrf_;                                                           \
    static constexpr auto orgqr = p##orgqr_;                                                           \
    static void syevd(const char* j, const char* u, const int* n, T* a, const int* l, T* w, T* wk,     \
                      const int* lw, int* iw, const int* liw, int* i) {                                \
      p##syevd_(j, u, n, a, l, w, wk, lw, iw, liw, i, 1, 1);                                           \
    }                                                                                                  \
    static void gesdd(const char* j, const int* m, const int* n, T* a, const int* l, T* s, T* u,       \
                      const int* lu, T* vt, const int* lvt, T* wk, const int* lw, int* iw, int* i) {   \
      p##gesdd_(j, m, n, a, l, s, u, lu, vt, lvt, wk, lw, iw, i, 1);                                   \
    }                                                                                                  \
  };
PF_LP(float, s)
PF_LP(double, d)
#undef PF_LP

int to_int(int64_t v, const char* fn) {
  if (v > std::numeric_limits<int>::max()) throw ValueError(errmsg(fn, "matrix too large for LAPACK"));
  return static_cast<int>(v);
}

void check_info(int info, const char* fn, const char* what) {
  if (info < 0) throw RuntimeError(errmsg(fn, "LAPACK rejected argument " + std::to_string(-info)));
  if (info > 0) throw ValueError(errmsg(fn, what));
}

// Row-major (rows x cols) <-> column-major copies.
template <typename T>
void transpose_into(const T* src, int64_t rows, int64_t cols, T* dst) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[j * rows + i] = src[i * cols + j];
}

// A row-major lower factor L is the column-major upper factor: potrf('U')
// reads and writes the row-major lower triangle; potrf('L'), for `upper`, the
// row-major upper one (PyTorch's rule: the triangle of the factor is read).
template <typename T>
void cholesky(const Lapack& p, const T* a, T* out, int n) {
  std::memcpy(out, a, sizeof(T) * n * n);
  int info = 0;
  Lp<T>::potrf(p.flag ? "L" : "U", &n, out, &n, &info);
  check_info(info, p.name(), "the matrix is not positive definite");
  for (int i = 0; i < n; ++i)  // zero the triangle LAPACK left untouched
    for (int j = i + 1; j < n; ++j) (p.flag ? out[j * n + i] : out[i * n + j]) = T(0);
}

// inv(A^T) = inv(A)^T: the column-major inverse of the row-major input is
// the row-major inverse.
template <typename T>
void inverse(const Lapack& p, const T* a, T* out, int n) {
  std::memcpy(out, a, sizeof(T) * n * n);
  std::vector<int> ipiv(std::max(n, 1));
  int info = 0;
  Lp<T>::getrf(&n, &n, out, &n, ipiv.data(), &info);
  check_info(info, p.name(), "the matrix is singular");
  int lwork = -1;
  T q;
  Lp<T>::getri(&n, out, &n, ipiv.data(), &q, &lwork, &info);
  lwork = std::max(1, static_cast<int>(q));
  std::vector<T> work(lwork);
  Lp<T>::getri(&n, out, &n, ipiv.data(), work.data(), &lwork, &info);
  check_info(info, p.name(), "the matrix is singular");
}

// det(A^T) = det(A): LU of the buffer as is; sign from the pivots.
template <typename T>
void determinant(const T* a, int n, T& sign, T& logabs, T& det) {
  std::vector<T> lu(a, a + int64_t(n) * n);
  std::vector<int> ipiv(std::max(n, 1));
  int info = 0;
  if (n > 0) Lp<T>::getrf(&n, &n, lu.data(), &n, ipiv.data(), &info);
  sign = T(1);
  logabs = T(0);
  det = T(1);
  for (int i = 0; i < n; ++i) {
    const T d = lu[int64_t(i) * n + i];
    if (ipiv[i] != i + 1) sign = -sign;
    if (d < T(0)) sign = -sign;
    logabs += std::log(std::fabs(d));
    det *= d;
  }
  if (sign * det < T(0)) det = -det;  // det carries the pivots' parity too
  if (info > 0) {  // exactly singular
    sign = T(0);
    logabs = -std::numeric_limits<T>::infinity();
    det = T(0);
  }
}

// A X = B with column-major copies in and out.
template <typename T>
void solve(const Lapack& p, const T* a, const T* b, T* out, int n, int k) {
  std::vector<T> ac(int64_t(n) * n), bc(int64_t(n) * k);
  transpose_into(a, n, n, ac.data());
  transpose_into(b, n, k, bc.data());
  std::vector<int> ipiv(std::max(n, 1));
  int info = 0, ld = std::max(n, 1);
  Lp<T>::gesv(&n, &k, ac.data(), &ld, ipiv.data(), bc.data(), &ld, &info);
  check_info(info, p.name(), "the matrix is singular");
  transpose_into(bc.data(), k, n, out);  // column-major (n x k) -> row-major
}

// QR of a column-major copy; Q and R written row-major.
template <typename T>
void qr(const Lapack& p, const T* a, T* out, int m, int n) {
  const int k = std::min(m, n), qc = p.flag ? m : k, rr = p.flag ? m : k;
  const int ld = std::max(m, 1);
  std::vector<T> w(int64_t(ld) * std::max(n, qc)), tau(std::max(k, 1));
  transpose_into(a, m, n, w.data());
  int info = 0, lwork = -1;
  T q;
  Lp<T>::geqrf(&m, &n, w.data(), &ld, tau.data(), &q, &lwork, &info);
  lwork = std::max(1, static_cast<int>(q));
  std::vector<T> work(lwork);
  Lp<T>::geqrf(&m, &n, w.data(), &ld, tau.data(), work.data(), &lwork, &info);
  check_info(info, p.name(), "QR failed");
  if (p.output == 1) {  // R: the upper triangle, rr x n
    for (int i = 0; i < rr; ++i)
      for (int j = 0; j < n; ++j) out[int64_t(i) * n + j] = j >= i ? w[int64_t(j) * ld + i] : T(0);
    return;
  }
  if (qc == 0 || m == 0) return;
  lwork = -1;
  Lp<T>::orgqr(&m, &qc, &k, w.data(), &ld, tau.data(), &q, &lwork, &info);
  lwork = std::max(1, static_cast<int>(q));
  work.assign(lwork, T(0));
  Lp<T>::orgqr(&m, &qc, &k, w.data(), &ld, tau.data(), work.data(), &lwork, &info);
  check_info(info, p.name(), "QR failed");
  transpose_into(w.data(), qc, m, out);  // column-major (m x qc) -> row-major
}

// Symmetric: the row-major lower triangle is the column-major upper one.
template <typename T>
void eigh(const Lapack& p, const T* a, T* out, int n) {
  std::vector<T> w(a, a + int64_t(n) * n), vals(std::max(n, 1));
  const char* jobz = p.output == 0 ? "N" : "V";
  int info = 0, lwork = -1, liwork = -1, iq = 0, ld = std::max(n, 1);
  T q;
  Lp<T>::syevd(jobz, "U", &n, w.data(), &ld, vals.data(), &q, &lwork, &iq, &liwork, &info);
  lwork = std::max(1, static_cast<int>(q));
  liwork = std::max(1, iq);
  std::vector<T> work(lwork);
  std::vector<int> iwork(liwork);
  Lp<T>::syevd(jobz, "U", &n, w.data(), &ld, vals.data(), work.data(), &lwork, iwork.data(), &liwork, &info);
  check_info(info, p.name(), "the eigenvalue iteration did not converge");
  if (p.output == 0) std::copy(vals.begin(), vals.begin() + n, out);
  else transpose_into(w.data(), n, n, out);  // column j is eigenvector j
}

// svd(A^T) = V S U^T on the buffer as is (column-major n x m): its U' read
// row-major is Vh, its VT' read row-major is U.
template <typename T>
void svd(const Lapack& p, const T* a, T* out, int m, int n) {
  const int k = std::min(m, n);
  std::vector<T> w(a, a + int64_t(m) * n), s(std::max(k, 1));
  const bool values = p.output == 1;
  const char* jobz = values ? "N" : (p.flag ? "A" : "S");
  const int ucols = p.flag ? n : k, vrows = p.flag ? m : k;
  const int ldu = std::max(n, 1), ldvt = std::max(vrows, 1), lda = std::max(n, 1);
  std::vector<T> u(values ? 1 : int64_t(ldu) * ucols), vt(values ? 1 : int64_t(ldvt) * m);
  std::vector<int> iwork(8 * std::max(k, 1));
  int info = 0, lwork = -1;
  T q;
  Lp<T>::gesdd(jobz, &n, &m, w.data(), &lda, s.data(), u.data(), &ldu, vt.data(), &ldvt, &q, &lwork,
               iwork.data(), &info);
  lwork = std::max(1, static_cast<int>(q));
  std::vector<T> work(lwork);
  Lp<T>::gesdd(jobz, &n, &m, w.data(), &lda, s.data(), u.data(), &ldu, vt.data(), &ldvt, work.data(), &lwork,
               iwork.data(), &info);
  check_info(info, p.name(), "the SVD did not converge");
  if (values) std::copy(s.begin(), s.begin() + k, out);
  else if (p.output == 0) std::copy(vt.begin(), vt.begin() + int64_t(vrows) * m, out);  // U: (m, vrows)
  else std::copy(u.begin(), u.begin() + int64_t(ldu) * ucols, out);                      // Vh: (ucols, n)
}

// The LU-based routines, whose answer for a matrix holding a NaN is NaN.
bool nan_in_nan_out(LapackOp op) {
  return op == LapackOp::Inv || op == LapackOp::Solve || op == LapackOp::Det || op == LapackOp::Slogdet;
}

template <typename T>
bool any_nan(const T* a, int64_t count) {
  return std::any_of(a, a + count, [](T v) { return std::isnan(v); });
}

template <typename T>
void run(const Lapack& p, const std::vector<Tensor>& in, Tensor& out) {
  const Tensor& x = in[0];
  const char* fn = p.name();
  const int m = to_int(x.shape(-2), fn), n = to_int(x.shape(-1), fn);
  const int64_t mats = shape_size(Shape(x.shape().begin(), x.shape().end() - 2));
  const int64_t out_per = mats ? out.size() / mats : 0;
  const T* a = x.data<T>();
  T* o = out.data<T>();
  for (int64_t b = 0; b < mats; ++b) {
    const T* ab = a + b * int64_t(m) * n;
    T* ob = o + b * out_per;
    if (nan_in_nan_out(p.op) && any_nan(ab, int64_t(m) * n)) {
      // LAPACK's pivoting spreads a NaN over only part of the result, and
      // which part (or whether a zero pivot is found first) differs between
      // LAPACK builds; PyTorch answers all NaN (slogdet's sign 0). An inf goes
      // through LAPACK's arithmetic, as theirs. The GPU keeps the same rule.
      const bool sign = p.op == LapackOp::Slogdet && p.output == 0;
      std::fill(ob, ob + out_per, sign ? T(0) : std::numeric_limits<T>::quiet_NaN());
      continue;
    }
    switch (p.op) {
      case LapackOp::Cholesky: cholesky(p, ab, ob, n); break;
      case LapackOp::Inv: inverse(p, ab, ob, n); break;
      case LapackOp::Det:
      case LapackOp::Slogdet: {
        T sign, logabs, det;
        determinant(ab, n, sign, logabs, det);
        *ob = p.op == LapackOp::Det ? det : (p.output == 0 ? sign : logabs);
        break;
      }
      case LapackOp::Solve: {
        const int k = to_int(in[1].shape(-1), fn);
        solve(p, ab, in[1].data<T>() + b * int64_t(n) * k, ob, n, k);
        break;
      }
      case LapackOp::Qr: qr(p, ab, ob, m, n); break;
      case LapackOp::Eigh: eigh(p, ab, ob, n); break;
      case LapackOp::Svd: svd(p, ab, ob, m, n); break;
    }
  }
}

}  // namespace

void Lapack::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  cpu::dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      run<T>(*this, in, out);
    } else {
      throw ValueError(errmsg(name(), std::string("not supported for ") + dtype_name(out.dtype())));
    }
  });
}

}  // namespace pyflame
