// The 'tcp' transport: every exchange goes through the rendezvous store
// (store.h) of MASTER_ADDR:MASTER_PORT. Rank 0's store gathers each rank's
// buffer and hands every rank all of them; reductions then run locally in
// rank order, so every rank gets the same bits. Correct, not fast: it is the
// host side of NCCL/RCCL groups started without MPI, and a CPU group for
// tests and small jobs where MPI is missing (MPI stays the CPU transport).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>

#include "distributed/backend.h"
#include "distributed/store.h"
#include "pyflame/errors.h"

namespace pyflame::distributed::detail {

namespace {

template <typename T>
void reduce_typed(T* acc, const T* x, size_t n, ReduceOp op) {
  for (size_t i = 0; i < n; ++i) {
    switch (op) {
      case ReduceOp::Max: acc[i] = x[i] > acc[i] ? x[i] : acc[i]; break;
      case ReduceOp::Min: acc[i] = x[i] < acc[i] ? x[i] : acc[i]; break;
      default: acc[i] = static_cast<T>(acc[i] + x[i]);
    }
  }
}

// acc op= x, n elements; bool reduces as or (Sum, Max) and and (Min).
void reduce_into(void* acc, const void* x, size_t n, Dtype dtype, ReduceOp op, const char* fn) {
  switch (dtype) {
    case Dtype::Bool: {
      auto* a = static_cast<uint8_t*>(acc);
      auto* b = static_cast<const uint8_t*>(x);
      for (size_t i = 0; i < n; ++i) a[i] = op == ReduceOp::Min ? (a[i] && b[i]) : (a[i] || b[i]);
      return;
    }
    case Dtype::Int8: return reduce_typed(static_cast<int8_t*>(acc), static_cast<const int8_t*>(x), n, op);
    case Dtype::Int16: return reduce_typed(static_cast<int16_t*>(acc), static_cast<const int16_t*>(x), n, op);
    case Dtype::Int32: return reduce_typed(static_cast<int32_t*>(acc), static_cast<const int32_t*>(x), n, op);
    case Dtype::Int64: return reduce_typed(static_cast<int64_t*>(acc), static_cast<const int64_t*>(x), n, op);
    case Dtype::UInt8: return reduce_typed(static_cast<uint8_t*>(acc), static_cast<const uint8_t*>(x), n, op);
    case Dtype::Float32: return reduce_typed(static_cast<float*>(acc), static_cast<const float*>(x), n, op);
    case Dtype::Float64: return reduce_typed(static_cast<double*>(acc), static_cast<const double*>(x), n, op);
    default: break;  // 16-bit floats are widened by the caller
  }
  throw ValueError(errmsg(fn, std::string("the tcp backend cannot reduce ") + dtype_name(dtype)));
}

class TcpTransport final : public HostTransport {
 public:
  TcpTransport(const std::string& addr, int port, int rank, int world, double timeout_s)
      : store_(addr, port, rank == 0, timeout_s, rank, "init_process_group"), rank_(rank), size_(world) {
    // Everyone joins, or init_process_group times out naming the address.
    store_.gather("init", rank_, size_, "", "init_process_group");
  }
  std::string name() const override { return "tcp"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void barrier(const char* fn) override { exchange("", fn); }
  void all_reduce(void* buf, size_t count, Dtype dtype, ReduceOp op, const char* fn) override {
    size_t bytes = count * itemsize(dtype);
    auto parts = exchange(std::string(static_cast<const char*>(buf), bytes), fn);
    reduce_parts(parts, 0, buf, count, dtype, op, fn);
  }
  void broadcast(void* buf, size_t bytes, int root, const char* fn) override {
    auto parts = exchange(rank_ == root ? std::string(static_cast<const char*>(buf), bytes) : "", fn);
    std::memcpy(buf, parts[root].data(), std::min(bytes, parts[root].size()));
  }
  void all_gather(const void* in, void* out, size_t bytes, const char* fn) override {
    auto parts = exchange(std::string(static_cast<const char*>(in), bytes), fn);
    for (int r = 0; r < size_; ++r) std::memcpy(static_cast<char*>(out) + r * bytes, parts[r].data(), bytes);
  }
  void reduce_scatter(const void* in, void* out, size_t count, Dtype dtype, ReduceOp op,
                      const char* fn) override {
    size_t block = count * itemsize(dtype);
    auto parts = exchange(std::string(static_cast<const char*>(in), block * size_), fn);
    reduce_parts(parts, block * rank_, out, count, dtype, op, fn);
  }
  // Point to point: a mailbox key per (source, destination, tag, message).
  void send(const void* buf, size_t bytes, int dst, int tag, const char* fn) override {
    store_.set(mailbox(rank_, dst, tag), std::string(static_cast<const char*>(buf), bytes), fn);
  }
  void recv(void* buf, size_t bytes, int src, int tag, const char* fn) override {
    std::string v = store_.take(mailbox(src, rank_, tag), fn);
    if (v.size() != bytes)
      throw RuntimeError(errmsg(fn, "rank " + std::to_string(src) + " sent " + std::to_string(v.size()) +
                                        " bytes, expected " + std::to_string(bytes)));
    std::memcpy(buf, v.data(), bytes);
  }

 private:
  // Collectives run in the same order on every rank: a counter names them.
  std::vector<std::string> exchange(const std::string& part, const char* fn) {
    return store_.gather("c" + std::to_string(seq_++), rank_, size_, part, fn);
  }

  // out = the parts' blocks at `offset` reduced in rank order.
  void reduce_parts(const std::vector<std::string>& parts, size_t offset, void* out, size_t count, Dtype dtype,
                    ReduceOp op, const char* fn) {
    size_t bytes = count * itemsize(dtype);
    std::memcpy(out, parts[0].data() + offset, bytes);
    for (int r = 1; r < size_; ++r) reduce_into(out, parts[r].data() + offset, count, dtype, op, fn);
  }

  // Senders number their messages per (destination, tag), receivers per
  // (source, tag): the n-th send meets the n-th recv, as MPI orders them.
  std::string mailbox(int src, int dst, int tag) {
    uint64_t n = counts_[{src, dst, tag}]++;
    return "p" + std::to_string(src) + ">" + std::to_string(dst) + "#" + std::to_string(tag) + "." +
           std::to_string(n);
  }

  TcpStore store_;
  int rank_, size_;
  uint64_t seq_ = 0;
  std::map<std::tuple<int, int, int>, uint64_t> counts_;
};

std::string env_str(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

bool rendezvous_env_set() { return !env_str("MASTER_ADDR").empty() && !env_str("MASTER_PORT").empty(); }

std::unique_ptr<Transport> make_tcp_transport(int rank, int world, double timeout_s) {
  const char* fn = "init_process_group";
  if (rank < 0 || world < 1)
    throw ValueError(errmsg(fn, "a rendezvous over MASTER_ADDR:MASTER_PORT needs RANK and WORLD_SIZE "
                                "(set by pyflame.distributed.run, torchrun or the caller)"));
  if (rank >= world)
    throw ValueError(errmsg(fn, "RANK " + std::to_string(rank) + " is not below WORLD_SIZE " + std::to_string(world)));
  if (!rendezvous_env_set())
    throw ValueError(errmsg(fn, "a rendezvous needs MASTER_ADDR and MASTER_PORT (rank 0's address and a "
                                "free port) when the processes were not started by mpirun"));
  std::string port = env_str("MASTER_PORT");
  char* end = nullptr;
  long p = std::strtol(port.c_str(), &end, 10);
  if (*end || p < 1 || p > 65535)
    throw ValueError(errmsg(fn, "MASTER_PORT='" + port + "' is not a TCP port (1-65535)"));
  return std::make_unique<TcpTransport>(env_str("MASTER_ADDR"), static_cast<int>(p), rank, world, timeout_s);
}

}  // namespace pyflame::distributed::detail
