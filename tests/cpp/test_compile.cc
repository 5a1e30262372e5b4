// pyflame::compile: replayed calls match the function run eagerly (the
// oracle: the same ops, recorded and evaluated as usual).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <optional>
#include <thread>

#include "pyflame/autograd.h"
#include "pyflame/backend/rocm.h"
#include "pyflame/compile.h"
#include "pyflame/errors.h"
#include "pyflame/fusion.h"
#include "pyflame/ops.h"
#include "ir/passes/fuse.h"
#include "runtime/program.h"
#include "runtime/trace.h"

using namespace pyflame;

namespace {

std::vector<float> host(const Tensor& t) {
  std::vector<float> v(t.size());
  t.copy_to_host(v.data());
  return v;
}

std::vector<Tensor> mlp(const Tensor& w1, const Tensor& w2, const std::vector<Tensor>& in) {
  Tensor h = relu(matmul(in[0], w1));
  return {add(matmul(h, w2), rand({in[0].shape(0), w2.shape(1)})), sum(h)};
}

TEST(Compile, ReplayMatchesEagerWithFreshRandomNumbers) {
  Tensor w1 = randn({6, 8}), w2 = randn({8, 3});
  w1.eval();
  w2.eval();
  int calls = 0;
  auto fn = compile([&](const std::vector<Tensor>& in) {
    ++calls;
    return mlp(w1, w2, in);
  });
  for (int i = 0; i < 4; ++i) {
    Tensor x = randn({5, 6});
    x.eval();
    manual_seed(40 + i);
    std::vector<Tensor> got = fn({x});
    manual_seed(40 + i);
    std::vector<Tensor> want = mlp(w1, w2, {x});
    ASSERT_EQ(got.size(), 2u);
    EXPECT_TRUE(got[0].is_evaluated());
    EXPECT_EQ(host(got[0]), host(want[0]));
    EXPECT_EQ(host(got[1]), host(want[1]));
  }
  EXPECT_EQ(fn.traces(), 1);
  EXPECT_EQ(fn.replays(), 3);
  EXPECT_EQ(calls, 1);
  fn({randn({2, 6})});  // a new shape traces again
  EXPECT_EQ(fn.traces(), 2);
}

TEST(Compile, CapturedTensorFollowsItsRebinds) {
  Tensor w = randn({4, 4});
  w.eval();
  auto fn = compile([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{matmul(in[0], w)}; });
  Tensor x = randn({2, 4});
  x.eval();
  fn({x});
  Tensor w0 = w;
  w.rebind(mul(w0, full({}, -3.0f)));  // an in-place update of w's handle
  EXPECT_EQ(host(fn({x})[0]), host(matmul(x, w)));
  EXPECT_EQ(fn.traces(), 1);
}

TEST(Compile, GradientsWrittenByTheFunctionAreWrittenAgain) {
  Tensor w = randn({3, 2});
  w.eval();
  w.set_requires_grad(true);
  auto fn = compile([&](const std::vector<Tensor>& in) {
    w.set_grad(Tensor());
    Tensor loss = sum(mul(matmul(in[0], w), matmul(in[0], w)));
    backward(loss);
    return std::vector<Tensor>{loss};
  });
  for (int i = 0; i < 3; ++i) {
    Tensor x = randn({4, 3});
    x.eval();
    fn({x});
    std::vector<float> got = host(w.grad());
    w.set_grad(Tensor());
    backward(sum(mul(matmul(x, w), matmul(x, w))));
    EXPECT_EQ(got, host(w.grad()));
  }
  EXPECT_EQ(fn.traces(), 1);  // the function clears .grad before it reads it
}

TEST(Compile, ThreadsReplayTheirOwnFunctions) {
  constexpr int kThreads = 4;
  std::vector<Tensor> ws;
  for (int i = 0; i < kThreads; ++i) ws.push_back(randn({8, 8}));
  eval(ws);
  std::vector<std::vector<float>> got(kThreads), want(kThreads);
  std::vector<Tensor> xs;
  for (int i = 0; i < kThreads; ++i) xs.push_back(randn({4, 8}));
  eval(xs);
  for (int i = 0; i < kThreads; ++i) want[i] = host(relu(matmul(xs[i], ws[i])));
  std::vector<std::thread> ts;
  for (int i = 0; i < kThreads; ++i) {
    ts.emplace_back([&, i] {
      auto fn = compile([&, i](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{relu(matmul(in[0], ws[i]))};
      });
      for (int k = 0; k < 20; ++k) got[i] = host(fn({xs[i]})[0]);
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(got, want);
}

// Threads tracing at once over one shared weight (multi_stream's workload:
// every thread's own function captures the same layers) give its node one
// Binding between them: after the handle is rebound, every function reads
// the new value without tracing again.
TEST(Compile, ThreadsTraceOverOneSharedWeight) {
  constexpr int kThreads = 8;
  Tensor w = randn({8, 8});
  w.eval();
  std::vector<Tensor> xs;
  for (int i = 0; i < kThreads; ++i) xs.push_back(randn({4, 8}));
  eval(xs);
  auto body = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{relu(matmul(in[0], w))}; };
  std::vector<CompiledFunction> fns;
  for (int i = 0; i < kThreads; ++i) fns.push_back(compile(body));
  std::vector<std::vector<float>> got(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < kThreads; ++i) {
    ts.emplace_back([&, i] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();  // trace together
      got[i] = host(fns[i]({xs[i]})[0]);
    });
  }
  for (auto& t : ts) t.join();
  for (int i = 0; i < kThreads; ++i) EXPECT_EQ(got[i], host(relu(matmul(xs[i], w)))) << "thread " << i;
  w.rebind(mul(Tensor(w), full({}, -2.0f)));  // the old version is held by no one now
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_EQ(host(fns[i]({xs[i]})[0]), host(relu(matmul(xs[i], w)))) << "function " << i;
    EXPECT_EQ(fns[i].traces(), 1) << "function " << i;
  }
}

// On a GPU: replays launch a captured graph (multi_stream off and on), and
// results are copies that a later replay leaves alone.
TEST(Compile, GpuGraphReplayMatchesEager) {
  if (!backend::rocm::is_available()) GTEST_SKIP() << "no GPU";
  const Device gpu = Device::rocm(0);
  Tensor w1 = randn({16, 32}, Dtype::Float32, gpu), w2 = randn({32, 4}, Dtype::Float32, gpu);
  eval({w1, w2});
  auto body = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{matmul(relu(matmul(in[0], w1)), w2)};
  };
  for (bool streams : {false, true}) {
    backend::rocm::set_multi_stream(streams);
    auto fn = compile(body);
    std::vector<Tensor> got;
    std::vector<std::vector<float>> want;
    for (int i = 0; i < 4; ++i) {
      Tensor x = randn({8, 16}, Dtype::Float32, gpu);
      x.eval();
      got.push_back(fn({x})[0]);
      want.push_back(host(body({x})[0]));
    }
    for (int i = 0; i < 4; ++i) {
      const std::vector<float> g = host(got[i]);
      ASSERT_EQ(g.size(), want[i].size());
      for (size_t k = 0; k < g.size(); ++k) EXPECT_NEAR(g[k], want[i][k], 1e-4f * (1 + std::abs(want[i][k])));
    }
    EXPECT_EQ(fn.traces(), 1);
  }
  backend::rocm::set_multi_stream(false);
}

