// Fusion through the C++ API: the spec's can_fuse, the plan, and fused
// results equal to unfused ones (the Python suite covers random graphs).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "ir/node_map.h"
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

// The plan's node map: open addressing, inline first, then on the heap.
TEST(Fusion, NodeMapFindsWhatItHoldsAcrossGrowth) {
  std::vector<int> keys(1000);
  NodeMap<int> m;
  for (int i = 0; i < 1000; ++i) {
    auto [v, added] = m.insert(&keys[i], i);
    EXPECT_TRUE(added);
    EXPECT_EQ(*v, i);
  }
  EXPECT_FALSE(m.insert(&keys[7], -1).second);  // present: kept as it was
  EXPECT_EQ(m.size(), 1000u);
  for (int i = 0; i < 1000; ++i) ASSERT_NE(m.find(&keys[i]), nullptr) << i;
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(*m.find(&keys[i]), i);
  int other = 0;
  EXPECT_EQ(m.find(&other), nullptr);
  NodeMap<int> r;
  r.reserve(300);
  for (int i = 0; i < 300; ++i) r[&keys[i]] = i + 1;
  for (int i = 0; i < 300; ++i) EXPECT_EQ(*r.find(&keys[i]), i + 1);
  NodeSet s;
  EXPECT_TRUE(s.insert(&keys[1]));
  EXPECT_FALSE(s.insert(&keys[1]));
  EXPECT_TRUE(s.contains(&keys[1]));
  EXPECT_FALSE(s.contains(&keys[2]));
}

// A graph longer than a region (48 ops) and than the map's inline slots:
// several regions, values stored for a later region, all equal to unfused.
TEST(Fusion, LongGraphSplitsIntoRegionsAndMatchesUnfused) {
  FusionOn on;
  std::vector<float> xs(64);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(float(i));
  Tensor x = Tensor::from_host(xs.data(), {64}, Dtype::Float32);
  auto graph = [&] {
    Tensor y = x, mid;
    for (int i = 0; i < 120; ++i) {
      y = add(mul(y, scalar(0.5, Dtype::Float32)), x);
      if (i == 40) mid = y;
    }
    return std::vector<Tensor>{add(y, mid), mid};
  };
  reset_fusion_stats();
  std::vector<Tensor> fused = graph();
  eval(fused);
  EXPECT_GE(fusion_stats().regions, 5u);
  set_fusion(false);
  std::vector<Tensor> plain = graph();
  eval(plain);
  EXPECT_EQ(bits(fused[0]), bits(plain[0]));
  EXPECT_EQ(bits(fused[1]), bits(plain[1]));
}
