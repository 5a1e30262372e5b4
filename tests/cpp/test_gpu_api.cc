// The spec's C++ GPU layer (pyflame/backend/rocm/*.h): memory manager, BLAS,
// DNN wrapper, executor, kernel launchers and check macros, on device memory
// the test owns, against host loops and the CPU backend on fresh random
// inputs. Skipped when no GPU is present (scripts/gpu_check.sh runs them).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "pyflame/backend/rocm/api.h"

using namespace pyflame;
namespace rocm = pyflame::backend::rocm;
using ir::OpType;

namespace {

class GpuApi : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!rocm::is_available()) GTEST_SKIP() << "no GPU";
    rocm::set_device(0);
    rng.seed(::testing::UnitTest::GetInstance()->random_seed() + counter++);
    HIP_CHECK(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking));
  }
  void TearDown() override {
    if (stream) HIP_CHECK(hipStreamDestroy(stream));
    for (void* p : owned) rocm::get_memory_manager().deallocate(p);
  }
  std::vector<float> randv(size_t n, float lo = -2, float hi = 2) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
  }
  template <typename T>
  T* upload(const std::vector<T>& v) {
    auto& mm = rocm::get_memory_manager();
    auto* p = static_cast<T*>(mm.allocate(std::max<size_t>(1, v.size()) * sizeof(T)));
    owned.push_back(p);
    mm.copy_host_to_device(p, v.data(), v.size() * sizeof(T));
    return p;
  }
  float* device_buffer(size_t n) {
    auto* p = static_cast<float*>(rocm::get_memory_manager().allocate(std::max<size_t>(1, n) * sizeof(float)));
    owned.push_back(p);
    return p;
  }
  // Waits on the test's stream, then copies back.
  std::vector<float> download(const float* p, size_t n) {
    HIP_CHECK(hipStreamSynchronize(stream));
    std::vector<float> v(n);
    rocm::get_memory_manager().copy_device_to_host(v.data(), p, n * sizeof(float));
    return v;
  }
  static std::vector<float> cpu(const Tensor& t) {
    Tensor f = astype(t, Dtype::Float32);
    std::vector<float> v(f.size());
    f.copy_to_host(v.data());
    return v;
  }
  static Tensor host_tensor(const std::vector<float>& v, Shape s) {
    return Tensor::from_host(v.data(), std::move(s), Dtype::Float32);
  }
  static void expect_near(const std::vector<float>& got, const std::vector<float>& want, double rtol, double atol) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], atol + rtol * std::abs(want[i])) << "index " << i << " of " << got.size();
    }
  }

  std::mt19937 rng;
  hipStream_t stream = nullptr;
  std::vector<void*> owned;
  static inline int counter = 0;
};

}  // namespace

TEST_F(GpuApi, MemoryManagerCopiesMemsetAndStats) {
  auto& mm = rocm::get_memory_manager();
  mm.reset_stats();
  const auto before = mm.get_stats();
  const size_t n = 4097;
  auto h = randv(n);
  float* a = static_cast<float*>(mm.allocate(n * sizeof(float)));
  float* b = static_cast<float*>(mm.allocate_async(n * sizeof(float), stream));
  mm.copy_host_to_device(a, h.data(), n * sizeof(float));
  mm.copy_device_to_device_async(b, a, n * sizeof(float), stream);
  std::vector<float> back(n);
  mm.copy_device_to_host_async(back.data(), b, n * sizeof(float), stream);
  HIP_CHECK(hipStreamSynchronize(stream));
  EXPECT_EQ(back, h);
  mm.memset(a, 0, n * sizeof(float));
  mm.copy_device_to_host(back.data(), a, n * sizeof(float));
  EXPECT_EQ(back, std::vector<float>(n, 0.0f));
  const auto during = mm.get_stats();
  EXPECT_EQ(during.total_allocations - before.total_allocations, 2u);
  EXPECT_GE(during.total_allocated, 2 * n * sizeof(float));
  mm.deallocate(a);
  mm.deallocate_async(b, stream);
  HIP_CHECK(hipStreamSynchronize(stream));
  EXPECT_EQ(mm.get_stats().total_deallocations - before.total_deallocations, 2u);
  size_t free_b = 0, total_b = 0;
  mm.get_memory_info(&free_b, &total_b);
  EXPECT_GT(total_b, 0u);
  EXPECT_LE(free_b, total_b);
  void* pinned = mm.allocate_pinned(1 << 20);
  ASSERT_NE(pinned, nullptr);
  mm.deallocate_pinned(pinned);
}

