// Vendor math libraries behind one set of names: rocBLAS + MIOpen on AMD, cuBLAS + cuDNN on
// NVIDIA. Library enums differ in value and meaning: map them by name in blas.cc / dnn.cc, never
// cast. Every handle is created bound to the stream its work runs on (no legacy null stream).
#pragma once

#include <stdexcept>
#include <string>

#include "backend/rocm/gpu/runtime.h"

#if defined(__HIP_PLATFORM_AMD__)
#include <miopen/miopen.h>
#include <rocblas/rocblas.h>
#else
#include <cublas_v2.h>
#include <cudnn.h>
#endif

namespace pyflame::gpu {

#if defined(__HIP_PLATFORM_AMD__)
using blas_handle_t = rocblas_handle;
using blas_status_t = rocblas_status;
using dnn_handle_t = miopenHandle_t;
using dnn_status_t = miopenStatus_t;
inline constexpr blas_status_t kBlasSuccess = rocblas_status_success;
inline constexpr dnn_status_t kDnnSuccess = miopenStatusSuccess;
inline std::string blas_status_string(blas_status_t s) { return rocblas_status_to_string(s); }
inline std::string dnn_status_string(dnn_status_t s) { return miopenGetErrorString(s); }
#else
using blas_handle_t = cublasHandle_t;
using blas_status_t = cublasStatus_t;
using dnn_handle_t = cudnnHandle_t;
using dnn_status_t = cudnnStatus_t;
inline constexpr blas_status_t kBlasSuccess = CUBLAS_STATUS_SUCCESS;
inline constexpr dnn_status_t kDnnSuccess = CUDNN_STATUS_SUCCESS;
inline std::string blas_status_string(blas_status_t s) {
  return std::string(cublasGetStatusName(s)) + " (" + cublasGetStatusString(s) + ")";
}
inline std::string dnn_status_string(dnn_status_t s) { return cudnnGetErrorString(s); }
#endif

namespace detail {
[[noreturn]] inline void throw_lib_error(const std::string& status, int code, const char* call,
                                         const char* file, int line) {
  throw std::runtime_error(std::string("[") + call + "] failed: " + status + " (status " +
                           std::to_string(code) + ") at " + file + ":" + std::to_string(line));
}
}  // namespace detail

}  // namespace pyflame::gpu

// Evaluate a BLAS / DNN library call once; on failure throw std::runtime_error naming the call.
#define PF_BLAS_CHECK(call)                                                                    \
  do {                                                                                         \
    const ::pyflame::gpu::blas_status_t pf_blas_st_ = (call);                                  \
    if (pf_blas_st_ != ::pyflame::gpu::kBlasSuccess)                                           \
      ::pyflame::gpu::detail::throw_lib_error(::pyflame::gpu::blas_status_string(pf_blas_st_), \
                                              static_cast<int>(pf_blas_st_), #call, __FILE__,  \
                                              __LINE__);                                       \
  } while (0)

#define PF_DNN_CHECK(call)                                                                   \
  do {                                                                                       \
    const ::pyflame::gpu::dnn_status_t pf_dnn_st_ = (call);                                  \
    if (pf_dnn_st_ != ::pyflame::gpu::kDnnSuccess)                                           \
      ::pyflame::gpu::detail::throw_lib_error(::pyflame::gpu::dnn_status_string(pf_dnn_st_), \
                                              static_cast<int>(pf_dnn_st_), #call, __FILE__, \
                                              __LINE__);                                     \
  } while (0)

namespace pyflame::gpu {

// Handles bound to `stream` from birth. Destroy functions never throw (used in destructors).
inline blas_handle_t create_blas_handle(hipStream_t stream) {
  blas_handle_t h = nullptr;
#if defined(__HIP_PLATFORM_AMD__)
  PF_BLAS_CHECK(rocblas_create_handle(&h));
  const blas_status_t st = rocblas_set_stream(h, stream);
  if (st != kBlasSuccess) rocblas_destroy_handle(h);
  PF_BLAS_CHECK(st);
#else
  PF_BLAS_CHECK(cublasCreate(&h));
  const blas_status_t st = cublasSetStream(h, stream);
  if (st != kBlasSuccess) cublasDestroy(h);
  PF_BLAS_CHECK(st);
#endif
  return h;
}

inline void destroy_blas_handle(blas_handle_t h) noexcept {
#if defined(__HIP_PLATFORM_AMD__)
  if (h) rocblas_destroy_handle(h);
#else
  if (h) cublasDestroy(h);
#endif
}

inline dnn_handle_t create_dnn_handle(hipStream_t stream) {
  dnn_handle_t h = nullptr;
#if defined(__HIP_PLATFORM_AMD__)
  PF_DNN_CHECK(miopenCreateWithStream(&h, stream));
#else
  PF_DNN_CHECK(cudnnCreate(&h));
  const dnn_status_t st = cudnnSetStream(h, stream);
  if (st != kDnnSuccess) cudnnDestroy(h);
  PF_DNN_CHECK(st);
#endif
  return h;
}

inline void destroy_dnn_handle(dnn_handle_t h) noexcept {
#if defined(__HIP_PLATFORM_AMD__)
  if (h) miopenDestroy(h);
#else
  if (h) cudnnDestroy(h);
#endif
}

}  // namespace pyflame::gpu
