// Primitive parameters: equality and hashing derived from PF_PARAMS; the
// scalar operand of binary ops.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>

#include "ir/primitives.h"
#include "pyflame/ops.h"

using namespace pyflame;

namespace {
// Two primitives built by the same factory are equal and hash alike.
void expect_same(const Primitive& a, const Primitive& b) {
  EXPECT_TRUE(a.equal(b)) << a.name();
  EXPECT_TRUE(b.equal(a)) << a.name();
  EXPECT_EQ(a.hash(), b.hash()) << a.name();
}

void expect_differ(const Primitive& a, const Primitive& b) {
  EXPECT_FALSE(a.equal(b)) << a.name() << " vs " << b.name();
  EXPECT_FALSE(b.equal(a)) << a.name() << " vs " << b.name();
  // Not guaranteed by a hash in general; for these small changes a collision
  // would mean a field is not hashed.
  EXPECT_NE(a.hash(), b.hash()) << a.name() << " vs " << b.name();
}

ConvGeometry geometry() {
  ConvGeometry g;
  g.stride = {1, 2};
  g.padding = {0, 1};
  g.dilation = {1, 1};
  g.groups = 1;
  return g;
}

Pool pool(int64_t k = 2, bool ceil = false) {
  return Pool(PoolKind::Max, {k, k}, {2, 2}, {0, 0}, {1, 1}, ceil, true);
}

Tensor from_values() {
  std::vector<float> v{1.f, 2.f, 3.f};
  return Tensor::from_host(v.data(), {3}, Dtype::Float32);
}
}  // namespace

TEST(PrimitiveParams, EqualParamsAreEqual) {
  expect_same(Binary(BinaryOp::Add), Binary(BinaryOp::Add));
  expect_same(Full(0.5), Full(0.5));
  expect_same(Full(NAN), Full(NAN));  // a cache key: the same bits are the same constant
  expect_same(Reduce(ReduceOp::Sum, {0, 2}), Reduce(ReduceOp::Sum, {0, 2}));
  expect_same(Conv(geometry(), true), Conv(geometry(), true));
  expect_same(pool(), pool());
  expect_same(PoolGrad(pool()), PoolGrad(pool()));
  expect_same(Gather(1, "embedding", 3), Gather(1, "embedding", 3));
  expect_same(CheckRange(0.f, 1.f, "[bce] x"), CheckRange(0.f, 1.f, "[bce] x"));
  expect_same(Rope(1e4f, 2.0, false, false, {1.f, 2.f}), Rope(1e4f, 2.0, false, false, {1.f, 2.f}));
  expect_same(Matmul(), Matmul());
  expect_same(Reshape(), Reshape());
}

