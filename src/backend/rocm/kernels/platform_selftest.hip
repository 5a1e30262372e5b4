// Kernels that exercise the platform layer (device_utils.h, libs.h) on every target.
#include <stdexcept>
#include <string>

#include "backend/rocm/gpu/device_utils.h"
#include "backend/rocm/gpu/libs.h"
#include "backend/rocm/gpu/platform.h"

namespace pyflame::gpu {
namespace {

__global__ void block_reduce_kernel(const float* in, int n, float* out, long long* info) {
  const int tid = static_cast<int>(block_thread_id()), nt = static_cast<int>(block_num_threads());
  float sum = 0.f, mx = in[0], mn = in[0];
  long long count = 0;
  for (int i = tid; i < n; i += nt) {
    sum += in[i];
    mx = MaxOp{}(mx, in[i]);
    mn = MinOp{}(mn, in[i]);
    ++count;
  }
  sum = block_reduce_sum(sum);
  mx = block_reduce_max(mx);
  mn = block_reduce_min(mn);
  count = block_reduce_sum(count);  // 8-byte shuffle path
  if (tid == 0) {
    out[0] = sum;
    out[1] = mx;
    out[2] = mn;
    info[0] = PF_WAVE_SIZE;
    info[1] = warpSize;
    info[2] = count;
  }
}

__global__ void roundtrip_kernel(const float* in, int n, uint16_t* half_bits, uint16_t* bf16_bits,
                                 float* half_back, float* bf16_back) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const half_t h(in[i]);
  const bf16_t b(in[i]);
  half_bits[i] = h.bits;
  bf16_bits[i] = b.bits;
  half_back[i] = static_cast<float>(h);
  bf16_back[i] = static_cast<float>(b);
}

// Runs `f` at scope exit: releases library objects when a check throws.
template <class F>
struct Defer {
  F f;
  ~Defer() { f(); }
};
template <class F>
Defer(F) -> Defer<F>;

}  // namespace

void selftest_block_reduce(const float* in, int n, float* out, long long* info, int block_size,
                           hipStream_t stream) {
  int device = 0;
  PF_HIP_CHECK(hipGetDevice(&device));
  const int wave = device_wave_size(device);
  if (n <= 0 || block_size <= 0 || block_size > kMaxBlockThreads || block_size % wave != 0)
    throw std::invalid_argument("[selftest_block_reduce] need n > 0 and block_size a multiple of " +
                                std::to_string(wave) + " up to 1024, got n=" + std::to_string(n) +
                                " block_size=" + std::to_string(block_size));
  block_reduce_kernel<<<1, block_size, 0, stream>>>(in, n, out, info);
  PF_HIP_CHECK_LAUNCH();
}

void selftest_half_roundtrip(const float* in, int n, uint16_t* half_bits, uint16_t* bf16_bits,
                             float* half_back, float* bf16_back, hipStream_t stream) {
  if (n <= 0) return;
  roundtrip_kernel<<<(n + 255) / 256, 256, 0, stream>>>(in, n, half_bits, bf16_bits, half_back,
                                                        bf16_back);
  PF_HIP_CHECK_LAUNCH();
}

void selftest_blas_gemm(const float* a, const float* b, float* c, int m, int n, int k,
                        hipStream_t stream) {
  blas_handle_t h = create_blas_handle(stream);
  Defer release{[&] { destroy_blas_handle(h); }};
  const float alpha = 1.f, beta = 0.f;
#if defined(__HIP_PLATFORM_AMD__)
  PF_BLAS_CHECK(rocblas_gemm_ex(h, rocblas_operation_none, rocblas_operation_none, m, n, k, &alpha,
                                a, rocblas_datatype_f32_r, m, b, rocblas_datatype_f32_r, k, &beta,
                                c, rocblas_datatype_f32_r, m, c, rocblas_datatype_f32_r, m,
                                rocblas_datatype_f32_r, rocblas_gemm_algo_standard, 0, 0));
#else
  // CUBLAS_COMPUTE_32F with the default math mode: true fp32, no TF32.
  PF_BLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, a, CUDA_R_32F, m, b,
                             CUDA_R_32F, k, &beta, c, CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT));
#endif
}

void selftest_dnn_relu(const float* x, float* y, int n, hipStream_t stream) {
  dnn_handle_t h = create_dnn_handle(stream);
  Defer release_handle{[&] { destroy_dnn_handle(h); }};
  const float alpha = 1.f, beta = 0.f;
#if defined(__HIP_PLATFORM_AMD__)
  miopenTensorDescriptor_t desc = nullptr;
  miopenActivationDescriptor_t act = nullptr;
  Defer release_desc{[&] {
    if (act) miopenDestroyActivationDescriptor(act);
    if (desc) miopenDestroyTensorDescriptor(desc);
  }};
  PF_DNN_CHECK(miopenCreateTensorDescriptor(&desc));
  PF_DNN_CHECK(miopenSet4dTensorDescriptor(desc, miopenFloat, 1, 1, 1, n));
  PF_DNN_CHECK(miopenCreateActivationDescriptor(&act));
  PF_DNN_CHECK(miopenSetActivationDescriptor(act, miopenActivationRELU, 0.0, 0.0, 0.0));
  PF_DNN_CHECK(miopenActivationForward(h, act, &alpha, desc, x, &beta, desc, y));
#else
  cudnnTensorDescriptor_t desc = nullptr;
  cudnnActivationDescriptor_t act = nullptr;
  Defer release_desc{[&] {
    if (act) cudnnDestroyActivationDescriptor(act);
    if (desc) cudnnDestroyTensorDescriptor(desc);
  }};
  PF_DNN_CHECK(cudnnCreateTensorDescriptor(&desc));
  PF_DNN_CHECK(cudnnSetTensor4dDescriptor(desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, 1, n));
  PF_DNN_CHECK(cudnnCreateActivationDescriptor(&act));
  PF_DNN_CHECK(cudnnSetActivationDescriptor(act, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0));
  PF_DNN_CHECK(cudnnActivationForward(h, act, &alpha, desc, x, &beta, desc, y));
#endif
}

}  // namespace pyflame::gpu
