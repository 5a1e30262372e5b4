// GPU backend against the CPU backend on fresh random inputs. Skipped when no
// GPU is present; the device machine runs them (scripts/gpu_check.sh).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>

#include "backend/rocm/memory.h"
#include "pyflame/backend/rocm.h"
#include "pyflame/errors.h"
#include "pyflame/ops.h"
#include "pyflame/ops_index.h"

using namespace pyflame;

namespace {

class Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!backend::rocm::is_available()) GTEST_SKIP() << "no GPU";
    gpu = Device::rocm(0);
    manual_seed(::testing::UnitTest::GetInstance()->random_seed() + seed_counter++);
  }
  Device gpu;
  static inline int seed_counter = 0;
};

std::vector<double> host(const Tensor& t) {
  Tensor f = astype(t, t.dtype() == Dtype::Int64 ? Dtype::Int64 : Dtype::Float32);
  std::vector<double> v(t.size());
  if (f.dtype() == Dtype::Int64) {
    std::vector<int64_t> h(t.size());
    f.copy_to_host(h.data());
    for (size_t i = 0; i < h.size(); ++i) v[i] = double(h[i]);
  } else {
    std::vector<float> h(t.size());
    f.copy_to_host(h.data());
    for (size_t i = 0; i < h.size(); ++i) v[i] = h[i];
  }
  return v;
}

// Evaluates the same graph-building function on both devices from the same
// inputs (made on the CPU, uploaded) and compares.
template <typename F>
void expect_same(F build, const std::vector<Tensor>& cpu_inputs, double rtol = 1e-5, double atol = 1e-6) {
  std::vector<Tensor> gpu_inputs;
  for (auto& t : cpu_inputs) gpu_inputs.push_back(to_device(t, Device::rocm(0)));
  Tensor c = build(cpu_inputs), g = build(gpu_inputs);
  ASSERT_EQ(g.device(), Device::rocm(0));
  ASSERT_EQ(c.shape(), g.shape());
  ASSERT_EQ(c.dtype(), g.dtype());
  auto hc = host(c), hg = host(g);
  for (size_t i = 0; i < hc.size(); ++i) {
    if (std::isnan(hc[i])) {
      ASSERT_TRUE(std::isnan(hg[i])) << "index " << i;
      continue;
    }
    ASSERT_NEAR(hg[i], hc[i], atol + rtol * std::abs(hc[i])) << "index " << i << " of " << hc.size();
  }
}

Tensor rnd(Shape s, Dtype t = Dtype::Float32) { return astype(randn(s, Dtype::Float32, Device::cpu()), t); }

}  // namespace

TEST_F(Gpu, CreationMatchesCpu) {
  auto both = [](auto make) {
    Tensor c = make(Device::cpu()), g = make(Device::rocm(0));
    auto hc = host(c), hg = host(g);
    ASSERT_EQ(hc.size(), hg.size());
    for (size_t i = 0; i < hc.size(); ++i) ASSERT_NEAR(hg[i], hc[i], 1e-5 * (1 + std::abs(hc[i])));
  };
  both([](Device d) { return full({3, 5}, 2.5, Dtype::BFloat16, d); });
  both([](Device d) { return eye(4, 6, 1, Dtype::Float32, d); });
  both([](Device d) { return arange(0, 100, 3, Dtype::Int64, d); });
  both([](Device d) { return arange(-3, 7, 0.25, Dtype::Float32, d); });
  // Counter-based random numbers are the same on both devices.
  both([](Device d) { manual_seed(7); return randn({1000}, Dtype::Float32, d); });
  both([](Device d) { manual_seed(8); return rand({999}, Dtype::Float16, d); });
  both([](Device d) { manual_seed(9); return randint(-5, 17, {777}, Dtype::Int32, d); });
}

