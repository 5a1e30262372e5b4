// The process group and the tensor side of every collective: evaluation,
// row-major staging, 16-bit widening for reductions, Avg, and the cross-rank
// check of shapes and dtypes (docs/design/distributed.md). Transports
// (backend.h) only move contiguous buffers.
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/backend.h"
#include "distributed/gpu_transport.h"
#include "pyflame/errors.h"
#include "pyflame/ops.h"

namespace pyflame::distributed {

using detail::Transport;

namespace {

std::mutex g_mu;
std::shared_ptr<Transport> g_transport;

std::shared_ptr<Transport> transport(const char* fn) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_transport)
    throw RuntimeError(errmsg(fn, "the default process group is not initialized; call init_process_group() first"));
  return g_transport;
}

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end || x < 0) throw ValueError(errmsg("init_process_group", std::string(name) + "='" + v + "' is not a rank"));
  return static_cast<int>(x);
}

// ---- cross-rank checks: every rank sends what it passed; all compare ----

constexpr int kMaxDims = 8;
struct Signature {
  int64_t call, op, dtype, ndim, extra;
  int64_t dims[kMaxDims];
};

const char* kCalls[] = {"all_reduce", "broadcast", "all_gather", "reduce_scatter", "send"};
enum Call : int64_t { AllReduce, Broadcast, AllGather, ReduceScatter, Send };

Signature signature(Call call, const Tensor& x, int64_t op, int64_t extra) {
  Signature s{call, op, static_cast<int64_t>(x.dtype()), x.ndim(), extra, {}};
  for (int i = 0; i < x.ndim(); ++i) {
    if (i < kMaxDims) s.dims[i] = x.shape()[i];
    else s.dims[kMaxDims - 1] = s.dims[kMaxDims - 1] * 1000003 + x.shape()[i];  // folded
  }
  return s;
}

// "float32 (2,3)"
std::string describe_value(const Signature& s) {
  if (s.dtype < 0 || s.dtype >= kNumDtypes) return "an unknown value";
  std::string out = std::string(dtype_name(static_cast<Dtype>(s.dtype))) + " (";
  for (int64_t i = 0; i < s.ndim && i < kMaxDims; ++i) out += (i ? "," : "") + std::to_string(s.dims[i]);
  if (s.ndim > kMaxDims) out += ",...";
  return out + ")";
}

// "broadcast with float32 (2,3) from rank 1"
std::string describe(const Signature& s) {
  if (s.call < 0 || s.call > Send) return "an unknown call";
  std::string out = std::string(kCalls[s.call]) + " with " + describe_value(s);
  if (s.call == Broadcast) out += " from rank " + std::to_string(s.extra);
  return out;
}

bool same(const Signature& a, const Signature& b) { return std::memcmp(&a, &b, sizeof(Signature)) == 0; }

// Raises ValueError on every rank alike (all see all signatures), so a
// mismatch leaves the group usable.
void check_same(Transport& t, const char* fn, const Signature& mine) {
  if (t.size() == 1) return;
  std::vector<Signature> all(t.size());
  t.host_all_gather(&mine, all.data(), sizeof(Signature), fn);
  for (int r = 1; r < t.size(); ++r) {
    if (!same(all[r], all[0]))
      throw ValueError(errmsg(fn, "ranks disagree: rank 0 called " + describe(all[0]) + ", rank " +
                                      std::to_string(r) + " called " + describe(all[r])));
  }
}

// ---- staging: contiguous buffers on the transport's side ----

bool widen(Dtype t) { return t == Dtype::Float16 || t == Dtype::BFloat16; }

void check_op(const Tensor& x, ReduceOp op, const char* fn) {
  if (op == ReduceOp::Avg && !is_floating(x.dtype()))
    throw ValueError(errmsg(fn, std::string("op=avg needs a floating-point tensor, got ") + dtype_name(x.dtype())));
}

// The reduced sum becomes the average; 16-bit inputs come back to their dtype.
Tensor finish_reduce(Tensor r, Dtype dtype, ReduceOp op, int world) {
  if (op == ReduceOp::Avg) r = div(r, scalar(static_cast<double>(world), r.dtype(), r.device()));
  return r.dtype() == dtype ? r : astype(r, dtype);
}

