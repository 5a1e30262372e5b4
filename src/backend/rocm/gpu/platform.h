// Platform-neutral device queries for host code. Device properties come from attributes (or the
// platform's own property struct inside platform.cc), never from an aliased struct.
#pragma once

#include <cstdint>
#include <string>

#include "backend/rocm/gpu/runtime.h"

namespace pyflame::gpu {

// "amd" or "nvidia": the platform this binary was compiled for.
const char* platform_name() noexcept;

// Marketing name, e.g. "AMD Instinct MI300X" or "NVIDIA H100 80GB HBM3".
std::string device_name(int device);

// Code-object target: "gfx90a" (gcnArchName without the ":sramecc+:xnack-" features) on AMD,
// "sm_90" on NVIDIA. Used to select kernels and to key runtime-compiled kernel caches.
std::string device_arch(int device);

// Threads per wave/warp on that device: 64 on CDNA (gfx9), 32 on RDNA and NVIDIA.
int device_wave_size(int device);

// One device attribute, checked (throws HipError).
int device_attribute(hipDeviceAttribute_t attr, int device);

// Self-tests (kernels/platform_selftest.hip): they only enqueue work on `stream`; the caller
// synchronizes and compares against a host reference. Pointers are device pointers.

// One block of block_size threads (a multiple of the wave size, <= 1024) reduces in[0..n):
// out = {sum, max, min}; info = {PF_WAVE_SIZE, runtime warpSize, n counted by a 64-bit reduction}.
void selftest_block_reduce(const float* in, int n, float* out, long long* info, int block_size,
                           hipStream_t stream);
// Device-side float -> half_t / bf16_t -> float for in[0..n): raw bits and the values read back.
void selftest_half_roundtrip(const float* in, int n, uint16_t* half_bits, uint16_t* bf16_bits,
                             float* half_back, float* bf16_back, hipStream_t stream);
// Column-major fp32 C(m,n) = A(m,k) * B(k,n) through rocBLAS / cuBLAS gemm_ex.
void selftest_blas_gemm(const float* a, const float* b, float* c, int m, int n, int k,
                        hipStream_t stream);
// y = relu(x) over n floats through MIOpen / cuDNN.
void selftest_dnn_relu(const float* x, float* y, int n, hipStream_t stream);

}  // namespace pyflame::gpu
