// The spec's error-check macros. Each evaluates the call once and, on
// failure, throws std::runtime_error (pyflame::gpu::HipError for HIP calls,
// which keeps the error code) naming the call, the error and the place:
//   HIP_CHECK(hipMalloc(&p, n));          // hipError_t
//   ROCBLAS_CHECK(rocblas_sgemm(...));    // the BLAS status: rocBLAS (cuBLAS on NVIDIA)
//   MIOPEN_CHECK(miopenCreate(&h));       // the DNN status: MIOpen (cuDNN on NVIDIA)
#pragma once
#include "pyflame/backend/rocm/gpu_build.h"
// (in-tree: src/backend/rocm/gpu; installed: include/pyflame/detail/backend/rocm/gpu)
#include "backend/rocm/gpu/libs.h"
#include "backend/rocm/gpu/runtime.h"

// (Spelled out rather than forwarded to PF_*_CHECK, so the message quotes the
// call as written: forwarding would expand HIP names to their CUDA aliases.)
#ifndef HIP_CHECK
#define HIP_CHECK(call)                                                            \
  do {                                                                             \
    const hipError_t pf_hip_err_ = (call);                                         \
    if (pf_hip_err_ != hipSuccess)                                                 \
      ::pyflame::gpu::detail::throw_hip_error(pf_hip_err_, #call, __FILE__, __LINE__); \
  } while (0)
#endif
#ifndef ROCBLAS_CHECK
#define ROCBLAS_CHECK(call)                                                                     \
  do {                                                                                          \
    const ::pyflame::gpu::blas_status_t pf_blas_st_ = (call);                                   \
    if (pf_blas_st_ != ::pyflame::gpu::kBlasSuccess)                                            \
      ::pyflame::gpu::detail::throw_lib_error(::pyflame::gpu::blas_status_string(pf_blas_st_),  \
                                              static_cast<int>(pf_blas_st_), #call, __FILE__,   \
                                              __LINE__);                                        \
  } while (0)
#endif
#ifndef MIOPEN_CHECK
#define MIOPEN_CHECK(call)                                                                    \
  do {                                                                                        \
    const ::pyflame::gpu::dnn_status_t pf_dnn_st_ = (call);                                   \
    if (pf_dnn_st_ != ::pyflame::gpu::kDnnSuccess)                                            \
      ::pyflame::gpu::detail::throw_lib_error(::pyflame::gpu::dnn_status_string(pf_dnn_st_),  \
                                              static_cast<int>(pf_dnn_st_), #call, __FILE__,  \
                                              __LINE__);                                      \
  } while (0)
#endif