std::vector<uint8_t> to_host(const Tensor& x) {
  std::vector<uint8_t> buf(x.nbytes());
  if (!buf.empty()) x.copy_to_host(buf.data());
  return buf;
}

Tensor from_host(const void* data, const Shape& shape, Dtype dtype, Device device) {
  Tensor t = Tensor::from_host(data, shape, dtype);
  return device.is_cpu() ? t : to_device(t, device);
}

}  // namespace

// ---- the group ----

namespace {
bool launched_by_mpi() { return detail::mpi_env_size() > 0; }

// 'auto': the GPU library where it works; else the store for several
// processes that mpirun did not start; else MPI (also a world of one).
std::string pick_auto(int world) {
  if (detail::gpu_collectives_usable()) return detail::gpu_collectives_name();
  return world > 1 && !launched_by_mpi() ? "tcp" : "mpi";
}

// The host side of a GPU group (rank 0's unique id, the cross-rank checks):
// MPI under mpirun, else the rendezvous store at MASTER_ADDR:MASTER_PORT;
// none in a world of one.
std::unique_ptr<Transport> host_transport(int rank, int world, double timeout_s) {
  if (launched_by_mpi() && detail::mpi_compiled()) {
    if (detail::mpi_env_size() > 1 || world > 1) return detail::make_mpi_transport(timeout_s);
    return nullptr;
  }
  if (world > 1) return detail::make_tcp_transport(rank, world, timeout_s);
  return nullptr;
}
}  // namespace

bool mpi_available() { return detail::mpi_compiled(); }
bool gpu_collectives_available() { return detail::gpu_collectives_compiled(); }

void init_process_group(const InitOptions& opts) {
  const char* fn = "init_process_group";
  if (opts.timeout_s <= 0) throw ValueError(errmsg(fn, "timeout must be positive"));
  std::string backend = opts.backend;
  if (backend != "auto" && backend != "mpi" && backend != "tcp" && backend != "nccl" && backend != "rccl")
    throw ValueError(errmsg(fn, "unknown backend '" + backend +
                                    "' (expected 'mpi', 'tcp', 'nccl', 'rccl' or 'auto')"));
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_transport) throw RuntimeError(errmsg(fn, "the default process group is already initialized"));
  int rank = opts.rank >= 0 ? opts.rank : env_int("RANK");
  int world = opts.world_size >= 0 ? opts.world_size : env_int("WORLD_SIZE");
  if (backend == "auto") backend = pick_auto(world);
  std::shared_ptr<Transport> t;
  if (backend == "mpi") {
    // MPI's own launcher (mpirun, or pyflame.distributed.run, which uses it)
    // must have started this process unless the world is one process.
    if (world > 1 && detail::mpi_env_size() < 0)
      throw RuntimeError(errmsg(fn, "backend 'mpi' with WORLD_SIZE=" + std::to_string(world) +
                                        " needs processes started by mpirun (or python -m "
                                        "pyflame.distributed.run with mpirun installed); processes started "
                                        "otherwise meet over MASTER_ADDR:MASTER_PORT with backend 'tcp' or "
                                        "'nccl'/'rccl'"));
    t = detail::make_mpi_transport(opts.timeout_s);
  } else if (backend == "tcp") {
    t = detail::make_tcp_transport(rank, world, opts.timeout_s);
  } else {
    if (backend != detail::gpu_collectives_name())
      throw ValueError(errmsg(fn, "backend '" + backend + "' is not this build's GPU library (" +
                                      (detail::gpu_collectives_compiled() ? detail::gpu_collectives_name()
                                                                          : std::string("none")) + ")"));
    if (!detail::gpu_collectives_compiled())
      throw RuntimeError(errmsg(fn, "this build of PyFlame has no NCCL/RCCL; use backend='mpi' or 'tcp'"));
    t = detail::make_gpu_transport(host_transport(rank, world, opts.timeout_s), opts.timeout_s);
  }
  if ((world >= 0 && world != t->size()) || (rank >= 0 && rank != t->rank()))
    throw RuntimeError(errmsg(fn, "RANK/WORLD_SIZE (" + std::to_string(rank) + "/" + std::to_string(world) +
                                      ") disagree with the launcher's (" + std::to_string(t->rank()) + "/" +
                                      std::to_string(t->size()) + ")"));
  g_transport = std::move(t);
}