TEST_F(Gpu, UnaryMatchesCpu) {
  for (auto op : {neg, abs, exp, sin, cos, tanh, relu, sigmoid, silu}) {
    expect_same([op](auto& v) { return op(v[0]); }, {rnd({33, 65})}, 2e-5, 1e-5);
  }
  expect_same([](auto& v) { return sqrt(abs(v[0])); }, {rnd({1000})});
  expect_same([](auto& v) { return log(abs(v[0])); }, {rnd({1000})}, 1e-5, 1e-5);
  expect_same([](auto& v) { return gelu(v[0], false); }, {rnd({1000})}, 1e-5, 1e-6);
  expect_same([](auto& v) { return gelu(v[0], true); }, {rnd({1000})}, 1e-5, 1e-6);
  expect_same([](auto& v) { return exp(v[0]); }, {rnd({4099}, Dtype::Float16)}, 1e-3, 1e-3);
  expect_same([](auto& v) { return tanh(v[0]); }, {rnd({4099}, Dtype::BFloat16)}, 1e-2, 1e-2);
  expect_same([](auto& v) { return neg(v[0]); }, {astype(randint(-9, 9, {100}, Dtype::Int32, Device::cpu()), Dtype::Int32)});
}

TEST_F(Gpu, BinaryBroadcastStridedMatchesCpu) {
  for (auto op : {add, sub, mul, div, maximum, minimum, eq, lt, ge}) {
    expect_same([op](auto& v) { return op(v[0], v[1]); }, {rnd({7, 1, 5}), rnd({4, 1})});
    expect_same([op](auto& v) { return op(transpose(v[0], {}), v[1]); }, {rnd({9, 6}), rnd({6, 9})});
    expect_same([op](auto& v) { return op(v[0], scalar(0.5, Dtype::Float32, v[0].device())); }, {rnd({1031})});
  }
  expect_same([](auto& v) { return pow(abs(v[0]), v[1]); }, {rnd({100}), rnd({100})}, 1e-5, 1e-5);
  expect_same([](auto& v) {
    return add(slice(v[0], {0, 5}, {10, 0}, {3, -2}), v[1]);
  }, {rnd({10, 8}), rnd({4, 3})});
  expect_same([](auto& v) { return mul(v[0], v[1]); }, {rnd({4096}, Dtype::Float16), rnd({4096}, Dtype::Float16)}, 1e-3, 1e-3);
  auto ia = randint(-100, 100, {50}, Dtype::Int64, Device::cpu());
  auto ib = randint(1, 100, {50}, Dtype::Int64, Device::cpu());
  expect_same([](auto& v) { return add(v[0], v[1]); }, {ia, ib});
  expect_same([](auto& v) { return div(v[0], v[1]); }, {ia, ib});
}

TEST_F(Gpu, WhereClampAstypeMatchCpu) {
  expect_same([](auto& v) { return where(gt(v[0], v[1]), v[0], v[1]); }, {rnd({5, 1, 3}), rnd({4, 3})});
  expect_same([](auto& v) { return clamp(v[0], -0.5, 0.7); }, {rnd({1000})});
  Dtype all[] = {Dtype::Float32, Dtype::Float16, Dtype::BFloat16, Dtype::Int32, Dtype::Int64, Dtype::Bool,
                 Dtype::Float64, Dtype::Int8, Dtype::Int16, Dtype::UInt8};
  for (Dtype from : all) {
    for (Dtype to : all) {
      Tensor x = astype(mul(rnd({200}), scalar(10, Dtype::Float32, Device::cpu())), from);
      expect_same([to](auto& v) { return astype(v[0], to); }, {x}, 1e-2, 1e-2);
    }
  }
}

