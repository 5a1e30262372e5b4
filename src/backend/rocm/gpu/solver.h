// Dense solver library behind one set of names: hipSOLVER (on rocSOLVER) on AMD, cuSOLVER on
// NVIDIA. Code spells hipSOLVER's cuSOLVER-compatible API (hipsolverDn*); on NVIDIA each name
// used is aliased to its cusolverDn twin, which has the same arguments and meaning. Enum values
// are mapped name to name, never cast. Kept out of libs.h: only the linalg kernels include it,
// and the installed GPU headers do not depend on the solver library.
// To use a new solver name on NVIDIA, add its alias below.
#pragma once

#include <stdexcept>
#include <string>

#include "backend/rocm/gpu/runtime.h"

#if defined(__HIP_PLATFORM_AMD__)
#include <hipsolver/hipsolver.h>
#else
#include <cusolverDn.h>

// Handles, Jacobi parameters and status.
using hipsolverDnHandle_t = cusolverDnHandle_t;
using hipsolverSyevjInfo_t = syevjInfo_t;
using hipsolverGesvdjInfo_t = gesvdjInfo_t;
using hipsolverStatus_t = cusolverStatus_t;
#define HIPSOLVER_STATUS_SUCCESS CUSOLVER_STATUS_SUCCESS
#define hipsolverDnCreate cusolverDnCreate
#define hipsolverDnDestroy cusolverDnDestroy
#define hipsolverDnSetStream cusolverDnSetStream
#define hipsolverDnCreateSyevjInfo cusolverDnCreateSyevjInfo
#define hipsolverDnXsyevjSetSortEig cusolverDnXsyevjSetSortEig
#define hipsolverDnCreateGesvdjInfo cusolverDnCreateGesvdjInfo
#define hipsolverDnXgesvdjSetSortEig cusolverDnXgesvdjSetSortEig

// Enum values (cuSOLVER takes cuBLAS's fill mode and operation).
#define HIPSOLVER_FILL_MODE_UPPER CUBLAS_FILL_MODE_UPPER
#define HIPSOLVER_FILL_MODE_LOWER CUBLAS_FILL_MODE_LOWER
#define HIPSOLVER_OP_N CUBLAS_OP_N
#define HIPSOLVER_OP_T CUBLAS_OP_T
#define HIPSOLVER_EIG_MODE_NOVECTOR CUSOLVER_EIG_MODE_NOVECTOR
#define HIPSOLVER_EIG_MODE_VECTOR CUSOLVER_EIG_MODE_VECTOR

// Routines, float and double.
#define hipsolverDnSpotrfBatched cusolverDnSpotrfBatched
#define hipsolverDnDpotrfBatched cusolverDnDpotrfBatched
#define hipsolverDnSgetrf_bufferSize cusolverDnSgetrf_bufferSize
#define hipsolverDnDgetrf_bufferSize cusolverDnDgetrf_bufferSize
#define hipsolverDnSgetrf cusolverDnSgetrf
#define hipsolverDnDgetrf cusolverDnDgetrf
#define hipsolverDnSgetrs cusolverDnSgetrs
#define hipsolverDnDgetrs cusolverDnDgetrs
#define hipsolverDnSgeqrf_bufferSize cusolverDnSgeqrf_bufferSize
#define hipsolverDnDgeqrf_bufferSize cusolverDnDgeqrf_bufferSize
#define hipsolverDnSgeqrf cusolverDnSgeqrf
#define hipsolverDnDgeqrf cusolverDnDgeqrf
#define hipsolverDnSorgqr_bufferSize cusolverDnSorgqr_bufferSize
#define hipsolverDnDorgqr_bufferSize cusolverDnDorgqr_bufferSize
#define hipsolverDnSorgqr cusolverDnSorgqr
#define hipsolverDnDorgqr cusolverDnDorgqr
#define hipsolverDnSsyevd_bufferSize cusolverDnSsyevd_bufferSize
#define hipsolverDnDsyevd_bufferSize cusolverDnDsyevd_bufferSize
#define hipsolverDnSsyevd cusolverDnSsyevd
#define hipsolverDnDsyevd cusolverDnDsyevd
#define hipsolverDnSgesvd_bufferSize cusolverDnSgesvd_bufferSize
#define hipsolverDnDgesvd_bufferSize cusolverDnDgesvd_bufferSize
#define hipsolverDnSgesvd cusolverDnSgesvd
#define hipsolverDnDgesvd cusolverDnDgesvd
#define hipsolverDnSsyevjBatched_bufferSize cusolverDnSsyevjBatched_bufferSize
#define hipsolverDnDsyevjBatched_bufferSize cusolverDnDsyevjBatched_bufferSize
#define hipsolverDnSsyevjBatched cusolverDnSsyevjBatched
#define hipsolverDnDsyevjBatched cusolverDnDsyevjBatched
#define hipsolverDnSgesvdjBatched_bufferSize cusolverDnSgesvdjBatched_bufferSize
#define hipsolverDnDgesvdjBatched_bufferSize cusolverDnDgesvdjBatched_bufferSize
#define hipsolverDnSgesvdjBatched cusolverDnSgesvdjBatched
#define hipsolverDnDgesvdjBatched cusolverDnDgesvdjBatched
#endif

namespace pyflame::gpu {

using solver_handle_t = hipsolverDnHandle_t;

namespace detail {
[[noreturn]] inline void throw_solver_error(hipsolverStatus_t st, const char* call, const char* file, int line) {
  throw std::runtime_error(std::string("[") + call + "] failed: solver status " +
                           std::to_string(static_cast<int>(st)) + " at " + file + ":" + std::to_string(line));
}
}  // namespace detail

}  // namespace pyflame::gpu

// Evaluates a solver library call once; on failure throws std::runtime_error naming the call.
#define PF_SOLVER_CHECK(call)                                                                  \
  do {                                                                                         \
    const hipsolverStatus_t pf_solver_st_ = (call);                                            \
    if (pf_solver_st_ != HIPSOLVER_STATUS_SUCCESS)                                             \
      ::pyflame::gpu::detail::throw_solver_error(pf_solver_st_, #call, __FILE__, __LINE__);    \
  } while (0)

namespace pyflame::gpu {

// A handle bound to `stream` from birth (kept for the process, like the context that owns it).
inline solver_handle_t create_solver_handle(hipStream_t stream) {
  solver_handle_t h = nullptr;
  PF_SOLVER_CHECK(hipsolverDnCreate(&h));
  const hipsolverStatus_t st = hipsolverDnSetStream(h, stream);
  if (st != HIPSOLVER_STATUS_SUCCESS) hipsolverDnDestroy(h);
  PF_SOLVER_CHECK(st);
  return h;
}

}  // namespace pyflame::gpu