bool is_initialized() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_transport != nullptr;
}

void destroy_process_group() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_transport.reset();
}

std::string get_backend() { return transport("get_backend")->name(); }
int get_rank() { return transport("get_rank")->rank(); }
int get_world_size() { return transport("get_world_size")->size(); }

void barrier() { transport("barrier")->barrier("barrier"); }

// ---- collectives ----
// Host transports stage through row-major host copies; GPU transports get
// device buffers from gpu_transport (evaluated, row-major, on its stream).

namespace {
// A result that exists already (host transports complete before returning).
class Completed final : public Work {
 public:
  explicit Completed(Tensor r) : r_(std::move(r)) {}
  bool is_completed() override { return true; }
  Tensor wait() override { return r_; }

 private:
  Tensor r_;
};

// A GPU collective in flight and what the result needs afterwards (Avg's
// division, 16-bit rounding): ops that must not read the buffer before the
// collective is done, so they are recorded at wait().
class Then final : public Work {
 public:
  Then(std::shared_ptr<Work> inner, std::function<Tensor(Tensor)> finish)
      : inner_(std::move(inner)), finish_(std::move(finish)) {}
  bool is_completed() override { return inner_->is_completed(); }
  Tensor wait() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!result_.defined()) result_ = finish_(inner_->wait());
    return result_;
  }

 private:
  std::shared_ptr<Work> inner_;
  std::function<Tensor(Tensor)> finish_;
  std::mutex mu_;
  Tensor result_;
};
}  // namespace

std::shared_ptr<Work> all_reduce_async(const Tensor& x, ReduceOp op) {
  const char* fn = "all_reduce";
  auto t = transport(fn);
  check_op(x, op, fn);
  check_same(*t, fn, signature(AllReduce, x, static_cast<int64_t>(op), 0));
  Tensor w = widen(x.dtype()) ? astype(x, Dtype::Float32) : x;
  Dtype dtype = x.dtype();
  int world = t->size();
  if (t->on_gpu()) {
    return std::make_shared<Then>(detail::gpu_all_reduce_start(t, w, op, fn),
                                  [=](Tensor r) { return finish_reduce(r, dtype, op, world); });
  }
  auto buf = to_host(w);
  t->all_reduce(buf.data(), w.size(), w.dtype(), op, fn);
  Tensor r = finish_reduce(from_host(buf.data(), w.shape(), w.dtype(), x.device()), dtype, op, world);
  r.eval();
  return std::make_shared<Completed>(r);
}

Tensor all_reduce(const Tensor& x, ReduceOp op) { return all_reduce_async(x, op)->wait(); }

std::shared_ptr<Work> broadcast_async(const Tensor& x, int src) {
  const char* fn = "broadcast";
  auto t = transport(fn);
  if (src < 0 || src >= t->size())
    throw ValueError(errmsg(fn, "src " + std::to_string(src) + " is not a rank of a group of " + std::to_string(t->size())));
  check_same(*t, fn, signature(Broadcast, x, 0, src));
  if (t->on_gpu()) return detail::gpu_broadcast_start(t, x, src, fn);
  auto buf = to_host(x);
  t->broadcast(buf.data(), buf.size(), src, fn);
  return std::make_shared<Completed>(from_host(buf.data(), x.shape(), x.dtype(), x.device()));
}

Tensor broadcast(const Tensor& x, int src) { return broadcast_async(x, src)->wait(); }

Tensor all_gather(const Tensor& x) {
  const char* fn = "all_gather";
  auto t = transport(fn);
  check_same(*t, fn, signature(AllGather, x, 0, 0));
  Shape shape = x.shape();
  shape.insert(shape.begin(), t->size());
  if (t->on_gpu()) return detail::gpu_all_gather(*t, x, shape, fn);
  auto buf = to_host(x);
  std::vector<uint8_t> out(buf.size() * t->size());
  t->all_gather(buf.data(), out.data(), buf.size(), fn);
  return from_host(out.data(), shape, x.dtype(), x.device());
}