TEST_F(Gpu, ReductionsMatchCpu) {
  Tensor x = rnd({6, 50, 70});
  for (auto op : {sum, mean, max, min}) {
    for (Axes axes : {Axes{}, Axes{0}, Axes{1}, Axes{2}, Axes{0, 2}, Axes{-1, -2}}) {
      expect_same([&](auto& v) { return op(v[0], axes, false); }, {x}, 1e-4, 1e-4);
    }
    expect_same([&](auto& v) { return op(transpose(v[0], {2, 0, 1}), Axes{1}, true); }, {x}, 1e-4, 1e-4);
  }
  expect_same([](auto& v) { return prod(v[0], {1}, false); }, {add(rand({8, 20}, Dtype::Float32, Device::cpu()), scalar(0.5, Dtype::Float32, Device::cpu()))}, 1e-4, 1e-6);
  expect_same([](auto& v) { return sum(v[0]); }, {rnd({3000017})}, 1e-4, 1e-2);  // many blocks + second pass
  expect_same([](auto& v) { return sum(v[0], {1}); }, {randint(-50, 50, {40, 999}, Dtype::Int32, Device::cpu())});
  expect_same([](auto& v) { return mean(v[0], {0}); }, {rnd({1000, 3}, Dtype::BFloat16)}, 1e-2, 1e-2);
}

TEST_F(Gpu, SoftmaxMatchesCpu) {
  for (int axis : {0, 1, -1}) {
    expect_same([axis](auto& v) { return softmax(v[0], axis); }, {rnd({37, 3000})}, 1e-5, 1e-7);
    expect_same([axis](auto& v) { return log_softmax(v[0], axis); }, {rnd({37, 300})}, 1e-5, 1e-5);
  }
  expect_same([](auto& v) { return softmax(v[0], -1); }, {rnd({64, 128}, Dtype::Float16)}, 1e-2, 1e-3);
}

TEST_F(Gpu, MatmulMatchesCpu) {
  expect_same([](auto& v) { return matmul(v[0], v[1]); }, {rnd({65, 129}), rnd({129, 33})}, 1e-4, 1e-4);
  expect_same([](auto& v) { return matmul(v[0], v[1]); }, {rnd({3, 1, 20, 30}), rnd({4, 30, 10})}, 1e-4, 1e-4);
  expect_same([](auto& v) { return matmul(transpose(v[0], {}), transpose(v[1], {})); }, {rnd({30, 20}), rnd({10, 30})}, 1e-4, 1e-4);
  expect_same([](auto& v) { return matmul(slice(v[0], {0, 0}, {20, 30}, {1, 2}), v[1]); }, {rnd({20, 30}), rnd({15, 7})}, 1e-4, 1e-4);
  expect_same([](auto& v) { return matmul(v[0], v[1]); }, {rnd({64, 64}, Dtype::Float16), rnd({64, 64}, Dtype::Float16)}, 1e-2, 1e-2);
  expect_same([](auto& v) { return matmul(v[0], v[1]); }, {rnd({64, 48}, Dtype::BFloat16), rnd({48, 16}, Dtype::BFloat16)}, 2e-2, 2e-2);
  expect_same([](auto& v) { return matmul(v[0], v[1]); }, {rnd({50}), rnd({50})}, 1e-4, 1e-4);
  expect_same([](auto& v) { return matmul(v[0], v[1]); },
              {randint(-9, 9, {2, 7, 5}, Dtype::Int32, Device::cpu()), randint(-9, 9, {5, 3}, Dtype::Int32, Device::cpu())});
}

