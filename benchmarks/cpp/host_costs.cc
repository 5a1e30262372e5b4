// Host costs of the core, without Python: recording an op, and building plus
// evaluating a small graph on the CPU.
#include <benchmark/benchmark.h>

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

BENCHMARK_MAIN();