Tensor reduce_scatter(const Tensor& x, ReduceOp op) {
  const char* fn = "reduce_scatter";
  auto t = transport(fn);
  check_op(x, op, fn);
  if (x.ndim() == 0 || x.shape()[0] % t->size() != 0)
    throw ValueError(errmsg(fn, "the input's first axis must be a multiple of the world size " +
                                    std::to_string(t->size()) + ", got shape " + shape_str(x.shape())));
  check_same(*t, fn, signature(ReduceScatter, x, static_cast<int64_t>(op), 0));
  Shape shape = x.shape();
  shape[0] /= t->size();
  Tensor w = widen(x.dtype()) ? astype(x, Dtype::Float32) : x;
  Tensor r;
  if (t->on_gpu()) {
    r = detail::gpu_reduce_scatter(*t, w, shape, op, fn);
  } else {
    auto buf = to_host(w);
    std::vector<uint8_t> out(buf.size() / t->size());
    t->reduce_scatter(buf.data(), out.data(), w.size() / t->size(), w.dtype(), op, fn);
    r = from_host(out.data(), shape, w.dtype(), x.device());
  }
  return finish_reduce(r, x.dtype(), op, t->size());
}

// Point to point: the sender's signature goes first (tag 2*tag+1), then the
// data (tag 2*tag); a receiver expecting another shape drains the data and
// raises, so the pair stays in step.
namespace {
void check_peer(const Transport& t, int peer, const char* fn, const char* what) {
  if (peer < 0 || peer >= t.size() || peer == t.rank())
    throw ValueError(errmsg(fn, std::string(what) + " " + std::to_string(peer) + " is not another rank of a group of " +
                                    std::to_string(t.size())));
}
void check_tag(int tag, const char* fn) {
  if (tag < 0 || tag > (1 << 20)) throw ValueError(errmsg(fn, "tag must be in [0, 2^20]"));
}
}  // namespace

void send(const Tensor& x, int dst, int tag) {
  const char* fn = "send";
  auto t = transport(fn);
  check_peer(*t, dst, fn, "dst");
  check_tag(tag, fn);
  Signature s = signature(Send, x, 0, 0);
  t->host_send(&s, sizeof(s), dst, 2 * tag + 1, fn);
  if (t->on_gpu()) return detail::gpu_send(*t, x, dst, fn);
  auto buf = to_host(x);
  t->send(buf.data(), buf.size(), dst, 2 * tag, fn);
}

Tensor recv(const Tensor& like, int src, int tag) {
  const char* fn = "recv";
  auto t = transport(fn);
  check_peer(*t, src, fn, "src");
  check_tag(tag, fn);
  Signature s{}, mine = signature(Send, like, 0, 0);
  t->host_recv(&s, sizeof(s), src, 2 * tag + 1, fn);
  if (!same(s, mine)) {
    size_t bytes = itemsize(static_cast<Dtype>(s.dtype));
    for (int64_t i = 0; i < s.ndim && i < kMaxDims; ++i) bytes *= s.dims[i];
    if (s.ndim <= kMaxDims) {  // drain what was sent
      Tensor scratch = zeros({static_cast<int64_t>(bytes)}, Dtype::UInt8, like.device());
      if (t->on_gpu()) detail::gpu_recv(*t, scratch, src, fn);
      else {
        std::vector<uint8_t> sink(bytes);
        t->recv(sink.data(), bytes, src, 2 * tag, fn);
      }
    }
    throw ValueError(errmsg(fn, "rank " + std::to_string(src) + " sent " + describe_value(s) + " but this rank expects " +
                                    describe_value(mine)));
  }
  if (t->on_gpu()) return detail::gpu_recv(*t, like, src, fn);
  std::vector<uint8_t> buf(like.nbytes());
  t->recv(buf.data(), buf.size(), src, 2 * tag, fn);
  return from_host(buf.data(), like.shape(), like.dtype(), like.device());
}

namespace detail {

// Open MPI's and PMI's names (mpirun, srun).
int mpi_env_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* v = std::getenv(name)) return std::atoi(v);
  return -1;
}
int mpi_env_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(name)) return std::atoi(v);
  return -1;
}

}  // namespace detail
}  // namespace pyflame::distributed
