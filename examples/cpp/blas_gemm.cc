// The BLAS wrapper (ROCmBLAS: rocBLAS on AMD, cuBLAS on NVIDIA) on device
// memory from the memory manager: C = alpha * A * B + beta * C in float32,
// column-major, checked against a host loop. Needs a GPU build; on a machine
// without a GPU it says so and exits 0.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "pyflame/backend/rocm/api.h"

namespace rocm = pyflame::backend::rocm;

int main() {
  if (!rocm::is_available()) {
    std::printf("no GPU: nothing to run\n");
    return 0;
  }
  rocm::set_device(0);
  const auto info = rocm::get_device_info(0);
  std::printf("device 0: %s (%s, %d compute units)\n", info.name.c_str(), info.architecture.c_str(),
              info.compute_units);

  const int M = 256, N = 128, K = 192;
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> a(M * K), b(K * N), c(M * N);
  for (auto& v : a) v = u(rng);
  for (auto& v : b) v = u(rng);
  for (auto& v : c) v = u(rng);

  auto& mm = rocm::get_memory_manager();
  float* da = static_cast<float*>(mm.allocate(a.size() * sizeof(float)));
  float* db = static_cast<float*>(mm.allocate(b.size() * sizeof(float)));
  float* dc = static_cast<float*>(mm.allocate(c.size() * sizeof(float)));
  mm.copy_host_to_device(da, a.data(), a.size() * sizeof(float));
  mm.copy_host_to_device(db, b.data(), b.size() * sizeof(float));
  mm.copy_host_to_device(dc, c.data(), c.size() * sizeof(float));

  hipStream_t stream;
  HIP_CHECK(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking));
  rocm::ROCmBLAS blas;  // a handle of its own
  blas.set_stream(stream);
  const float alpha = 0.5f, beta = 2.0f;
  blas.gemm(rocm::Trans::N, rocm::Trans::N, M, N, K, alpha, da, M, db, K, beta, dc, M);
  std::vector<float> out(M * N);
  mm.copy_device_to_host_async(out.data(), dc, out.size() * sizeof(float), stream);
  HIP_CHECK(hipStreamSynchronize(stream));

  double max_err = 0;
  for (int j = 0; j < N; ++j) {
    for (int i = 0; i < M; ++i) {
      double acc = 0;
      for (int k = 0; k < K; ++k) acc += double(a[i + k * M]) * b[k + j * K];
      max_err = std::fmax(max_err, std::fabs(alpha * acc + beta * c[i + j * M] - out[i + j * M]));
    }
  }
  mm.deallocate(da);
  mm.deallocate(db);
  mm.deallocate(dc);
  HIP_CHECK(hipStreamDestroy(stream));
  std::printf("gemm %dx%dx%d: max error %.2e against the host\n", M, N, K, max_err);
  const bool ok = max_err < 1e-3;
  std::printf("%s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
