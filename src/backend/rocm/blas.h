// BLAS (spec: ROCmBLAS): rocBLAS on AMD, cuBLAS on NVIDIA (GEMMs through
// cuBLASLt with per-problem plans, blas_lt.cc), column-major as BLAS itself.
// Every call runs on the handle's bound stream under the context's lock;
// fp16/bf16 accumulate in fp32; fp32 uses no TF32 unless set_allow_tf32(true).
#pragma once
#include <cstdint>
#include <memory>

#include "backend/rocm/context.h"
#include "pyflame/dtype.h"

namespace pyflame::backend::rocm {

enum class Trans { N, T };

// What the library adds to a GEMM's product before writing it (its
// epilogue): a bias along the rows of the column-major C (the last axis of
// the row-major product it stands for), then relu.
struct GemmEpilogue {
  const void* bias = nullptr;  // C's dtype, M elements; null: no bias
  bool relu = false;
  bool any() const { return bias || relu; }
};

class ROCmBLAS {
 public:
  // Uses `ctx`'s handle (the backend's own instances, get_blas()).
  explicit ROCmBLAS(DeviceContext& ctx) : ctx_(&ctx) {}
  // The spec's form: a handle of its own on the current device (device 0
  // before any is selected), bound to that device's compute stream until
  // set_stream; for one thread at a time.
  ROCmBLAS();
  ~ROCmBLAS();
  ROCmBLAS(const ROCmBLAS&) = delete;
  ROCmBLAS& operator=(const ROCmBLAS&) = delete;

  // Rebinds the handle (and this object's work) to another stream.
  void set_stream(hipStream_t stream);
  gpu::blas_handle_t handle() const { return ctx_->blas; }

  // C = alpha * op(A) * op(B) + beta * C
  void gemm(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
            const float* B, int ldb, float beta, float* C, int ldc);
  void gemm_strided_batched(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A,
                            int lda, int64_t stride_a, const float* B, int ldb, int64_t stride_b,
                            float beta, float* C, int ldc, int64_t stride_c, int batch_count);
  // C = alpha * op(A) + beta * op(B)
  void geam(Trans ta, Trans tb, int M, int N, float alpha, const float* A, int lda, float beta,
            const float* B, int ldb, float* C, int ldc);
  // The general form behind the above: float32, float16 or bfloat16 operands
  // and output, fp32 accumulation.
  void gemm_ex(Dtype dtype, Trans ta, Trans tb, int M, int N, int K, float alpha, const void* A,
               int lda, int64_t stride_a, const void* B, int ldb, int64_t stride_b, float beta,
               void* C, int ldc, int64_t stride_c, int batch_count);
  // gemm_ex with alpha 1, beta 0 and `epilogue` applied by the library, in
  // one kernel; false (nothing ran) when the library cannot do it with the
  // plain GEMM's algorithm (blas_lt.cc). float32, float16, bfloat16.
  bool gemm_epilogue(Dtype dtype, Trans ta, Trans tb, int M, int N, int K, const void* A, int lda,
                     int64_t stride_a, const void* B, int ldb, int64_t stride_b, void* C, int ldc,
                     int64_t stride_c, int batch_count, const GemmEpilogue& epilogue);

#if defined(__HIP_PLATFORM_AMD__)
  // The spec's signatures, with rocBLAS's operation enum (none or transpose).
  void gemm(rocblas_operation ta, rocblas_operation tb, int M, int N, int K, float alpha, const float* A,
            int lda, const float* B, int ldb, float beta, float* C, int ldc) {
    gemm(trans(ta), trans(tb), M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
  void gemm_strided_batched(rocblas_operation ta, rocblas_operation tb, int M, int N, int K, float alpha,
                            const float* A, int lda, int64_t stride_a, const float* B, int ldb,
                            int64_t stride_b, float beta, float* C, int ldc, int64_t stride_c,
                            int batch_count) {
    gemm_strided_batched(trans(ta), trans(tb), M, N, K, alpha, A, lda, stride_a, B, ldb, stride_b, beta, C,
                         ldc, stride_c, batch_count);
  }
  void geam(rocblas_operation ta, rocblas_operation tb, int M, int N, float alpha, const float* A, int lda,
            float beta, const float* B, int ldb, float* C, int ldc) {
    geam(trans(ta), trans(tb), M, N, alpha, A, lda, beta, B, ldb, C, ldc);
  }
  static Trans trans(rocblas_operation op);  // ValueError for conjugate transposes
#endif

 private:
  DeviceContext* ctx_;
  std::unique_ptr<DeviceContext> own_;  // the spec's form: its own handle
};

// The BLAS of a device (the current one when -1), bound to its compute stream.
ROCmBLAS& get_blas(int device = -1);

// One GEMM as the Lt libraries take it (column-major; blas_lt.cc).
struct LtGemm {
  Dtype dtype;
  bool tf32;
  Trans ta, tb;
  int M, N, K;
  const void* alpha;
  const void* A;
  int lda;
  int64_t sa;
  const void* B;
  int ldb;
  int64_t sb;
  const void* beta;
  void* C;
  int ldc;
  int64_t sc;
  int batch;
  GemmEpilogue epilogue{};
};
// Runs `g` through cuBLASLt (NVIDIA) or hipBLASLt (AMD) on ctx's stream with
// the algorithm kept for its problem (chosen on first use); false when the
// library has none, and nothing ran. With an epilogue the algorithm is the
// one the same problem without it runs, so the product's bits are the same
// as the plain GEMM's followed by separate bias and relu kernels; false when
// that algorithm cannot take the epilogue. The caller holds ctx's BLAS
// handle (one thread at a time).
bool lt_gemm(DeviceContext& ctx, const LtGemm& g);
void release_gemm_plans(DeviceContext& ctx) noexcept;

}  // namespace pyflame::backend::rocm
