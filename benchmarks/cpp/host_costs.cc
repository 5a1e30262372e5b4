// Host costs of the core, without Python: recording an op, building plus
// evaluating a small graph on the CPU, and the per-op cost of eager code
// (one tiny op recorded and evaluated at a time) on each device, from one
// thread and from several (multi_stream on the GPU).
#include <benchmark/benchmark.h>

#include <optional>

#include "pyflame/backend/rocm.h"
#include "pyflame/compile.h"
#include "pyflame/ops.h"

using namespace pyflame;

static void RecordAdd(benchmark::State& state) {
  Tensor a = ones({4}), b = ones({4});
  a.eval();
  b.eval();
  for (auto _ : state) benchmark::DoNotOptimize(add(a, b));
}
BENCHMARK(RecordAdd);

static void RecordScalarMul(benchmark::State& state) {
  Tensor a = ones({4});
  a.eval();
  for (auto _ : state) benchmark::DoNotOptimize(mul(a, scalar(2.0, Dtype::Float32)));
}
BENCHMARK(RecordScalarMul);

static void EvalSmallChain(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Tensor x = ones({16});
  x.eval();
  for (auto _ : state) {
    Tensor y = x;
    for (int i = 0; i < n; ++i) y = add(y, x);
    y.eval();
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(EvalSmallChain)->Arg(1)->Arg(16)->Arg(256);

// Arg 0: the CPU; 1: GPU 0 (skipped without one). Each op is evaluated
// before the next is recorded: the eval loop's fixed cost per op (ordering,
// context, allocation, launch, free), with the tensor (16 floats) too small
// for the kernel to matter. The scalar form takes the kernel-argument path.
static std::optional<Device> eager_device(benchmark::State& state) {
  if (state.range(0) == 0) return Device::cpu();
  if (backend::rocm::is_available()) return Device::rocm(0);
  state.SkipWithError("no GPU");
  return std::nullopt;
}

static void EagerAdd(benchmark::State& state) {
  const auto dev = eager_device(state);
  if (!dev) return;
  const Device d = *dev;
  Tensor a = ones({16}, Dtype::Float32, d), b = ones({16}, Dtype::Float32, d);
  eval({a, b});
  for (auto _ : state) add(a, b).eval();
  if (d.is_gpu()) backend::rocm::synchronize();
}
BENCHMARK(EagerAdd)->Arg(0)->Arg(1);

static void EagerScalarMul(benchmark::State& state) {
  const auto dev = eager_device(state);
  if (!dev) return;
  const Device d = *dev;
  Tensor a = ones({16}, Dtype::Float32, d);
  a.eval();
  for (auto _ : state) mul(a, scalar(0.5, Dtype::Float32, d)).eval();
  if (d.is_gpu()) backend::rocm::synchronize();
}
BENCHMARK(EagerScalarMul)->Arg(0)->Arg(1);

// The same from 8 threads at once, multi_stream on: the evaluation context
// and per-stream pools leave no shared lock on this path.
static void EagerAddThreads(benchmark::State& state) {
  const auto dev = eager_device(state);
  if (!dev) return;
  const Device d = *dev;
  if (d.is_gpu()) backend::rocm::set_multi_stream(true);  // every thread, before its first op
  Tensor a = ones({16}, Dtype::Float32, d), b = ones({16}, Dtype::Float32, d);
  eval({a, b});
  for (auto _ : state) add(a, b).eval();
  if (state.thread_index() == 0 && d.is_gpu()) backend::rocm::set_multi_stream(false);
}
BENCHMARK(EagerAddThreads)->Arg(0)->Arg(1)->Threads(8)->UseRealTime();

// A small function (three elementwise ops and a sum on 16 floats) called
// eagerly and through pyflame::compile: the host cost of one compiled call
// (a replay; a GPU graph launch with copies in and out on the GPU).
static std::vector<Tensor> small_fn(const std::vector<Tensor>& in) {
  const Device d = in[0].device();
  Tensor y = relu(add(mul(in[0], scalar(2.0, Dtype::Float32, d)), in[1]));
  return {y, sum(y)};
}

static void SmallFunctionEager(benchmark::State& state) {
  const auto dev = eager_device(state);
  if (!dev) return;
  Tensor a = ones({16}, Dtype::Float32, *dev), b = ones({16}, Dtype::Float32, *dev);
  eval({a, b});
  for (auto _ : state) eval(small_fn({a, b}));
  if (dev->is_gpu()) backend::rocm::synchronize();
}
BENCHMARK(SmallFunctionEager)->Arg(0)->Arg(1);

static void SmallFunctionCompiled(benchmark::State& state) {
  const auto dev = eager_device(state);
  if (!dev) return;
  Tensor a = ones({16}, Dtype::Float32, *dev), b = ones({16}, Dtype::Float32, *dev);
  eval({a, b});
  CompiledFunction fn = compile(small_fn);
  fn({a, b});
  for (auto _ : state) benchmark::DoNotOptimize(fn({a, b}));
  if (dev->is_gpu()) backend::rocm::synchronize();
}
BENCHMARK(SmallFunctionCompiled)->Arg(0)->Arg(1);

BENCHMARK_MAIN();