TEST_F(GpuApi, BlasGemmMatchesHostLoops) {
  const int M = 37, N = 29, K = 41;
  auto a = randv(M * K), b = randv(K * N), c0 = randv(M * N);
  float *da = upload(a), *db = upload(b), *dc = upload(c0);
  const float alpha = 1.5f, beta = -0.5f;
  rocm::ROCmBLAS blas;  // its own handle
  blas.set_stream(stream);
  // Column-major: C(M,N) = alpha * A(M,K) * B(K,N) + beta * C.
  blas.gemm(rocm::Trans::N, rocm::Trans::N, M, N, K, alpha, da, M, db, K, beta, dc, M);
  auto got = download(dc, M * N);
  std::vector<float> want(M * N);
  for (int j = 0; j < N; ++j) {
    for (int i = 0; i < M; ++i) {
      double acc = 0;
      for (int k = 0; k < K; ++k) acc += double(a[i + k * M]) * b[k + j * K];
      want[i + j * M] = float(alpha * acc + beta * c0[i + j * M]);
    }
  }
  expect_near(got, want, 1e-5, 1e-4);

  // Strided batched, A transposed: C_b = A_b^T * B_b.
  const int batch = 3;
  auto at = randv(batch * K * M), bb = randv(batch * K * N);
  float *dat = upload(at), *dbb = upload(bb), *dcc = device_buffer(batch * M * N);
  rocm::get_blas().gemm_strided_batched(rocm::Trans::T, rocm::Trans::N, M, N, K, 1.0f, dat, K, K * M, dbb, K,
                                        K * N, 0.0f, dcc, M, M * N, batch);
  rocm::synchronize();
  std::vector<float> got_b(batch * M * N);
  rocm::get_memory_manager().copy_device_to_host(got_b.data(), dcc, got_b.size() * sizeof(float));
  std::vector<float> want_b(batch * M * N);
  for (int q = 0; q < batch; ++q)
    for (int j = 0; j < N; ++j)
      for (int i = 0; i < M; ++i) {
        double acc = 0;
        for (int k = 0; k < K; ++k) acc += double(at[q * K * M + k + i * K]) * bb[q * K * N + k + j * K];
        want_b[q * M * N + i + j * M] = float(acc);
      }
  expect_near(got_b, want_b, 1e-5, 1e-4);

  // geam: C = alpha * A^T + beta * B.
  auto ga = randv(N * M), gb = randv(M * N);
  float *dga = upload(ga), *dgb = upload(gb), *dgc = device_buffer(M * N);
  blas.geam(rocm::Trans::T, rocm::Trans::N, M, N, 2.0f, dga, N, 3.0f, dgb, M, dgc, M);
  auto got_g = download(dgc, M * N);
  std::vector<float> want_g(M * N);
  for (int j = 0; j < N; ++j)
    for (int i = 0; i < M; ++i) want_g[i + j * M] = 2.0f * ga[j + i * N] + 3.0f * gb[i + j * M];
  expect_near(got_g, want_g, 1e-6, 1e-6);
}

