// Core tests: dtypes, devices, graph evaluation and freeing, views, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "pyflame/autograd.h"
#include "pyflame/backend/rocm.h"
#include "pyflame/errors.h"
#include "pyflame/ops.h"

using namespace pyflame;

namespace {
std::vector<float> host(const Tensor& t) {
  Tensor f = astype(t, Dtype::Float32);
  std::vector<float> v(f.size());
  f.copy_to_host(v.data());
  return v;
}
Tensor from(std::vector<float> v, Shape s) { return Tensor::from_host(v.data(), s, Dtype::Float32); }
}  // namespace

TEST(Dtype, Promotion) {
  EXPECT_EQ(promote_types(Dtype::Int32, Dtype::Int64), Dtype::Int64);
  EXPECT_EQ(promote_types(Dtype::Bool, Dtype::Int32), Dtype::Int32);
  EXPECT_EQ(promote_types(Dtype::Int64, Dtype::Float16), Dtype::Float16);
  EXPECT_EQ(promote_types(Dtype::Float16, Dtype::BFloat16), Dtype::Float32);
  EXPECT_EQ(promote_types(Dtype::Float16, Dtype::Float32), Dtype::Float32);
  EXPECT_EQ(promote_with_scalar(Dtype::Int32, ScalarKind::Float), Dtype::Float32);
  EXPECT_EQ(promote_with_scalar(Dtype::Float16, ScalarKind::Float), Dtype::Float16);
  EXPECT_EQ(promote_with_scalar(Dtype::Int32, ScalarKind::Int), Dtype::Int32);
  EXPECT_THROW(dtype_from_string("float128"), ValueError);
  // The Array API table within a kind; uint8 with a signed integer.
  EXPECT_EQ(promote_types(Dtype::Int8, Dtype::Int16), Dtype::Int16);
  EXPECT_EQ(promote_types(Dtype::UInt8, Dtype::Int8), Dtype::Int16);
  EXPECT_EQ(promote_types(Dtype::UInt8, Dtype::Int16), Dtype::Int16);
  EXPECT_EQ(promote_types(Dtype::UInt8, Dtype::Int32), Dtype::Int32);
  EXPECT_EQ(promote_types(Dtype::Int64, Dtype::UInt8), Dtype::Int64);
  EXPECT_EQ(promote_types(Dtype::Bool, Dtype::UInt8), Dtype::UInt8);
  EXPECT_EQ(promote_types(Dtype::Float32, Dtype::Float64), Dtype::Float64);
  EXPECT_EQ(promote_types(Dtype::BFloat16, Dtype::Float64), Dtype::Float64);
  EXPECT_EQ(promote_types(Dtype::Int8, Dtype::Float16), Dtype::Float16);
  EXPECT_EQ(promote_with_scalar(Dtype::UInt8, ScalarKind::Int), Dtype::UInt8);
  EXPECT_EQ(promote_with_scalar(Dtype::Float64, ScalarKind::Float), Dtype::Float64);
  EXPECT_EQ(dtype_from_string("double"), Dtype::Float64);
  EXPECT_EQ(dtype_from_string("uint8"), Dtype::UInt8);
  for (int i = 0; i < kNumDtypes; ++i) {
    const Dtype t = static_cast<Dtype>(i);
    EXPECT_EQ(dtype_from_string(dtype_name(t)), t);
    EXPECT_GT(itemsize(t), 0u);
  }
  EXPECT_EQ(iinfo(Dtype::UInt8).max, 255);
  EXPECT_EQ(iinfo(Dtype::Int16).min, -32768);
  EXPECT_EQ(finfo(Dtype::Float64).eps, 0x1p-52);
  EXPECT_THROW(finfo(Dtype::Int8), ValueError);
  EXPECT_THROW(iinfo(Dtype::Float64), ValueError);
}

TEST(Device, Parse) {
  EXPECT_TRUE(Device::parse("cpu").is_cpu());
  EXPECT_THROW(Device::parse("tpu"), ValueError);
  EXPECT_THROW(Device::parse("rocm:x"), ValueError);
  EXPECT_THROW(Device::parse("cerebras"), RuntimeError);
  EXPECT_THROW(Device::parse("cerebras:simulator"), RuntimeError);
  if (!backend::rocm::is_available()) {
    EXPECT_THROW(Device::parse("rocm"), RuntimeError);
    EXPECT_TRUE(Device::parse("auto").is_cpu());
  }
}

