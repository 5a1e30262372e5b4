// The spec's BLAS wrapper, ROCmBLAS (rocBLAS on AMD, cuBLAS on NVIDIA):
// gemm, gemm_strided_batched and geam on float32 column-major matrices, and
// gemm_ex for float16/bfloat16 with float32 accumulation. The transpose
// arguments are pyflame's Trans::N / Trans::T; on AMD the spec's
// rocblas_operation forms are there too. ROCmBLAS() owns a handle for one
// thread, bound to the current device's compute stream until set_stream;
// get_blas() is the backend's own instance for the current device.
#pragma once
#include "pyflame/backend/rocm/gpu_build.h"
#include "backend/rocm/blas.h"  // NOLINT(build/include_order)