TEST_F(GpuApi, KernelLaunchersMatchCpuOps) {
  const int64_t n = 3001;
  auto a = randv(n), b = randv(n, 0.5f, 2.0f);
  float *da = upload(a), *db = upload(b), *dy = device_buffer(n);
  Tensor ta = host_tensor(a, {n}), tb = host_tensor(b, {n});

  rocm::launch_gelu_forward(dy, da, n, stream);
  expect_near(download(dy, n), cpu(gelu(ta)), 1e-5, 1e-6);
  rocm::launch_silu_forward(dy, da, n, stream);
  expect_near(download(dy, n), cpu(silu(ta)), 1e-5, 1e-6);
  const std::pair<OpType, Tensor (*)(const Tensor&, const Tensor&)> binaries[] = {
      {OpType::Add, add}, {OpType::Sub, sub}, {OpType::Mul, mul}, {OpType::Div, div},
      {OpType::Maximum, maximum}, {OpType::Minimum, minimum}};
  for (auto [op, fn] : binaries) {
    rocm::launch_elementwise_binary(op, dy, da, db, n, stream);
    expect_near(download(dy, n), cpu(fn(ta, tb)), 1e-6, 1e-6);
  }
  const std::pair<OpType, Tensor (*)(const Tensor&)> unaries[] = {
      {OpType::Exp, exp}, {OpType::Tanh, tanh}, {OpType::Relu, relu}, {OpType::Sigmoid, sigmoid},
      {OpType::Abs, abs}, {OpType::Erf, erf}};
  for (auto [op, fn] : unaries) {
    rocm::launch_elementwise_unary(op, dy, da, n, stream);
    expect_near(download(dy, n), cpu(fn(ta)), 2e-6, 1e-6);
  }
  const std::pair<OpType, Tensor (*)(const Tensor&, const Tensor&)> comparisons[] = {
      {OpType::Eq, eq}, {OpType::Ne, ne}, {OpType::Lt, lt}, {OpType::Le, le}, {OpType::Gt, gt}, {OpType::Ge, ge}};
  for (auto [op, fn] : comparisons) {
    rocm::launch_comparison(op, dy, da, db, n, stream);
    expect_near(download(dy, n), cpu(fn(ta, tb)), 0, 0);
  }
  rocm::launch_where(dy, da, da, db, n, stream);  // a != 0 ? a : b
  expect_near(download(dy, n), cpu(where(ne(ta, zeros({n})), ta, tb)), 0, 0);
  rocm::launch_clamp(dy, da, -0.5f, 0.75f, n, stream);
  expect_near(download(dy, n), cpu(clamp(ta, -0.5, 0.75)), 0, 0);
  EXPECT_THROW(rocm::launch_elementwise_unary(OpType::Add, dy, da, n, stream), ValueError);
  EXPECT_THROW(rocm::launch_elementwise_binary(OpType::Add, dy, da, db, -1, stream), ValueError);
}

TEST_F(GpuApi, LossLaunchersMatchCpuOps) {
  const int64_t n = 1000, rows = 64, classes = 10;
  auto p = randv(n, 0.01f, 0.99f), t = randv(n, 0.0f, 1.0f), logits = randv(rows * classes);
  std::vector<int32_t> target(rows);
  std::uniform_int_distribution<int32_t> cls(0, classes - 1);
  for (auto& v : target) v = cls(rng);
  float *dp = upload(p), *dt = upload(t), *dl = upload(logits), *dy = device_buffer(1);
  int32_t* dtarget = upload(target);
  Tensor tp = host_tensor(p, {n}), tt = host_tensor(t, {n});
  rocm::launch_mse_loss(dy, dp, dt, n, stream);
  expect_near(download(dy, 1), cpu(mse_loss(tp, tt)), 1e-5, 1e-6);
  rocm::launch_bce_loss(dy, dp, dt, n, stream);
  expect_near(download(dy, 1), cpu(bce_loss(tp, tt)), 1e-5, 1e-6);
  rocm::launch_cross_entropy_loss(dy, dl, dtarget, rows, classes, stream);
  Tensor ttarget = Tensor::from_host(target.data(), {rows}, Dtype::Int32);
  expect_near(download(dy, 1), cpu(cross_entropy(host_tensor(logits, {rows, classes}), ttarget)), 1e-5, 1e-6);
}