TEST_F(Gpu, MultiStreamThreadsMatchCpu) {
  backend::rocm::set_multi_stream(true);
  // Scaled so activations stay O(1) through the layers and the tolerance
  // measures the GPU path, not float32 rounding of large intermediates.
  Tensor w = mul(rnd({96, 96}), scalar(1.0 / std::sqrt(96.0), Dtype::Float32));
  Tensor wg = to_device(w, gpu);
  wg.eval();
  std::vector<std::vector<double>> got(6), want(6);
  std::vector<Tensor> xs;
  for (int i = 0; i < 6; ++i) {
    xs.push_back(rnd({8 + 4 * i, 96}));
    Tensor yc = xs.back();
    for (int k = 0; k < 5; ++k) yc = relu(matmul(yc, w));
    want[i] = host(yc);  // the reference, computed before the threads start
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      Tensor yg = to_device(xs[i], Device::rocm(0));
      for (int k = 0; k < 5; ++k) yg = relu(matmul(yg, wg));
      got[i] = host(yg);
    });
  }
  for (auto& t : threads) t.join();
  backend::rocm::set_multi_stream(false);
  for (int i = 0; i < 6; ++i) {
    ASSERT_EQ(got[i].size(), want[i].size());
    for (size_t j = 0; j < got[i].size(); ++j) {
      ASSERT_NEAR(got[i][j], want[i][j], 1e-3 + 1e-3 * std::abs(want[i][j])) << "thread " << i;
    }
  }
}

namespace {

Tensor scaled_eye(int64_t n, double v) {
  return mul(eye(n, n, 0, Dtype::Float32, Device::cpu()), scalar(v, Dtype::Float32));
}

// Well conditioned (a dominant diagonal) and symmetric positive definite
// stacks of n x n matrices, made on the CPU.
Tensor well_conditioned(Shape s) { return add(rnd(s), scaled_eye(s.back(), 3.0 * s.back())); }

Tensor positive_definite(Shape s) {
  Tensor x = rnd(s);
  return add(matmul(x, swapaxes(x, -1, -2)), scaled_eye(s.back(), double(s.back())));
}

}  // namespace

// hipSOLVER / cuSOLVER against LAPACK: results unique up to rounding (Q R and
// U S Vh products, not the factors, whose signs may differ).
TEST_F(Gpu, LinalgMatchesCpu) {
  const double r = 1e-3, a = 1e-3;
  expect_same([](auto& v) { return linalg::inv(v[0]); }, {well_conditioned({3, 5, 5})}, r, a);
  expect_same([](auto& v) { return linalg::solve(v[0], v[1]); }, {well_conditioned({3, 5, 5}), rnd({3, 5, 2})}, r, a);
  expect_same([](auto& v) { return linalg::det(v[0]); }, {well_conditioned({2, 4, 4})}, r, a);
  expect_same([](auto& v) { return linalg::slogdet(v[0]).second; }, {well_conditioned({2, 4, 4})}, r, a);
  for (bool upper : {false, true}) {
    expect_same([upper](auto& v) { return linalg::cholesky(v[0], upper); }, {positive_definite({3, 6, 6})}, r, a);
  }
  // Batched (Jacobi) for stacks of small matrices, one call per matrix otherwise.
  expect_same([](auto& v) { return linalg::eigvalsh(v[0]); }, {positive_definite({3, 6, 6})}, r, a);
  expect_same([](auto& v) { return linalg::eigvalsh(v[0]); }, {positive_definite({40, 40})}, r, 1e-2);
  expect_same([](auto& v) { return linalg::svdvals(v[0]); }, {rnd({3, 6, 4})}, r, a);
  expect_same([](auto& v) { return linalg::svdvals(v[0]); }, {rnd({50, 7})}, r, a);
  expect_same([](auto& v) {
    auto [u, s, vh] = linalg::svd(v[0], false);
    return matmul(mul(u, unsqueeze(s, s.ndim() - 1)), vh);
  }, {rnd({2, 7, 3})}, r, a);
  expect_same([](auto& v) {
    auto [q, rr] = linalg::qr(v[0], true);
    return matmul(q, rr);
  }, {rnd({2, 3, 5})}, r, a);
}

