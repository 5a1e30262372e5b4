// The multi_stream workload of multistream.cc written directly against CUDA
// and cuBLAS, the comparison BENCHMARKS.md names for it ("plain CUDA C++
// with per-thread streams and cuBLAS handles"): each thread has its own
// stream, cuBLAS handle and pinned buffers, and per evaluation copies a
// batch in (host vector -> pinned -> device), runs `layers` fp16 layers
// relu(x @ W) of width `width` (a cuBLAS GEMM and a relu kernel each, the
// same 18 GPU operations as PyFlame's evaluation) and copies the result out
// (device -> pinned -> host vector). epilogue=1 fuses the relu into the
// GEMM (cuBLASLt's RELU epilogue: 8 kernels fewer). Built on NVIDIA only.
//
//   pyflame_bench_multistream_cuda [threads=8] [layers=8] [width=1024] [evals=200] [epilogue=0|1]
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_fp16.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

void check(int status, const char* what) {
  if (status != 0) {
    std::fprintf(stderr, "%s failed: %d\n", what, status);
    std::exit(1);
  }
}
#define CHECK(x) check(static_cast<int>(x), #x)

__global__ void relu(__half* p, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = __hmax(p[i], __float2half(0.0f));
}

constexpr int kBatches[] = {16, 32, 64, 128, 256};
constexpr int kMaxBatch = 256;

struct Setup {
  int threads = 8, layers = 8, width = 1024, evals = 200;
  bool epilogue = false;
};

// One thread's stream, handles and buffers.
struct Worker {
  cudaStream_t stream;
  cublasHandle_t blas;
  cublasLtHandle_t lt;
  void* workspace;
  __half *a, *b, *pinned_in, *pinned_out;
  static constexpr size_t kWorkspace = 32u << 20;

  explicit Worker(int width) {
    const size_t bytes = size_t(kMaxBatch) * width * sizeof(__half);
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CHECK(cublasCreate(&blas));
    CHECK(cublasSetStream(blas, stream));
    CHECK(cublasLtCreate(&lt));
    CHECK(cudaMalloc(&workspace, kWorkspace));
    CHECK(cublasSetWorkspace(blas, workspace, kWorkspace));
    CHECK(cudaMalloc(&a, bytes));
    CHECK(cudaMalloc(&b, bytes));
    CHECK(cudaMallocHost(&pinned_in, bytes));
    CHECK(cudaMallocHost(&pinned_out, bytes));
  }

  // y = relu(x @ w) for n rows (row-major; column-major y^T = w^T x^T).
  void layer(const Setup& s, const __half* w, const __half* x, __half* y, int n) {
    const float one = 1.0f, zero = 0.0f;
    const int W = s.width;
    if (!s.epilogue) {
      CHECK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, W, n, W, &one, w, CUDA_R_16F, W, x, CUDA_R_16F, W, &zero,
                         y, CUDA_R_16F, W, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      relu<<<(n * W + 255) / 256, 256, 0, stream>>>(y, n * W);
      CHECK(cudaGetLastError());
      return;
    }
    cublasLtMatmulDesc_t op;
    CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_RELU;
    CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep)));
    cublasLtMatrixLayout_t lw, lx, ly;
    CHECK(cublasLtMatrixLayoutCreate(&lw, CUDA_R_16F, W, W, W));
    CHECK(cublasLtMatrixLayoutCreate(&lx, CUDA_R_16F, W, n, W));
    CHECK(cublasLtMatrixLayoutCreate(&ly, CUDA_R_16F, W, n, W));
    CHECK(cublasLtMatmul(lt, op, &one, w, lw, x, lx, &zero, y, ly, y, ly, nullptr, workspace, kWorkspace, stream));
    cublasLtMatmulDescDestroy(op);
    for (auto l : {lw, lx, ly}) cublasLtMatrixLayoutDestroy(l);
  }

  void run(const Setup& s, const std::vector<__half*>& ws, int t, int evals) {
    std::vector<__half> src(size_t(kMaxBatch) * s.width, __float2half(1.0f)), dst(src.size());
    for (int j = 0; j < evals; ++j) {
      const int n = kBatches[(t + j) % 5];
      const size_t bytes = size_t(n) * s.width * sizeof(__half);
      std::memcpy(pinned_in, src.data(), bytes);
      CHECK(cudaMemcpyAsync(a, pinned_in, bytes, cudaMemcpyHostToDevice, stream));
      __half *x = a, *y = b;
      for (__half* w : ws) {
        layer(s, w, x, y, n);
        std::swap(x, y);
      }
      CHECK(cudaMemcpyAsync(pinned_out, x, bytes, cudaMemcpyDeviceToHost, stream));
      CHECK(cudaStreamSynchronize(stream));
      std::memcpy(dst.data(), pinned_out, bytes);
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  Setup s;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string k = arg.substr(0, eq), v = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (k == "threads") s.threads = std::atoi(v.c_str());
    else if (k == "layers") s.layers = std::atoi(v.c_str());
    else if (k == "width") s.width = std::atoi(v.c_str());
    else if (k == "evals") s.evals = std::atoi(v.c_str());
    else if (k == "epilogue") s.epilogue = v == "1";
    else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  std::vector<__half*> ws(s.layers);
  const std::vector<__half> host(size_t(s.width) * s.width, __float2half(1.0f / s.width));
  for (__half*& w : ws) {
    CHECK(cudaMalloc(&w, host.size() * sizeof(__half)));
    CHECK(cudaMemcpy(w, host.data(), host.size() * sizeof(__half), cudaMemcpyHostToDevice));
  }
  std::vector<Worker*> workers;
  for (int t = 0; t < s.threads; ++t) workers.push_back(new Worker(s.width));
  for (int t = 0; t < s.threads; ++t) workers[t]->run(s, ws, t, 10);  // warm-up: kernels, heuristics
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < s.threads; ++t) ts.emplace_back([&, t] { workers[t]->run(s, ws, t, s.evals); });
  for (auto& t : ts) t.join();
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("multistream, CUDA and cuBLAS directly: %d threads, %d x %d fp16 layers%s\n", s.threads, s.layers,
              s.width, s.epilogue ? ", relu as a GEMM epilogue" : "");
  std::printf("  %9.0f eval/s\n", s.threads * s.evals / sec);
  return 0;
}
