// Ops of the 'linalg' family (see ops.h for the contract): the Array API's
// linalg extension where a decomposition is needed. Inputs are stacks of
// matrices (..., M, N); integer and 16-bit inputs compute in float32. On the
// CPU they run LAPACK (OpenBLAS's), on the GPU hipSOLVER (AMD) or cuSOLVER
// (NVIDIA). Numerical failures (a singular matrix, no Cholesky factor, no
// convergence) raise ValueError at evaluation (on the GPU: at its end).
// inv, det, slogdet, solve, cholesky and eigh are differentiable; qr and svd not yet.
#pragma once
#include <tuple>
#include <utility>

#include "pyflame/ops.h"

namespace pyflame::linalg {

Tensor cholesky(const Tensor& x, bool upper = false);  // reads the lower (upper) triangle
Tensor inv(const Tensor& x);
Tensor det(const Tensor& x);
// (sign, log|det|); a singular matrix gives (0, -inf).
std::pair<Tensor, Tensor> slogdet(const Tensor& x);
// x1 (..., M, M) times X = x2, x2 (..., M, K) or (M,) (a vector); batch dims broadcast.
Tensor solve(const Tensor& x1, const Tensor& x2);
// Reduced: Q (..., M, K), R (..., K, N), K = min(M, N); complete: Q (M, M), R (M, N).
std::pair<Tensor, Tensor> qr(const Tensor& x, bool complete = false);
// Symmetric x (lower triangle read): ascending eigenvalues and column eigenvectors.
std::pair<Tensor, Tensor> eigh(const Tensor& x);
Tensor eigvalsh(const Tensor& x);
// U (..., M, K), S (..., K) descending, Vh (..., K, N) (full_matrices: M x M and N x N).
std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& x, bool full_matrices = true);
Tensor svdvals(const Tensor& x);

}  // namespace pyflame::linalg