TEST_F(Gpu, LinalgFailuresRaiseAtTheEndOfTheEvaluation) {
  Tensor singular = to_device(zeros({2, 3, 3}), gpu);
  EXPECT_THROW(host(linalg::inv(singular)), ValueError);
  EXPECT_THROW(host(linalg::cholesky(to_device(scaled_eye(3, -1.0), gpu))), ValueError);
  EXPECT_EQ(host(linalg::det(singular)), std::vector<double>({0.0, 0.0}));  // not an error
  EXPECT_EQ(host(linalg::inv(to_device(eye(2), gpu))), std::vector<double>({1, 0, 0, 1}));  // still usable
}

TEST_F(Gpu, LinalgMultiStreamThreadsMatchCpu) {
  backend::rocm::set_multi_stream(true);  // a solver handle per bundle
  std::vector<Tensor> xs;
  std::vector<std::vector<double>> got(4), want(4);
  for (int i = 0; i < 4; ++i) {
    xs.push_back(well_conditioned({2 + i, 8, 8}));
    want[i] = host(linalg::inv(xs.back()));
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] { got[i] = host(linalg::inv(to_device(xs[i], Device::rocm(0)))); });
  }
  for (auto& t : threads) t.join();
  backend::rocm::set_multi_stream(false);
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(got[i].size(), want[i].size());
    for (size_t j = 0; j < got[i].size(); ++j) ASSERT_NEAR(got[i][j], want[i][j], 1e-4) << "thread " << i;
  }
}

TEST_F(Gpu, TransposeMaterializesThroughGeamAndCopyKernels) {
  expect_same([](auto& v) { return contiguous(transpose(v[0], {})); }, {rnd({37, 129})});  // BLAS geam
  expect_same([](auto& v) { return reshape(transpose(v[0], {}), {-1}); }, {rnd({64, 3})});
  expect_same([](auto& v) { return contiguous(transpose(v[0], {})); }, {rnd({5, 7}, Dtype::Float16)});
  expect_same([](auto& v) { return contiguous(transpose(v[0], {2, 0, 1})); }, {rnd({4, 5, 6})});
}

TEST_F(Gpu, DataStaysOnDeviceAndRoundTrips) {
  Tensor x = rnd({123, 45});
  Tensor g = to_device(x, gpu);
  Tensor y = add(mul(g, g), g);
  y.eval();
  EXPECT_EQ(y.device(), gpu);
  EXPECT_TRUE(y.buffer()->device.is_gpu());
  auto hx = host(x), hy = host(y);
  for (size_t i = 0; i < hx.size(); ++i) EXPECT_NEAR(hy[i], hx[i] * hx[i] + hx[i], 1e-5);
}

TEST_F(Gpu, OpsRejectMixedDevices) {
  EXPECT_THROW(add(ones({2}), ones({2}, Dtype::Float32, gpu)), ValueError);
}

TEST_F(Gpu, OutOfMemoryRaisesAndProcessStaysUsable) {
  size_t huge = size_t(1) << 50;
  EXPECT_THROW(zeros({int64_t(huge / 4)}, Dtype::Float32, gpu).eval(), OutOfMemoryError);
  auto v = host(add(ones({4}, Dtype::Float32, gpu), ones({4}, Dtype::Float32, gpu)));
  EXPECT_EQ(v, (std::vector<double>{2, 2, 2, 2}));
}

TEST_F(Gpu, DeviceInfo) {
  auto info = backend::rocm::get_device_info(0);
  EXPECT_FALSE(info.name.empty());
  EXPECT_GT(info.total_memory, info.free_memory / 2);
  EXPECT_GT(info.compute_units, 0);
  EXPECT_TRUE(info.wave_size == 32 || info.wave_size == 64);
  EXPECT_THROW(backend::rocm::get_device_info(99), RuntimeError);
  EXPECT_THROW(backend::rocm::set_device(-1), RuntimeError);
}

