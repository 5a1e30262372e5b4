// put: values at flat positions, buffer donation, range errors, gradients.
#include <gtest/gtest.h>

#include <vector>

#include "pyflame/autograd.h"
#include "pyflame/errors.h"
#include "pyflame/ops.h"

using namespace pyflame;

namespace {
Tensor from(const std::vector<float>& v, Shape s) {
  return Tensor::from_host(v.data(), s, Dtype::Float32);
}
Tensor ints(const std::vector<int64_t>& v) {
  return Tensor::from_host(v.data(), {static_cast<int64_t>(v.size())}, Dtype::Int64);
}
std::vector<float> host(const Tensor& t) {
  std::vector<float> h(t.size());
  t.copy_to_host(h.data());
  return h;
}
}  // namespace

TEST(Scatter, PutWritesFlatPositionsAndReusesAnUnsharedBuffer) {
  Tensor x = zeros({2, 3});
  x.eval();
  const void* storage = x.raw_data();
  x = put(x, ints({1, -1, 1}), from({5, 6, 7}, {3}));  // repeated index: the last write wins
  x.eval();
  EXPECT_EQ(x.raw_data(), storage);
  EXPECT_EQ(host(x), (std::vector<float>{0, 7, 0, 0, 0, 6}));
  Tensor kept = x;
  Tensor y = put(x, ints({0}), from({1}, {1}));
  y.eval();
  EXPECT_NE(y.raw_data(), kept.raw_data());
  EXPECT_EQ(host(kept)[0], 0.0f);
  EXPECT_THROW(put(x, ints({6}), from({1}, {1})).eval(), IndexError);
  EXPECT_THROW(put(x, from({1}, {1}), from({1}, {1})), ValueError);
}

TEST(Scatter, PutGradients) {
  Tensor x = from({1, 2, 3, 4}, {4});
  Tensor s = from({10, 20}, {2});
  x.set_requires_grad(true);
  s.set_requires_grad(true);
  Tensor w = from({1, 2, 3, 4}, {4});
  Tensor f = sum(mul(put(x, ints({2, 0}), s), w));
  std::vector<Tensor> g = grad({f}, {x, s});
  EXPECT_EQ(host(g[0]), (std::vector<float>{0, 2, 0, 4}));
  EXPECT_EQ(host(g[1]), (std::vector<float>{3, 1}));
}

TEST(Scatter, VersionCounterGuardsSavedInputs) {
  Tensor x = from({1, 2}, {2});
  x.set_requires_grad(true);
  Tensor y = mul(x, x);  // mul reads x in its backward
  Tensor z = add(x, x);  // add does not
  x.bump_version();
  EXPECT_THROW(backward(sum(y)), RuntimeError);
  EXPECT_NO_THROW(backward(sum(z)));
  EXPECT_EQ(x.version(), 1u);
}
