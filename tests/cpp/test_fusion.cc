// Fusion through the C++ API: the spec's can_fuse, the plan, and fused
// results equal to unfused ones (the Python suite covers random graphs).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "ir/passes/fuse.h"
#include "pyflame/fusion.h"
#include "pyflame/ops.h"

using namespace pyflame;

namespace {
std::vector<uint32_t> bits(const Tensor& t) {
  std::vector<float> v(t.size());
  t.copy_to_host(v.data());
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * 4);
  return b;
}

Tensor chain(const Tensor& x, const Tensor& w) {
  Tensor y = gelu(add(mul(x, w), scalar(0.25, Dtype::Float32)));
  return y;  // the temporaries are gone: nothing outside holds the interior nodes
}

struct FusionOn {
  bool was = get_fusion();
  FusionOn() { set_fusion(true); }
  ~FusionOn() { set_fusion(was); }
};
}  // namespace

TEST(Fusion, CanFuseNamesTheSpecPatterns) {
  EXPECT_EQ(can_fuse({"matmul", "add", "relu"}), FusedOpType::MATMUL_BIAS_RELU);
  EXPECT_EQ(can_fuse({"linear", "gelu"}), FusedOpType::MATMUL_BIAS_GELU);
  EXPECT_EQ(can_fuse({"conv2d", "batch_norm", "relu"}), FusedOpType::CONV_BN_RELU);
  EXPECT_EQ(can_fuse({"mul", "add"}), FusedOpType::MUL_ADD);
  EXPECT_EQ(can_fuse({"add", "relu"}), FusedOpType::ADD_RELU);
  EXPECT_FALSE(can_fuse({"softmax"}).has_value());
  EXPECT_STREQ(fused_op_name(FusedOpType::CONV_BIAS), "CONV_BIAS");
}

TEST(Fusion, ChainIsOneRegionAndMatchesUnfused) {
  FusionOn on;
  std::vector<float> xs(10000), ws(10000);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(float(i)) * 3, ws[i] = std::cos(float(i));
  Tensor x = Tensor::from_host(xs.data(), {100, 100}, Dtype::Float32);
  Tensor w = Tensor::from_host(ws.data(), {100, 100}, Dtype::Float32);
  Tensor y = chain(x, w);
  const std::string plan = explain({y});
  EXPECT_NE(plan.find("fused[3 ops, 2 loads, 1 scalars] gelu(add(mul(x0, x1), s0))"), std::string::npos) << plan;
  reset_fusion_stats();
  auto fused = bits(y);
  EXPECT_EQ(fusion_stats().regions, 1u);
  set_fusion(false);
  EXPECT_EQ(bits(chain(x, w)), fused);
}

TEST(Fusion, GeneratedSourceIsKeyedByPatternNotValues) {
  // Two regions that differ only in a scalar's value and the sizes share one kernel.
  FusionOn on;
  std::vector<float> v(64, 1.0f);
  Tensor a = Tensor::from_host(v.data(), {8, 8}, Dtype::Float32);
  Tensor b = Tensor::from_host(v.data(), {64}, Dtype::Float32);
  // Built in a function: a temporary still alive would hold the interior nodes.
  auto build = [](const Tensor& t, double s) { return add(relu(mul(t, scalar(s, Dtype::Float32))), t); };
  Tensor y1 = build(a, 0.5), y2 = build(b, 7.0);
  auto s1 = fuse::region_sources({y1}, 32);
  auto s2 = fuse::region_sources({y2}, 32);
  ASSERT_EQ(s1.size(), 1u);
  ASSERT_EQ(s2.size(), 1u);
  EXPECT_EQ(s1[0].first, s2[0].first);
  EXPECT_NE(s1[0].second.find("extern \"C\" __global__"), std::string::npos);
}