TEST(Device, DlpackSeamWithoutGpuBackend) {
  if (backend::rocm::compiled()) GTEST_SKIP() << "GPU backend compiled (test_gpu.cc covers it)";
  EXPECT_EQ(backend::rocm::dlpack_device_type(), 0);
  EXPECT_THROW(backend::rocm::stream_handle(0), RuntimeError);
  EXPECT_THROW(backend::rocm::make_stream_wait(0, 1), RuntimeError);
  EXPECT_THROW(backend::rocm::synchronize_streams(0), RuntimeError);
}

TEST(Graph, LazyUntilEval) {
  Tensor a = ones({4}), b = full({4}, 2.0);
  Tensor c = add(a, b);
  EXPECT_FALSE(c.is_evaluated());
  EXPECT_EQ(host(c), (std::vector<float>{3, 3, 3, 3}));
  EXPECT_TRUE(c.is_evaluated());
  EXPECT_TRUE(c.inputs().empty());  // detached after evaluation
}

TEST(Graph, LongChainEvaluatesAndFreesWithoutRecursion) {
  Tensor x = zeros({8});
  for (int i = 0; i < 100000; ++i) x = add(x, scalar(1.0, Dtype::Float32));
  EXPECT_FLOAT_EQ(host(x)[7], 100000.0f);
  Tensor y = zeros({2});
  for (int i = 0; i < 100000; ++i) y = neg(y);
  y = Tensor();  // destroying an unevaluated 100,000-node chain
  SUCCEED();
}

TEST(Graph, IntermediatesFreed) {
  Tensor a = ones({1024});
  std::weak_ptr<Node> mid;
  Tensor out;
  {
    Tensor m = exp(a);
    mid = m.node_ptr();
    out = add(m, a);
  }
  EXPECT_FALSE(mid.expired());
  out.eval();
  EXPECT_TRUE(mid.expired());
}

TEST(Graph, ThreadsBuildAndEvaluateTheirOwnGraphs) {
  std::vector<std::thread> ts;
  std::vector<float> results(8);
  for (int t = 0; t < 8; ++t) {
    ts.emplace_back([t, &results] {
      Tensor x = full({256, 64}, t);
      for (int i = 0; i < 200; ++i) x = add(x, scalar(1.0, Dtype::Float32));
      results[t] = host(mean(x))[0];
    });
  }
  for (auto& th : ts) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_FLOAT_EQ(results[t], t + 200.0f);
}