TEST(Compile, OneFunctionFromManyThreads) {
  constexpr int kThreads = 4;
  Tensor w = randn({8, 8});
  w.eval();
  auto fn = compile([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{relu(matmul(in[0], w))}; });
  std::vector<Tensor> xs;
  for (int i = 0; i < kThreads; ++i) xs.push_back(randn({3, 8}));
  eval(xs);
  std::vector<std::vector<float>> got(kThreads), want(kThreads);
  for (int i = 0; i < kThreads; ++i) want[i] = host(relu(matmul(xs[i], w)));
  std::vector<std::thread> ts;
  for (int i = 0; i < kThreads; ++i) {
    ts.emplace_back([&, i] {
      for (int k = 0; k < 20; ++k) got[i] = host(fn({xs[i]})[0]);
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(got, want);
  EXPECT_LE(fn.traces(), kThreads);  // racing first calls may each trace
}

TEST(Compile, NestedFunctionIsPartOfTheOuterTrace) {
  auto inner = compile([](const std::vector<Tensor>& in) { return std::vector<Tensor>{exp(in[0])}; });
  auto outer = compile([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{add(inner(in)[0], in[0])}; });
  for (int i = 0; i < 3; ++i) {
    Tensor x = randn({5});
    x.eval();
    EXPECT_EQ(host(outer({x})[0]), host(add(exp(x), x)));
  }
  EXPECT_EQ(outer.traces(), 1);
  EXPECT_EQ(inner.traces(), 0);
}

// A program plans its fusion once, when it is traced: its replays plan
// nothing, and one that meets another fusion switch plans for that switch,
// so the results stay the eager ones.
TEST(Compile, ReplayKeepsItsFusionPlanAndFollowsTheSwitches) {
  struct Restore {
    ~Restore() { set_fusion(true); }
  } restore;
  set_fusion(true);
  auto f = [](const std::vector<Tensor>& in) {
    Tensor y = relu(add(mul(in[0], scalar(2.0, Dtype::Float32)), in[1]));
    return std::vector<Tensor>{y, sum(exp(neg(y)))};  // an elementwise region and a reduction's
  };
  Tensor a = randn({64}), b = randn({64});
  eval({a, b});
  runtime::Trace trace;
  std::vector<Tensor> out;
  {
    runtime::TraceScope scope(trace);
    out = f({a, b});
  }
  const runtime::Program program(trace, {a, b}, out, {});
  eval(out);
  auto& counters = fuse::counters();
  for (bool on : {true, false, true, false}) {
    set_fusion(on);
    Tensor x = randn({64}), y = randn({64});
    eval({x, y});
    const uint64_t plans = counters.plans, regions = counters.regions;
    std::optional<runtime::Program::Result> r = program.replay({x, y});
    ASSERT_TRUE(r);
    EXPECT_EQ(counters.plans, plans);  // kept (on), or nothing to plan (off)
    EXPECT_EQ(counters.regions - regions, on ? 2u : 0u);
    std::vector<Tensor> want = f({x, y});
    EXPECT_EQ(host(r->outputs[0]), host(want[0]));
    EXPECT_EQ(host(r->outputs[1]), host(want[1]));
  }
}

// A tensor passed twice is one value in the traced program: a later call
// with two different tensors there traces again instead of reading the
// first one twice.
TEST(Compile, RepeatedArgumentTracesAgainWhenTheCallerSplitsIt) {
  auto f = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{relu(add(mul(in[0], in[1]), in[0]))}; };
  auto fn = compile(f);
  Tensor a = randn({16}), x = randn({16}), y = randn({16});
  eval({a, x, y});
  EXPECT_EQ(host(fn({a, a})[0]), host(f({a, a})[0]));
  EXPECT_EQ(host(fn({x, y})[0]), host(f({x, y})[0]));
  EXPECT_EQ(fn.traces(), 2);
  EXPECT_EQ(host(fn({a, a})[0]), host(f({a, a})[0]));  // the general program serves both
  EXPECT_EQ(fn.traces(), 2);
}

TEST(Compile, BadInputsRaise) {
  EXPECT_THROW(compile(TensorFn()), ValueError);
  auto fn = compile([](const std::vector<Tensor>& in) { return std::vector<Tensor>{matmul(in[0], in[1])}; });
  EXPECT_THROW(fn({ones({2, 3}), ones({4, 5})}), ValueError);
  EXPECT_THROW(fn({Tensor()}), ValueError);
  EXPECT_EQ(host(fn({ones({1, 2}), ones({2, 1})})[0]), std::vector<float>{2.0f});
}

}  // namespace