// Per-stream pools and the evaluation context under load: threads with their
// own bundles allocate, free (the main thread frees their last results, off
// their streams) and meet range errors read at the end of their evaluations;
// every result is right, every error is the CPU's, and the counts balance.
TEST_F(Gpu, MultiStreamPoolsChecksAndCounts) {
  auto& mm = backend::rocm::get_memory_manager(0);
  backend::rocm::synchronize();
  const auto before = mm.get_stats();
  backend::rocm::set_multi_stream(true);
  std::vector<float> wv(10);
  for (int i = 0; i < 10; ++i) wv[i] = float(i);
  Tensor w = to_device(Tensor::from_host(wv.data(), {5, 2}, Dtype::Float32), gpu);
  w.eval();
  std::vector<int64_t> good{4, 0}, bad{1, 7};
  Tensor ig = to_device(Tensor::from_host(good.data(), {2}, Dtype::Int64), gpu);
  Tensor ib = to_device(Tensor::from_host(bad.data(), {2}, Dtype::Int64), gpu);
  eval({ig, ib});
  std::vector<Tensor> shared(8);
  std::vector<int> wrong(8, 0), raised(8, 0);
  std::vector<std::string> error(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int k = 0; k < 50; ++k) {
          Tensor y = add(mul(embedding(ig, w), scalar(2.0, Dtype::Float32, gpu)),
                         scalar(double(k), Dtype::Float32, gpu));
          std::vector<float> h(4);
          y.copy_to_host(h.data());
          wrong[t] += h != std::vector<float>{16.f + k, 18.f + k, 0.f + k, 2.f + k};
          if (k % 10 == 0) {
            try {
              add(embedding(ib, w), sum(w)).eval();
            } catch (const IndexError& e) {
              raised[t] += std::string(e.what()).rfind("[embedding] index 7 is out of range", 0) == 0;
            }
          }
          shared[t] = y;  // the last one is freed by the main thread, off its stream
        }
      } catch (const std::exception& e) {
        error[t] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  backend::rocm::set_multi_stream(false);
  for (int t = 0; t < 8; ++t) {
    EXPECT_EQ(error[t], "") << "thread " << t;
    EXPECT_EQ(wrong[t], 0) << "thread " << t;
    EXPECT_EQ(raised[t], 5) << "thread " << t;
  }
  shared.clear();
  w = ig = ib = Tensor();
  backend::rocm::synchronize();
  const auto after = mm.get_stats();
  EXPECT_EQ(after.total_allocated, before.total_allocated);
  EXPECT_EQ(after.total_allocations - before.total_allocations,
            after.total_deallocations - before.total_deallocations);
}

TEST_F(Gpu, MemoryManagerCachesAndCounts) {
  auto& mm = backend::rocm::get_memory_manager(0);
  mm.reset_stats();
  void* a = mm.allocate(1 << 20);
  mm.deallocate(a);
  void* b = mm.allocate(1 << 20);  // same size, same stream: from the cache
  auto s = mm.get_stats();
  EXPECT_EQ(b, a);
  EXPECT_GE(s.cache_hits, 1u);
  EXPECT_EQ(s.total_allocations, 2u);
  EXPECT_EQ(s.total_deallocations, 1u);
  EXPECT_GE(s.peak_allocated, size_t(1) << 20);
  std::vector<float> h(1 << 18, 3.0f), back(1 << 18);
  mm.copy_host_to_device(b, h.data(), h.size() * 4);
  mm.copy_device_to_host(back.data(), b, h.size() * 4);
  EXPECT_EQ(back, h);
  mm.deallocate(b);
  mm.clear_pool();
  EXPECT_EQ(mm.get_stats().cached_bytes, 0u);
  size_t free_b = 0, total_b = 0;
  mm.get_memory_info(&free_b, &total_b);
  EXPECT_GT(total_b, free_b);
  auto& pool = backend::rocm::get_pinned_pool();
  pool.warmup({4096, 1 << 20});
  EXPECT_GE(pool.cached_bytes(), size_t(1) << 20);
}