TEST(Views, TransposeSliceBroadcastShareBuffers) {
  Tensor a = from({0, 1, 2, 3, 4, 5}, {2, 3});
  a.eval();
  Tensor t = transpose(a, {});
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_EQ(host(t), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(t.buffer(), a.buffer());
  Tensor s = slice(a, {0, 2}, {2, -4}, {1, -1});
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_EQ(host(s), (std::vector<float>{2, 1, 0, 5, 4, 3}));
  Tensor bc = broadcast_to(from({1, 2}, {2, 1}), {2, 3});
  EXPECT_EQ(host(bc), (std::vector<float>{1, 1, 1, 2, 2, 2}));
  EXPECT_EQ(host(reshape(t, {6})), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

// A channels-last tensor (the NCHW permutation of a row-major NHWC array)
// reaches the convolution as it is, with no row-major copy in between; any
// other layout is copied. Both give the row-major input's result.
TEST(Views, ConvReadsAChannelsLastInputAsItIs) {
  manual_seed(5);
  Tensor nhwc = randn({2, 5, 4, 8}), w = randn({6, 8, 3, 3});
  nhwc.eval();
  Tensor x = transpose(nhwc, {0, 3, 1, 2});
  Tensor y = conv2d(x, w, std::nullopt, {1}, {1});
  EXPECT_TRUE(y.inputs()[0].is_view_of(nhwc));
  const auto want = host(conv2d(contiguous(x), w, std::nullopt, {1}, {1}));
  const auto got = host(y);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4);
  Tensor odd = transpose(nhwc, {0, 3, 2, 1});  // (N, C, W, H): neither layout
  EXPECT_FALSE(conv2d(odd, w).inputs()[0].is_view_of(nhwc));
}

TEST(Ops, MatmulMatchesLoop) {
  manual_seed(3);
  Tensor a = randn({3, 5, 7}), b = randn({7, 4});
  auto ha = host(a), hb = host(b), hc = host(matmul(a, b));
  for (int bt = 0; bt < 3; ++bt)
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 4; ++j) {
        double acc = 0;
        for (int k = 0; k < 7; ++k) acc += ha[bt * 35 + i * 7 + k] * hb[k * 4 + j];
        EXPECT_NEAR(hc[bt * 20 + i * 4 + j], acc, 1e-4);
      }
}

TEST(Ops, ReductionsAndSoftmax) {
  Tensor a = from({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(host(sum(a, {1})), (std::vector<float>{6, 15}));
  EXPECT_EQ(host(max(a, {0})), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(host(prod(a)), (std::vector<float>{720}));
  auto sm = host(softmax(a, 0));
  EXPECT_NEAR(sm[0] + sm[3], 1.0f, 1e-6);
  EXPECT_NEAR(sm[0], 1.0 / (1.0 + std::exp(3.0)), 1e-6);
}

TEST(Ops, RandomIsSeeded) {
  manual_seed(42);
  auto x = host(randn({1000}));
  manual_seed(42);
  auto y = host(randn({1000}));
  EXPECT_EQ(x, y);
  double m = 0, v = 0;
  for (float f : x) m += f;
  m /= x.size();
  for (float f : x) v += (f - m) * (f - m);
  v /= x.size();
  EXPECT_NEAR(m, 0.0, 0.1);
  EXPECT_NEAR(v, 1.0, 0.15);
}

TEST(Errors, MessagesNameTheFunction) {
  try {
    matmul(zeros({2, 3}), zeros({4, 5}));
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(), "[matmul] shapes (2,3) and (4,5) do not align");
  }
  EXPECT_THROW(add(zeros({2, 3}), zeros({4})), ValueError);
  EXPECT_THROW(sum(zeros({2}), {3}), ValueError);
  EXPECT_THROW(max(zeros({0})), ValueError);
  EXPECT_THROW(select(zeros({3}), 0, 3), IndexError);
  EXPECT_THROW(reshape(zeros({6}), {4, -1}), ValueError);
}

TEST(Autograd, BackwardAccumulatesIntoLeaves) {
  Tensor x = from({1, 2, 3}, {3});
  Tensor w = from({0.5f, -1, 2}, {3});
  x.set_requires_grad(true);
  w.set_requires_grad(true);
  Tensor loss = sum(mul(mul(x, x), w));  // d/dx = 2 x w, d/dw = x^2
  backward(loss);
  EXPECT_EQ(host(x.grad()), (std::vector<float>{1, -4, 12}));
  EXPECT_EQ(host(w.grad()), (std::vector<float>{1, 4, 9}));
  EXPECT_THROW(backward(loss), RuntimeError);  // the graph was released
}

TEST(Autograd, NoGradAndDetachRecordNothing) {
  Tensor x = from({1, 2}, {2});
  x.set_requires_grad(true);
  {
    NoGradGuard g;
    EXPECT_FALSE(mul(x, x).requires_grad());
  }
  EXPECT_TRUE(mul(x, x).requires_grad());
  EXPECT_FALSE(detach(mul(x, x)).requires_grad());
  EXPECT_THROW(backward(sum(detach(x))), ValueError);
}

TEST(Autograd, FunctionalGradThroughViewsAndMatmul) {
  Tensor a = from({1, 2, 3, 4, 5, 6}, {2, 3});
  a.set_requires_grad(true);
  // f = sum(a @ a^T) = sum_k (sum_i a_ik)^2, df/da_ik = 2 * column sum k.
  Tensor f = sum(matmul(a, transpose(a, {})));
  std::vector<Tensor> g = grad({f}, {a});
  EXPECT_EQ(host(g[0]), (std::vector<float>{10, 14, 18, 10, 14, 18}));
  EXPECT_FALSE(a.grad().defined());
}

// slice_update takes over the cache's buffer when nothing else can see the
// old version, and copies when something can.
TEST(InPlace, SliceUpdateReusesAnUnsharedCache) {
  Tensor cache = zeros({4, 8});
  cache.eval();
  const void* storage = cache.raw_data();
  Tensor update = ones({4, 2});
  cache = slice_update(cache, update, 3, 1);  // the old version is dropped here
  cache.eval();
  EXPECT_EQ(cache.raw_data(), storage);
  std::vector<float> host(32);
  cache.copy_to_host(host.data());
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 8; ++c) EXPECT_EQ(host[r * 8 + c], (c == 3 || c == 4) ? 1.0f : 0.0f);
  }
  Tensor kept = cache;  // still held: the next version gets its own buffer
  Tensor next = slice_update(cache, zeros({4, 1}), 3, 1);
  next.eval();
  EXPECT_NE(next.raw_data(), kept.raw_data());
  kept.copy_to_host(host.data());
  EXPECT_EQ(host[3], 1.0f);
}
