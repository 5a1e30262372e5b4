#include "backend/rocm/blas.h"

#include <algorithm>
#include <map>
#include <vector>

#include "pyflame/backend/rocm.h"
#include "pyflame/errors.h"

namespace pyflame::backend::rocm {

namespace {
#if defined(__HIP_PLATFORM_AMD__)
rocblas_operation op(Trans t) { return t == Trans::N ? rocblas_operation_none : rocblas_operation_transpose; }
rocblas_datatype type_of(Dtype d) {
  switch (d) {
    case Dtype::Float16: return rocblas_datatype_f16_r;
    case Dtype::BFloat16: return rocblas_datatype_bf16_r;
    case Dtype::Float64: return rocblas_datatype_f64_r;
    default: return rocblas_datatype_f32_r;
  }
}
#else
cublasOperation_t op(Trans t) { return t == Trans::N ? CUBLAS_OP_N : CUBLAS_OP_T; }
cudaDataType_t type_of(Dtype d) {
  switch (d) {
    case Dtype::Float16: return CUDA_R_16F;
    case Dtype::BFloat16: return CUDA_R_16BF;
    case Dtype::Float64: return CUDA_R_64F;
    default: return CUDA_R_32F;
  }
}
#endif

void check_dtype(Dtype d) {
  if (!is_floating(d)) {
    throw ValueError(errmsg("gemm", std::string("BLAS supports float64, float32, float16 and bfloat16, not ") +
                                        dtype_name(d)));
  }
}
// A handle must not be used by two threads at once. A multi_stream bundle
// (or a capture context) belongs to one evaluation, so to one thread, for
// as long as it is taken: its calls need no lock. The shared context's
// handle is used by every thread with multi_stream off, and the spec's
// standalone ROCmBLAS by whoever holds it: those lock.
std::unique_lock<std::mutex> lock_handle(DeviceContext& ctx) {
  return ctx.bundle ? std::unique_lock<std::mutex>() : std::unique_lock<std::mutex>(ctx.blas_mu);
}
}  // namespace

ROCmBLAS::ROCmBLAS() : own_(std::make_unique<DeviceContext>()) {
  const int device = std::max(0, get_current_device());
  DeviceContext& shared = shared_context(device);
  DeviceGuard g(device);
  own_->device = device;
  own_->stream = shared.stream;
  own_->multiprocessors = shared.multiprocessors;
  own_->wave_size = shared.wave_size;
  own_->blas = gpu::create_blas_handle(own_->stream);
  ctx_ = own_.get();
}

ROCmBLAS::~ROCmBLAS() {
  if (!own_) return;
  gpu::destroy_blas_handle(own_->blas);
  release_gemm_plans(*own_);
}

#if defined(__HIP_PLATFORM_AMD__)
Trans ROCmBLAS::trans(rocblas_operation op) {
  if (op == rocblas_operation_none) return Trans::N;
  if (op == rocblas_operation_transpose) return Trans::T;
  throw ValueError(errmsg("gemm", "real BLAS operations are none or transpose"));
}
#endif

void ROCmBLAS::set_stream(hipStream_t stream) {
  std::lock_guard lk(ctx_->blas_mu);
#if defined(__HIP_PLATFORM_AMD__)
  PF_BLAS_CHECK(rocblas_set_stream(ctx_->blas, stream));
#else
  PF_BLAS_CHECK(cublasSetStream(ctx_->blas, stream));
#endif
  if (own_) own_->stream = stream;
}

void ROCmBLAS::gemm_ex(Dtype dtype, Trans ta, Trans tb, int M, int N, int K, float alpha, const void* A,
                       int lda, int64_t sa, const void* B, int ldb, int64_t sb, float beta, void* C,
                       int ldc, int64_t sc, int batch) {
  check_dtype(dtype);
  if (M == 0 || N == 0 || batch == 0) return;
  const auto lk = lock_handle(*ctx_);
  DeviceGuard g(ctx_->device);
  const auto t = type_of(dtype);
  // float64 computes in double, with alpha and beta as doubles (the scalars'
  // type follows the compute type); the others accumulate in float32.
  const bool f64 = dtype == Dtype::Float64;
  const double alpha64 = alpha, beta64 = beta;
  const void* pa = f64 ? static_cast<const void*>(&alpha64) : &alpha;
  const void* pb = f64 ? static_cast<const void*>(&beta64) : &beta;
  if (lt_gemm(*ctx_, {dtype, dtype == Dtype::Float32 && allow_tf32(), ta, tb, M, N, K, pa, A, lda, sa, B, ldb, sb,
                      pb, C, ldc, sc, batch})) {
    return;
  }
#if defined(__HIP_PLATFORM_AMD__)
  PF_BLAS_CHECK(rocblas_gemm_strided_batched_ex(ctx_->blas, op(ta), op(tb), M, N, K, pa, A, t, lda, sa, B, t,
                                                ldb, sb, pb, C, t, ldc, sc, C, t, ldc, sc, batch,
                                                f64 ? rocblas_datatype_f64_r : rocblas_datatype_f32_r,
                                                rocblas_gemm_algo_standard, 0, 0));
#else
  const cublasComputeType_t compute = f64 ? CUBLAS_COMPUTE_64F
                                      : dtype == Dtype::Float32 && allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                                : CUBLAS_COMPUTE_32F;
  PF_BLAS_CHECK(cublasGemmStridedBatchedEx(ctx_->blas, op(ta), op(tb), M, N, K, pa, A, t, lda, sa, B, t, ldb,
                                           sb, pb, C, t, ldc, sc, batch, compute, CUBLAS_GEMM_DEFAULT));
#endif
}

bool ROCmBLAS::gemm_epilogue(Dtype dtype, Trans ta, Trans tb, int M, int N, int K, const void* A, int lda,
                             int64_t sa, const void* B, int ldb, int64_t sb, void* C, int ldc, int64_t sc,
                             int batch, const GemmEpilogue& epilogue) {
  if (!(dtype == Dtype::Float32 || dtype == Dtype::Float16 || dtype == Dtype::BFloat16)) return false;
  if (M == 0 || N == 0 || K == 0 || batch == 0) return false;
  const auto lk = lock_handle(*ctx_);
  DeviceGuard g(ctx_->device);
  const float alpha = 1.0f, beta = 0.0f;
  return lt_gemm(*ctx_, {dtype, dtype == Dtype::Float32 && allow_tf32(), ta, tb, M, N, K, &alpha, A, lda, sa, B,
                         ldb, sb, &beta, C, ldc, sc, batch, epilogue});
}

void ROCmBLAS::gemm(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
                    const float* B, int ldb, float beta, float* C, int ldc) {
  gemm_ex(Dtype::Float32, ta, tb, M, N, K, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}

void ROCmBLAS::gemm_strided_batched(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A,
                                    int lda, int64_t sa, const float* B, int ldb, int64_t sb, float beta,
                                    float* C, int ldc, int64_t sc, int batch) {
  gemm_ex(Dtype::Float32, ta, tb, M, N, K, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch);
}

void ROCmBLAS::geam(Trans ta, Trans tb, int M, int N, float alpha, const float* A, int lda, float beta,
                    const float* B, int ldb, float* C, int ldc) {
  if (M == 0 || N == 0) return;
  const auto lk = lock_handle(*ctx_);
  DeviceGuard g(ctx_->device);
#if defined(__HIP_PLATFORM_AMD__)
  PF_BLAS_CHECK(rocblas_sgeam(ctx_->blas, op(ta), op(tb), M, N, &alpha, A, lda, &beta, B, ldb, C, ldc));
#else
  PF_BLAS_CHECK(cublasSgeam(ctx_->blas, op(ta), op(tb), M, N, &alpha, A, lda, &beta, B, ldb, C, ldc));
#endif
}

ROCmBLAS& get_blas(int device) {
  // One per context, kept in it: with multi_stream an evaluation's bundle
  // has its own handle and stream. Process lifetime, like the contexts.
  if (device < 0) device = std::max(0, get_current_device());
  DeviceContext& ctx = context(device);
  if (ROCmBLAS* b = ctx.blas_api.load(std::memory_order_acquire)) return *b;
  static std::mutex mu;  // creation only
  std::lock_guard lk(mu);
  if (!ctx.blas_api.load()) ctx.blas_api.store(new ROCmBLAS(ctx), std::memory_order_release);
  return *ctx.blas_api.load();
}

}  // namespace pyflame::backend::rocm