// The pinned pool's per-thread caches: a thread reuses its own blocks
// (released at once or after a stream), a block acquired by one thread and
// released by another is taken back, a thread's blocks return to the pool
// when it ends, clear() reaches every cache, and transfers through it stay
// right with many threads uploading and downloading at once.
TEST_F(Gpu, PinnedPoolThreadCaches) {
  auto& pool = backend::rocm::get_pinned_pool();
  pool.clear();
  EXPECT_EQ(pool.cached_bytes(), 0u);
  void* a = pool.acquire(10000);
  pool.release(a);
  EXPECT_EQ(pool.acquire(9000), a);  // the same thread's block, reused
  const auto stream = reinterpret_cast<hipStream_t>(backend::rocm::stream_handle(0));
  pool.release_after(a, stream);
  backend::rocm::synchronize();
  EXPECT_EQ(pool.acquire(12000), a);  // reclaimed once the stream passed
  pool.release(a);
  EXPECT_THROW(pool.release(reinterpret_cast<void*>(0x1000)), ValueError);
  void* foreign = nullptr;
  std::thread([&] { foreign = pool.acquire(1 << 16); }).join();
  pool.release(foreign);  // acquired by a thread that has ended
  std::thread([&] {
    void* p = pool.acquire(1 << 20);
    std::memset(p, 1, 1 << 20);
    pool.release(p);
  }).join();
  EXPECT_GE(pool.cached_bytes(), (size_t(1) << 20) + (1 << 16) + 12288);
  backend::rocm::set_multi_stream(true);
  std::vector<int> wrong(8, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 40; ++k) {
        const int64_t n = 1000 + 7919 * ((t + k) % 5);
        std::vector<float> h(n), back(n);
        for (int64_t i = 0; i < n; ++i) h[i] = float(t * 100000 + k * 10 + i % 10);
        Tensor y = add(to_device(Tensor::from_host(h.data(), {n}, Dtype::Float32), gpu),
                       scalar(1.0, Dtype::Float32, gpu));
        y.copy_to_host(back.data());
        for (int64_t i = 0; i < n; ++i) wrong[t] += back[i] != h[i] + 1.0f;
      }
    });
  }
  for (auto& th : threads) th.join();
  backend::rocm::set_multi_stream(false);
  for (int t = 0; t < 8; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
  EXPECT_GT(pool.cached_bytes(), 0u);  // the ended threads' blocks
  pool.clear();
  EXPECT_EQ(pool.cached_bytes(), 0u);
}

// The DLPack seam: a foreign stream told to wait reads finished results, even
// when PyFlame's work is still queued.
TEST_F(Gpu, DlpackStreamSeamOrdersAForeignStream) {
  namespace r = backend::rocm;
  EXPECT_EQ(r::dlpack_device_type(), std::string(r::platform()) == "amd" ? 10 : 2);
  EXPECT_NE(r::stream_handle(0), 0u);
  Tensor a = to_device(rnd({1024, 1024}), gpu);
  Tensor x = a;
  for (int i = 0; i < 6; ++i) x = mul(tanh(matmul(x, a)), scalar(0.5, Dtype::Float32, gpu));
  x.eval();  // queued on PyFlame's stream, likely unfinished
  hipStream_t foreign;
  ASSERT_EQ(hipStreamCreateWithFlags(&foreign, hipStreamNonBlocking), hipSuccess);
  r::make_stream_wait(0, reinterpret_cast<uintptr_t>(foreign));
  std::vector<float> seen(x.size()), expected(x.size());
  ASSERT_EQ(hipMemcpyAsync(seen.data(), x.raw_data(), x.nbytes(), hipMemcpyDeviceToHost, foreign),
            hipSuccess);
  ASSERT_EQ(hipStreamSynchronize(foreign), hipSuccess);
  x.copy_to_host(expected.data());
  EXPECT_EQ(seen, expected);
  r::synchronize_streams(0);
  ASSERT_EQ(hipStreamDestroy(foreign), hipSuccess);
}
