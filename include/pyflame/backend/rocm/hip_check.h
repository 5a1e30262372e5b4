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

#ifndef HIP_CHECK
#define HIP_CHECK(call) PF_HIP_CHECK(call)
#endif
#ifndef ROCBLAS_CHECK
#define ROCBLAS_CHECK(call) PF_BLAS_CHECK(call)
#endif
#ifndef MIOPEN_CHECK
#define MIOPEN_CHECK(call) PF_DNN_CHECK(call)
#endif
