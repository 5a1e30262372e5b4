// Edge cases that used to crash or answer wrongly in the core: zero-size
// gradients (reductions, concat, the gather's scatter-add), clamp's gradient
// at its bounds, integer pow with a negative exponent, integer wraparound.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backend/cpu/kernel_utils.h"
#include "pyflame/autograd.h"
#include "pyflame/errors.h"
#include "pyflame/ops.h"
#include "pyflame/ops_index.h"

using namespace pyflame;

namespace {
std::vector<float> host(const Tensor& t) {
  Tensor f = astype(t, Dtype::Float32);
  std::vector<float> v(f.size());
  f.copy_to_host(v.data());
  return v;
}

Tensor leaf(Shape s, float v = 0.0f) {
  Tensor t = full(s, v);
  t.eval();
  t.set_requires_grad(true);
  return t;
}
}  // namespace

TEST(Reliability, ZeroSizeReductionsKeepTheirGradient) {
  using Reduction = Tensor (*)(const Tensor&, Axes, bool);
  for (Reduction op : {Reduction(&sum), Reduction(&mean), Reduction(&prod)}) {
    Tensor x = leaf({0, 3});
    Tensor y = op(x, {0}, false);  // three empty columns: 0, NaN or 1
    EXPECT_EQ(y.shape(), (Shape{3}));
    backward(sum(mul(y, scalar(0.0, Dtype::Float32, std::nullopt)), {}, false));
    ASSERT_TRUE(x.grad().defined());
    EXPECT_EQ(x.grad().shape(), (Shape{0, 3}));
  }
}

TEST(Reliability, ZeroSizeConcatInputsKeepTheirGradient) {
  Tensor a = leaf({0, 2});
  Tensor b = leaf({2, 2}, 1.0f);
  Tensor c = concat({a, b, a}, 0);
  EXPECT_EQ(host(c), (std::vector<float>{1, 1, 1, 1}));
  backward(sum(c, {}, false));
  ASSERT_TRUE(a.grad().defined());
  EXPECT_EQ(a.grad().shape(), (Shape{0, 2}));
  EXPECT_EQ(host(b.grad()), (std::vector<float>{1, 1, 1, 1}));
}

TEST(Reliability, GatherGradientWithAnEmptyIndexAxis) {
  // The scatter-add of the gradient once divided by the empty extent (SIGFPE).
  Tensor x = leaf({3, 4}, 2.0f);
  Tensor idx = zeros({0, 4}, Dtype::Int64);
  backward(sum(gather(x, 0, idx), {}, false));
  EXPECT_EQ(host(x.grad()), std::vector<float>(12, 0.0f));
}

TEST(Reliability, ClampGradientIsOneAtTheBounds) {
  const float v[] = {-1.0f, 0.0f, 0.5f, 1.0f, 2.0f};
  Tensor x = Tensor::from_host(v, {5}, Dtype::Float32);
  x.set_requires_grad(true);
  backward(sum(clamp(x, 0.0, 1.0), {}, false));
  EXPECT_EQ(host(x.grad()), (std::vector<float>{0, 1, 1, 1, 0}));
}

TEST(Reliability, IntegerPowRejectsNegativeExponents) {
  Tensor b = full({2}, 3.0, Dtype::Int32);
  EXPECT_THROW(pow(b, scalar(-1.0, Dtype::Int32, std::nullopt)), ValueError);  // a constant: at record time
  Tensor e = sub(zeros({2}, Dtype::Int32), full({2}, 1.0, Dtype::Int32));  // computed: at evaluation
  Tensor p = pow(b, e);
  EXPECT_THROW(p.eval(), ValueError);
  Tensor ok = pow(b, full({2}, 2.0, Dtype::Int32));
  EXPECT_EQ(host(ok), (std::vector<float>{9, 9}));
}

TEST(Reliability, IntegerArithmeticWraps) {
  Tensor m = full({1}, 2147483647.0, Dtype::Int32);
  int32_t v = 0;
  add(m, full({1}, 1.0, Dtype::Int32)).copy_to_host(&v);
  EXPECT_EQ(v, INT32_MIN);
  Tensor big = full({2}, 4611686018427387904.0, Dtype::Int64);  // 2^62
  int64_t s = 0;
  sum(big, {}, false).copy_to_host(&s);
  EXPECT_EQ(s, INT64_MIN);
}

TEST(Reliability, ExceptionInsideAParallelLoopReachesTheCaller) {
  // An exception leaving an OpenMP region would terminate the process.
  EXPECT_THROW(cpu::parallel_for(1 << 20, 1, [](int64_t b, int64_t) {
                 if (b > 0) throw ValueError("[test] from a worker");
               }),
               ValueError);
  int64_t total = 0;
  cpu::parallel_for(1, 1, [&](int64_t b, int64_t e) { total += e - b; });
  EXPECT_EQ(total, 1);
}

TEST(Reliability, ScratchBeyondMemoryIsOutOfMemory) {
  EXPECT_THROW(cpu::Scratch<float>(int64_t{1} << 60), OutOfMemoryError);
  EXPECT_THROW(cpu::Scratch<double>(int64_t{1} << 62), ValueError);  // bytes overflow 64 bits
  cpu::Scratch<float> ok(4);
  ok[3] = 1.0f;
  EXPECT_EQ(ok.data()[3], 1.0f);
}

TEST(Reliability, MatmulOfAHugeBroadcastOperandIsOutOfMemory) {
  // float16: the CPU copies both operands to float32 scratch first.
  // 2**46 float32 values: more than any address space, so no overcommit
  // setting lets the scratch allocation succeed.
  Tensor a = broadcast_to(full({1, 1}, 1.0f, Dtype::Float16), {1, int64_t{1} << 46});
  Tensor b = broadcast_to(full({1, 1}, 1.0f, Dtype::Float16), {int64_t{1} << 46, 1});
  EXPECT_THROW(matmul(a, b).eval(), OutOfMemoryError);
}