TEST(PrimitiveParams, AnyChangeDiffers) {
  // The op kind, each field, and the class itself.
  expect_differ(Binary(BinaryOp::Add), Binary(BinaryOp::Sub));
  expect_differ(Full(0.0), Full(-0.0));
  expect_differ(Full(1.0), Full(1.0 + 1e-15));
  expect_differ(Arange(0, 1), Arange(1, 0));
  expect_differ(Random(Random::Uniform, 7), Random(Random::Uniform, 8));
  expect_differ(Random(Random::Integer, 7, 0, 5), Random(Random::Integer, 7, 0, 6));
  expect_differ(Reduce(ReduceOp::Sum, {0, 2}), Reduce(ReduceOp::Sum, {0, 1}));
  expect_differ(Reduce(ReduceOp::Sum, {0}), Reduce(ReduceOp::Sum, {0, 0}));
  expect_differ(Reduce(ReduceOp::Sum, {1}), Reduce(ReduceOp::Mean, {1}));
  expect_differ(Softmax(false), Softmax(true));
  expect_differ(Where(), AsType());
  expect_differ(Reshape(), Squeeze());
  expect_differ(Transpose({1, 0, 2}), Transpose({0, 2, 1}));
  expect_differ(Slice({0, 1}, {1, 1}), Slice({0, 1}, {1, 2}));
  expect_differ(Slice({0, 1}, {1, 1}, -1), Slice({0, 1}, {1, 1}, 0));
  ConvGeometry g = geometry();
  g.groups = 2;
  expect_differ(Conv(geometry(), true), Conv(g, true));
  expect_differ(Conv(geometry(), true), Conv(geometry(), false));
  g = geometry();
  g.padding = {1, 0};
  expect_differ(ConvWeightGrad(geometry()), ConvWeightGrad(g));
  expect_differ(pool(2), pool(3));
  expect_differ(PoolGrad(pool(2, false)), PoolGrad(pool(2, true)));
  expect_differ(Gather(1, "gather"), Gather(1, "index_select"));
  expect_differ(Gather(1, "embedding", 3), Gather(1, "embedding", std::nullopt));
  expect_differ(Gather(1, "embedding", 3), Gather(1, "embedding", 4));
  expect_differ(Pad(PadMode::Constant, 0.0, {1, 2}), Pad(PadMode::Constant, 1.0, {1, 2}));
  expect_differ(Pad(PadMode::Constant, 0.0, {1, 2}), Pad(PadMode::Reflect, 0.0, {1, 2}));
  expect_differ(Dropout(0.5, 1), Dropout(0.25, 1));
  expect_differ(CheckRange(0.f, 1.f, "[bce] x"), CheckRange(0.f, 1.f, "[bce] y"));
  expect_differ(Rope(1e4f, 2.0, false, false), Rope(1e4f, 3.0, false, false));
  expect_differ(Rope(1e4f, 2.0, false, false, {1.f}), Rope(1e4f, 2.0, false, false, {2.f}));
  expect_differ(Attention(0.125f, true, 0), Attention(0.125f, true, 1));
  expect_differ(CrossEntropy(-100, 0.0, false), CrossEntropy(-100, 0.1, false));
  expect_differ(LayerNorm(8, 1e-5, true, true), LayerNorm(8, 1e-5, true, false));
  expect_differ(GroupNorm(2, 1e-5, true, true), GroupNorm(4, 1e-5, true, true));
  expect_differ(ArgReduce(true, 0), ArgReduce(false, 0));
  expect_differ(Cumsum(1, false), Cumsum(1, true));
  expect_differ(Multinomial(3, true, 9), Multinomial(3, false, 9));
}

TEST(PrimitiveParams, StringsDoNotRunTogether) {
  // Lengths are part of the words: "ab" + "c" is not "a" + "bc".
  ParamSink a, b;
  a(std::string("ab"), std::string("c"));
  b(std::string("a"), std::string("bc"));
  EXPECT_NE(a.words(), b.words());
}

TEST(PrimitiveParams, UsableAsAKey) {
  // The intended use: a cache keyed by primitive.
  struct Hash {
    size_t operator()(const std::shared_ptr<Primitive>& p) const { return p->hash(); }
  };
  struct Eq {
    bool operator()(const std::shared_ptr<Primitive>& a, const std::shared_ptr<Primitive>& b) const {
      return a->equal(*b);
    }
  };
  std::unordered_map<std::shared_ptr<Primitive>, int, Hash, Eq> cache;
  cache[std::make_shared<Binary>(BinaryOp::Mul)] = 1;
  cache[std::make_shared<Binary>(BinaryOp::Add)] = 2;
  cache[std::make_shared<Binary>(BinaryOp::Mul)] = 3;
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache[std::make_shared<Binary>(BinaryOp::Mul)], 3);
}

TEST(ScalarOperand, RecordedAsAKernelArgument) {
  Tensor x = from_values();
  Tensor y = mul(x, scalar(0.5, Dtype::Float32));
  auto* b = dynamic_cast<Binary*>(y.primitive());
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(b->has_scalar());
  EXPECT_EQ(b->scalar_side, 1);
  EXPECT_EQ(b->scalar, 0.5);
  ASSERT_EQ(y.inputs().size(), 1u);  // no node for the number
  Tensor z = sub(scalar(1.0, Dtype::Float32), x);
  EXPECT_EQ(static_cast<Binary*>(z.primitive())->scalar_side, 0);
  // The scalar is a parameter: x * 0.5 and x * 0.25 are different ops.
  EXPECT_FALSE(y.primitive()->equal(*mul(x, scalar(0.25, Dtype::Float32)).primitive()));
  EXPECT_TRUE(y.primitive()->equal(*mul(x, scalar(0.5, Dtype::Float32)).primitive()));
  // A 0-d tensor that is not a bare constant stays a tensor operand.
  Tensor w = mul(x, sum(x, {}, false));
  EXPECT_EQ(w.inputs().size(), 2u);
  std::vector<float> v(3);
  z.copy_to_host(v.data());
  EXPECT_EQ(v, (std::vector<float>{0.f, -1.f, -2.f}));
}
