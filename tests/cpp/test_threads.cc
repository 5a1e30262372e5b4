// Threads sharing graphs and leaves: every thread sees the serial results.
// On a GPU build with a device present the same cases also run on 'rocm',
// with multi_stream off and on.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <cmath>
#include <functional>
#include <thread>

#include "pyflame/autograd.h"
#include "pyflame/backend/rocm.h"
#include "pyflame/errors.h"
#include "pyflame/ops.h"
#include "pyflame/ops_index.h"

using namespace pyflame;

namespace {
constexpr int kThreads = 8;

std::vector<float> host(const Tensor& t) {
  std::vector<float> v(t.size());
  t.copy_to_host(v.data());
  return v;
}

// Runs fn(i) on kThreads threads released together.
void run_threads(const std::function<void(int)>& fn) {
  std::barrier start(kThreads);
  std::vector<std::thread> ts;
  for (int i = 0; i < kThreads; ++i) {
    ts.emplace_back([&, i] {
      start.arrive_and_wait();
      fn(i);
    });
  }
  for (auto& t : ts) t.join();
}

std::vector<Device> devices() {
  std::vector<Device> d{Device::cpu()};
  if (backend::rocm::is_available()) d.push_back(Device::rocm(0));
  return d;
}

Tensor chain(const Tensor& a, int depth) {
  Tensor g = a;
  for (int i = 0; i < depth; ++i) {
    g = tanh(add(mul(matmul(g, a), scalar(0.25, Dtype::Float32, a.device())),
                 scalar(0.5, Dtype::Float32, a.device())));
  }
  return g;
}

class Threads : public ::testing::TestWithParam<bool> {  // multi_stream
 protected:
  void SetUp() override {
    prev_ = backend::rocm::multi_stream();
    backend::rocm::set_multi_stream(GetParam());
  }
  void TearDown() override { backend::rocm::set_multi_stream(prev_); }
  bool prev_ = false;
};
}  // namespace

TEST_P(Threads, SharedUnevaluatedGraph) {
  for (Device dev : devices()) {
    for (int rep = 0; rep < 20; ++rep) {
      Tensor a = mul(randn({24, 24}, Dtype::Float32, dev), scalar(0.3, Dtype::Float32, dev));
      Tensor g = chain(a, 10);
      // The reference: the same graph rebuilt and evaluated on this thread.
      std::vector<float> ref = host(chain(a, 10));
      std::vector<std::vector<float>> outs(kThreads);
      run_threads([&](int i) {
        // Half the threads evaluate a consumer first, so claims interleave.
        if (i % 2) eval({sum(g)});
        outs[i] = host(g);
      });
      for (const auto& o : outs) ASSERT_EQ(o, ref) << dev.str();
    }
  }
}

TEST_P(Threads, BackwardOnSharedLeaf) {
  for (Device dev : devices()) {
    for (int rep = 0; rep < 20; ++rep) {
      Tensor w = randn({64}, Dtype::Float32, dev);
      w.set_requires_grad(true);
      run_threads([&](int i) {
        Tensor loss = sum(mul(mul(w, w), scalar(i + 1, Dtype::Float32, dev)));
        backward(loss);
      });
      std::vector<float> wv = host(w), gv = host(w.grad());
      float factor = 0;
      for (int i = 0; i < kThreads; ++i) factor += 2.0f * (i + 1);
      for (size_t k = 0; k < wv.size(); ++k) {
        ASSERT_NEAR(gv[k], factor * wv[k], 1e-4f * std::abs(factor * wv[k]) + 1e-5f) << dev.str();
      }
    }
  }
}

TEST_P(Threads, ErrorsReleaseTheirClaims) {
  for (Device dev : devices()) {
    std::vector<int32_t> bad_idx{0, 7};
    Tensor x = arange(0, 4, 1, Dtype::Float32, dev);
    Tensor idx = to_device(Tensor::from_host(bad_idx.data(), {2}, Dtype::Int32), dev);
    Tensor bad = add(index_select(x, 0, idx), scalar(1, Dtype::Float32, dev));
    std::atomic<int> raised{0};
    run_threads([&](int) {
      try {
        bad.eval();
      } catch (const IndexError&) {
        raised++;
      }
    });
    EXPECT_EQ(raised.load(), kThreads) << dev.str();
    EXPECT_FALSE(bad.is_evaluated());
    EXPECT_EQ(host(add(x, scalar(1, Dtype::Float32, dev))), (std::vector<float>{1, 2, 3, 4}));
  }
}

INSTANTIATE_TEST_SUITE_P(MultiStream, Threads, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "on" : "off"; });
