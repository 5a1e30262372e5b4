// pyflame::distributed's C++ API in one process: the errors of a process
// without a group, and a world of one over MPI, where every collective is the
// identity (the multi-process runs are in tests/python/test_distributed.py).
#include <gtest/gtest.h>

#include <vector>

#include "pyflame/distributed.h"
#include "pyflame/errors.h"
#include "pyflame/ops.h"

using namespace pyflame;
namespace d = pyflame::distributed;

namespace {
std::vector<float> host(const Tensor& t) {
  std::vector<float> v(t.size());
  t.copy_to_host(v.data());
  return v;
}
}  // namespace

TEST(Distributed, ErrorsWithoutAGroup) {
  ASSERT_FALSE(d::is_initialized());
  EXPECT_THROW(d::all_reduce(ones({2})), RuntimeError);
  EXPECT_THROW(d::get_rank(), RuntimeError);
  EXPECT_THROW(d::init_process_group({"gloo"}), ValueError);
  d::InitOptions bad;
  bad.timeout_s = -1;
  EXPECT_THROW(d::init_process_group(bad), ValueError);
  try {
    d::barrier();
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("[barrier] the default process group is not initialized"),
              std::string::npos);
  }
}

TEST(Distributed, WorldOfOneOverMpi) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "MPI_Init's own allocations read as leaks under LeakSanitizer";
#endif
  if (!d::mpi_available()) GTEST_SKIP() << "built without MPI";
  d::InitOptions opts;
  opts.backend = "mpi";
  opts.timeout_s = 30;
  opts.rank = 0;
  opts.world_size = 1;
  d::init_process_group(opts);
  EXPECT_EQ(d::get_rank(), 0);
  EXPECT_EQ(d::get_world_size(), 1);
  EXPECT_EQ(d::get_backend(), "mpi");
  std::vector<float> v = {1, -2, 3, 4, 5, 6};
  Tensor x = Tensor::from_host(v.data(), {2, 3}, Dtype::Float32);
  for (auto op : {d::ReduceOp::Sum, d::ReduceOp::Avg, d::ReduceOp::Max, d::ReduceOp::Min})
    EXPECT_EQ(host(d::all_reduce(x, op)), v);
  EXPECT_EQ(host(d::broadcast(x, 0)), v);
  Tensor g = d::all_gather(x);
  EXPECT_EQ(g.shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(host(g), v);
  EXPECT_EQ(host(d::reduce_scatter(x)), v);
  EXPECT_THROW(d::broadcast(x, 1), ValueError);
  EXPECT_THROW(d::send(x, 0), ValueError);  // not another rank
  EXPECT_THROW(d::all_reduce(ones({2}, Dtype::Int32), d::ReduceOp::Avg), ValueError);
  d::barrier();
  d::destroy_process_group();
  EXPECT_FALSE(d::is_initialized());
}
