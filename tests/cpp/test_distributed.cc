// pyflame::distributed's C++ API in one process: the errors of a process
// without a group, a world of one over MPI, where every collective is the
// identity, and the rendezvous store with clients in threads (the
// multi-process runs are in tests/python/test_distributed*.py).
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "distributed/store.h"

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
  auto work = d::all_reduce_async(x, d::ReduceOp::Avg);  // MPI: complete on return
  EXPECT_TRUE(work->is_completed());
  EXPECT_EQ(host(work->wait()), v);
  EXPECT_EQ(host(d::broadcast_async(x, 0)->wait()), v);
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

namespace {
int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}
}  // namespace

TEST(Distributed, StoreGatherAndMailboxInThreads) {
  using d::detail::TcpStore;
  int port = free_port();
  TcpStore master("127.0.0.1", port, true, 10.0, 0, "test");
  std::vector<std::vector<std::string>> got(3);
  std::vector<std::thread> threads;
  for (int r = 1; r < 3; ++r) {
    threads.emplace_back([&, r] {
      TcpStore s("127.0.0.1", port, false, 10.0, r, "test");
      got[r] = s.gather("k", r, 3, std::string(r, 'x'), "test");
      if (r == 1) s.set("mail", "hi", "test");
      s.close();
    });
  }
  got[0] = master.gather("k", 0, 3, "", "test");
  EXPECT_EQ(master.take("mail", "test"), "hi");
  EXPECT_FALSE(master.check("mail", "test"));  // taken
  EXPECT_EQ(master.add("n", 5, "test"), 5);
  for (auto& t : threads) t.join();
  for (const auto& g : got) EXPECT_EQ(g, (std::vector<std::string>{"", "x", "xx"}));
  master.close();
}

TEST(Distributed, StoreErrors) {
  using d::detail::TcpStore;
  EXPECT_THROW(TcpStore("127.0.0.1", 0, false, 1.0, -1, "test"), ValueError);
  TcpStore master("127.0.0.1", free_port(), true, 0.3, 0, "test");
  try {
    master.get("never", "test");
    FAIL() << "no timeout";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("[test] timed out after"), std::string::npos) << e.what();
  }
}