TEST_F(GpuApi, DnnMatchesCpuOps) {
  EXPECT_EQ(&rocm::get_dnn(), &rocm::get_dnn());
  rocm::ROCmDNN dnn;
  dnn.set_stream(stream);
  const int64_t N = 2, C = 4, H = 9, W = 11, K = 6;
  auto x = randv(N * C * H * W), w = randv(K * C * 3 * 3);
  float *dx = upload(x), *dw = upload(w);
  Tensor tx = host_tensor(x, {N, C, H, W}), tw = host_tensor(w, {K, C, 3, 3});

  // Convolution, stride 2 and padding 1: (9 + 2 - 3) / 2 + 1 = 5, (11 + 2 - 3) / 2 + 1 = 6.
  float* dy = device_buffer(N * K * 5 * 6);
  dnn.conv2d_forward(Dtype::Float32, {N, C, H, W}, dx, {K, C, 3, 3}, dw, {N, K, 5, 6}, dy,
                     rocm::ConvParams::Conv2D(1, 1, 2, 2));
  expect_near(download(dy, N * K * 5 * 6), cpu(conv2d(tx, tw, std::nullopt, {2, 2}, {1, 1})), 1e-4, 1e-4);
  EXPECT_THROW(dnn.conv2d_forward(Dtype::Float32, {N, C, H, W}, dx, {K, C, 3, 3}, dw, {N, K, 5, 5}, dy,
                                  rocm::ConvParams::Conv2D(1, 1, 2, 2)),
               ValueError);

  // Pooling 2x2 stride 2: 4 x 5.
  float* dp = device_buffer(N * C * 4 * 5);
  dnn.pooling2d_forward(OpType::MaxPool, Dtype::Float32, {N, C, H, W}, dx, {N, C, 4, 5}, dp,
                        rocm::PoolParams::Pool2D(2, 2, 0, 0, 2, 2));
  expect_near(download(dp, N * C * 4 * 5), cpu(max_pool2d(tx, {2, 2}, {2, 2})), 0, 0);
  dnn.pooling2d_forward(OpType::AvgPool, Dtype::Float32, {N, C, H, W}, dx, {N, C, 4, 5}, dp,
                        rocm::PoolParams::Pool2D(2, 2, 0, 0, 2, 2));
  expect_near(download(dp, N * C * 4 * 5), cpu(avg_pool2d(tx, {2, 2}, {2, 2})), 1e-6, 1e-6);

  // Batch-norm inference.
  auto scale = randv(C), bias = randv(C), mean = randv(C), var = randv(C, 0.5f, 2.0f);
  float* dn = device_buffer(x.size());
  dnn.batchnorm_forward_inference(Dtype::Float32, {N, C, H, W}, dx, dn, upload(scale), upload(bias), upload(mean),
                                  upload(var), {1e-5, 0.1, false});
  auto got = download(dn, x.size());
  std::vector<float> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t c = (i / (H * W)) % C;
    want[i] = float((x[i] - mean[c]) / std::sqrt(double(var[c]) + 1e-5) * scale[c] + bias[c]);
  }
  expect_near(got, want, 1e-5, 1e-5);

  // Activation, softmax and reductions.
  float* da = device_buffer(x.size());
  dnn.activation_forward(OpType::Relu, Dtype::Float32, {N, C, H, W}, dx, da);
  expect_near(download(da, x.size()), cpu(relu(tx)), 0, 0);
  dnn.softmax_forward(Dtype::Float32, {N, C, H, W}, dx, da, 1, true);
  expect_near(download(da, x.size()), cpu(log_softmax(tx, 1)), 1e-5, 1e-6);
  float* dr = device_buffer(N * W);
  dnn.reduce(OpType::Sum, Dtype::Float32, {N, C, H, W}, dx, {N, W}, dr, {1, 2});
  expect_near(download(dr, N * W), cpu(sum(tx, {1, 2})), 1e-5, 1e-4);
  dnn.reduce(OpType::Max, Dtype::Float32, {N, C, H, W}, dx, {N, 1, 1, W}, dr, {1, 2});
  expect_near(download(dr, N * W), cpu(max(tx, {1, 2}, true)), 0, 0);
  EXPECT_NE(dnn.handle(), nullptr);
}

TEST_F(GpuApi, ExecutorEvaluatesOnItsDevice) {
  rocm::ROCmExecutor ex({0, true, true, 16});
  auto a = randv(64 * 32), b = randv(32 * 16);
  Tensor ga = to_device(host_tensor(a, {64, 32}), Device::rocm(0));
  Tensor gb = to_device(host_tensor(b, {32, 16}), Device::rocm(0));
  Tensor y = relu(matmul(ga, gb));
  const auto r = ex.execute({y});
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_TRUE(y.is_evaluated());
  EXPECT_EQ(r.num_outputs, 1u);
  EXPECT_GE(r.elapsed_ms, 0.0);
  expect_near(cpu(y), cpu(relu(matmul(host_tensor(a, {64, 32}), host_tensor(b, {32, 16})))), 1e-5, 1e-5);
  EXPECT_THROW(ex.execute({zeros({3}, Dtype::Float32, Device::cpu())}), ValueError);  // a CPU tensor
  EXPECT_EQ(ex.get_device_info().device_id, 0);
  EXPECT_GT(ex.get_memory_stats().total_allocations, 0u);
  EXPECT_THROW(rocm::ROCmExecutor({rocm::get_device_count(), false, false, 0}), RuntimeError);
}

TEST_F(GpuApi, CheckMacrosThrowWithTheCall) {
  void* p = nullptr;
  try {
    HIP_CHECK(hipMalloc(&p, size_t(1) << 62));  // far beyond any device
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("[hipMalloc(&p, size_t(1) << 62)] failed"), std::string::npos)
        << e.what();
  }
  HIP_CHECK(hipGetLastError());  // the failure did not linger
  EXPECT_THROW(ROCBLAS_CHECK(::pyflame::gpu::blas_status_t(1)), std::runtime_error);
  EXPECT_THROW(MIOPEN_CHECK(::pyflame::gpu::dnn_status_t(1)), std::runtime_error);
}
