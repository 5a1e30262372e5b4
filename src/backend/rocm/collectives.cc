// The GPU transport of pyflame::distributed: NCCL on NVIDIA, RCCL on AMD, through
// gpu/ccl.h (docs/design/distributed.md). Each collective is enqueued on the stream the
// device's work uses (current_stream: the evaluation's stream inside one, the device's shared
// stream otherwise), after its input was evaluated on it; the call then polls the stream with
// the group's deadline, so a dead or stalled rank raises instead of hanging (the communicator
// is aborted). Host-side exchanges (the unique id, the cross-rank checks) go through the host
// transport: MPI under mpirun, else the rendezvous store (tcp.cc).
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <type_traits>
#include <utility>

#include "backend/rocm/context.h"
#include "backend/rocm/gpu/ccl.h"
#include "distributed/gpu_transport.h"
#include "pyflame/backend/rocm.h"
#include "pyflame/errors.h"
#include "pyflame/ops.h"

namespace pyflame::gpu {

const CclApi* ccl_api(std::string* error) {
  static std::string why;
  static const CclApi* api = []() -> const CclApi* {
    void* lib = dlopen(kCclLibrary, RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
      const char* e = dlerror();
      why = std::string("cannot open ") + kCclLibrary + ": " + (e ? e : "not found");
      return nullptr;
    }
    static CclApi a;
    auto load = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn) why += std::string(why.empty() ? "" : ", ") + kCclLibrary + " lacks " + name;
    };
    load(a.get_unique_id, "ncclGetUniqueId");
    load(a.comm_init_rank, "ncclCommInitRank");
    load(a.comm_destroy, "ncclCommDestroy");
    load(a.comm_abort, "ncclCommAbort");
    load(a.comm_get_async_error, "ncclCommGetAsyncError");
    load(a.get_error_string, "ncclGetErrorString");
    load(a.all_reduce, "ncclAllReduce");
    load(a.broadcast, "ncclBroadcast");
    load(a.all_gather, "ncclAllGather");
    load(a.reduce_scatter, "ncclReduceScatter");
    load(a.send, "ncclSend");
    load(a.recv, "ncclRecv");
    load(a.group_start, "ncclGroupStart");
    load(a.group_end, "ncclGroupEnd");
    return why.empty() ? &a : nullptr;
  }();
  if (!api && error) *error = why;
  return api;
}

}  // namespace pyflame::gpu

namespace pyflame::distributed::detail {

namespace {

namespace r = pyflame::backend::rocm;
using gpu::CclApi;

ncclDataType_t ccl_type(Dtype t, const char* fn) {
  switch (t) {
    case Dtype::Bool: return ncclUint8;  // 0/1: reduced with max (or) and min (and)
    case Dtype::UInt8: return ncclUint8;
    case Dtype::Int8: return ncclInt8;
    case Dtype::Int32: return ncclInt32;
    case Dtype::Int64: return ncclInt64;
    case Dtype::Float16: return ncclFloat16;
    case Dtype::BFloat16: return ncclBfloat16;
    case Dtype::Float32: return ncclFloat32;
    case Dtype::Float64: return ncclFloat64;
    default: break;
  }
  throw ValueError(errmsg(fn, std::string(gpu::kCclName) + " cannot reduce " + dtype_name(t)));
}

ncclRedOp_t ccl_op(ReduceOp op, Dtype t) {
  if (t == Dtype::Bool) return op == ReduceOp::Min ? ncclMin : ncclMax;
  switch (op) {
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
    default: return ncclSum;
  }
}

int local_rank() {
  for (const char* name : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"})
    if (const char* v = std::getenv(name)) return std::atoi(v);
  return 0;
}

class CclTransport final : public Transport {
 public:
  CclTransport(const CclApi* api, int rank, int world, int device, double timeout_s,
               std::unique_ptr<Transport> host)
      : api_(api), rank_(rank), size_(world), device_(device), timeout_(timeout_s), host_(std::move(host)) {
    ncclUniqueId id;
    if (rank_ == 0) check(api_->get_unique_id(&id), "init_process_group", "ncclGetUniqueId");
    if (size_ > 1) host_->broadcast(&id, sizeof(id), 0, "init_process_group");
    PF_HIP_CHECK(hipSetDevice(device_));
    PF_HIP_CHECK(hipStreamCreateWithFlags(&stream_, hipStreamNonBlocking));
    check(api_->comm_init_rank(&comm_, size_, id, rank_), "init_process_group", "ncclCommInitRank");
  }
  ~CclTransport() override {
    (void)hipSetDevice(device_);  // no throwing guard: this may run at exit, runtime unloading
    if (comm_ && !broken_) {
      (void)hipStreamSynchronize(stream_);  // outstanding work first
      api_->comm_destroy(comm_);
    }
    (void)hipStreamDestroy(stream_);
  }
  std::string name() const override { return gpu::kCclName; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool on_gpu() const override { return true; }
  int device() const { return device_; }

  void barrier(const char* fn) override {
    Tensor one = zeros({1}, Dtype::Float32, Device::rocm(device_));
    one.eval();
    all_reduce(one.raw_data(), 1, Dtype::Float32, ReduceOp::Sum, fn);
  }
  void all_reduce(void* buf, size_t count, Dtype dtype, ReduceOp op, const char* fn) override {
    finish(start_all_reduce(buf, count, dtype, op, fn), fn, "ncclAllReduce");
  }
  void broadcast(void* buf, size_t bytes, int root, const char* fn) override {
    finish(start_broadcast(buf, bytes, root, fn), fn, "ncclBroadcast");
  }
  void all_gather(const void* in, void* out, size_t bytes, const char* fn) override {
    run(fn, "ncclAllGather", [&](hipStream_t s) { return api_->all_gather(in, out, bytes, ncclUint8, comm_, s); });
  }
  void reduce_scatter(const void* in, void* out, size_t count, Dtype dtype, ReduceOp op, const char* fn) override {
    run(fn, "ncclReduceScatter", [&](hipStream_t s) {
      return api_->reduce_scatter(in, out, count, ccl_type(dtype, fn), ccl_op(op, dtype), comm_, s);
    });
  }
  void send(const void* buf, size_t bytes, int dst, int, const char* fn) override {
    run(fn, "ncclSend", [&](hipStream_t s) { return api_->send(buf, bytes, ncclUint8, dst, comm_, s); });
  }
  void recv(void* buf, size_t bytes, int src, int, const char* fn) override {
    run(fn, "ncclRecv", [&](hipStream_t s) { return api_->recv(buf, bytes, ncclUint8, src, comm_, s); });
  }
  void host_all_gather(const void* in, void* out, size_t bytes, const char* fn) override {
    if (size_ == 1) std::memcpy(out, in, bytes);
    else host_->host_all_gather(in, out, bytes, fn);
  }
  void host_send(const void* buf, size_t bytes, int dst, int tag, const char* fn) override {
    host_->host_send(buf, bytes, dst, tag, fn);  // size 1: check_peer refused already
  }
  void host_recv(void* buf, size_t bytes, int src, int tag, const char* fn) override {
    host_->host_recv(buf, bytes, src, tag, fn);
  }

 private:
  void check(ncclResult_t rc, const char* fn, const char* what) {
    if (rc != ncclSuccess)
      throw RuntimeError(errmsg(fn, std::string(what) + " failed: " + api_->get_error_string(rc)));
  }

  // Enqueues on the communicator's stream after the device's current stream
  // (the input's producer); returns the event that marks it done.
  template <typename Enqueue>
  hipEvent_t start(const char* fn, const char* what, Enqueue enqueue) {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_)
      throw RuntimeError(errmsg(fn, "the process group failed earlier and is unusable; exit and restart"));
    r::DeviceGuard guard(device_);
    hipEvent_t ready = nullptr, done = nullptr;
    PF_HIP_CHECK(hipEventCreateWithFlags(&ready, hipEventDisableTiming));
    PF_HIP_CHECK(hipEventRecord(ready, r::current_stream(device_)));
    PF_HIP_CHECK(hipStreamWaitEvent(stream_, ready, 0));
    PF_HIP_CHECK(hipEventDestroy(ready));  // released once complete
    check(enqueue(stream_), fn, what);
    PF_HIP_CHECK(hipEventCreateWithFlags(&done, hipEventDisableTiming));
    PF_HIP_CHECK(hipEventRecord(done, stream_));
    return done;
  }

 public:
  bool finished(hipEvent_t done) {
    r::DeviceGuard guard(device_);
    hipError_t e = hipEventQuery(done);
    if (gpu::still_running(e)) return false;
    PF_HIP_CHECK(e);
    return true;
  }

  // Polls `done` until it completes, the communicator reports an error, or
  // the deadline (then aborts it); then orders the device's stream after it.
  void wait(hipEvent_t done, const char* fn, const char* what) {
    r::DeviceGuard guard(device_);
    auto t0 = std::chrono::steady_clock::now();
    auto deadline = t0 + std::chrono::duration<double>(timeout_);
    for (int spins = 0;; ++spins) {
      hipError_t e = hipEventQuery(done);
      if (e == hipSuccess) break;
      if (!gpu::still_running(e)) PF_HIP_CHECK(e);
      bool late = std::chrono::steady_clock::now() > deadline;
      std::lock_guard<std::mutex> lock(mu_);
      ncclResult_t async = ncclSuccess;
      if (comm_) api_->comm_get_async_error(comm_, &async);
      if (async != ncclSuccess || late || broken_) {
        bool first = !broken_;
        broken_ = true;
        if (comm_) api_->comm_abort(comm_);
        comm_ = nullptr;
        throw RuntimeError(errmsg(fn, late ? "timed out after " + std::to_string(timeout_) +
                                                 " s waiting for the other ranks (a rank died, hangs or skipped "
                                                 "this call); the process group is unusable"
                                  : !first ? std::string("the process group failed meanwhile and is unusable")
                                           : std::string(what) + " failed: " + api_->get_error_string(async)));
      }
      if (spins < 1000) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    PF_HIP_CHECK(hipStreamWaitEvent(r::current_stream(device_), done, 0));
  }

  // Where an unwaited collective's buffer goes back to the allocator: the
  // device's stream must not reuse it before the collective is done.
  // Never throws (destructors, error paths).
  void release(hipEvent_t done) noexcept {
    (void)hipSetDevice(device_);
    try {
      (void)hipStreamWaitEvent(r::current_stream(device_), done, 0);
    } catch (...) {  // no device context left (exit): nothing reuses the buffer either
    }
    (void)hipEventDestroy(done);
  }

  hipEvent_t start_all_reduce(void* buf, size_t count, Dtype dtype, ReduceOp op, const char* fn) {
    return start(fn, "ncclAllReduce", [&](hipStream_t s) {
      return api_->all_reduce(buf, buf, count, ccl_type(dtype, fn), ccl_op(op, dtype), comm_, s);
    });
  }
  hipEvent_t start_broadcast(void* buf, size_t bytes, int root, const char* fn) {
    return start(fn, "ncclBroadcast",
                 [&](hipStream_t s) { return api_->broadcast(buf, buf, bytes, ncclUint8, root, comm_, s); });
  }

 private:
  template <typename Enqueue>
  void run(const char* fn, const char* what, Enqueue enqueue) {
    finish(start(fn, what, enqueue), fn, what);
  }
  void finish(hipEvent_t done, const char* fn, const char* what) {
    try {
      wait(done, fn, what);
    } catch (...) {
      release(done);
      throw;
    }
    (void)hipEventDestroy(done);
  }

  const CclApi* api_;
  int rank_, size_, device_;
  double timeout_;
  std::unique_ptr<Transport> host_;  // MPI or the store: the id and the checks (null in a world of one)
  ncclComm_t comm_ = nullptr;
  hipStream_t stream_ = nullptr;  // the communicator's: every collective, in issue order
  bool broken_ = false;
  std::mutex mu_;
};

CclTransport& ccl(Transport& t) { return static_cast<CclTransport&>(t); }

// The input evaluated and row-major on the communicator's device.
Tensor staged(const Tensor& x, CclTransport& t, const char* fn) {
  if (!x.device().is_gpu() || x.device().index != t.device())
    throw ValueError(errmsg(fn, "backend '" + t.name() + "' of this process works on rocm:" +
                                    std::to_string(t.device()) + ", the tensor is on " + x.device().str() +
                                    (x.device().is_cpu() ? " (use backend='mpi' for CPU tensors)" : "")));
  Tensor c = contiguous(x);
  c.eval();
  return c;
}

// A new buffer on the device, ordered on its stream before the collective.
Tensor fresh(const Shape& shape, Dtype dtype, const CclTransport& t) {
  Tensor z = zeros(shape, dtype, Device::rocm(t.device()));
  z.eval();
  return z;
}

}  // namespace

bool gpu_collectives_compiled() { return true; }
bool gpu_collectives_usable() { return r::is_available() && gpu::ccl_api(nullptr) != nullptr; }
std::string gpu_collectives_name() { return gpu::kCclName; }

std::unique_ptr<Transport> make_gpu_transport(std::unique_ptr<Transport> host, double timeout_s) {
  const char* fn = "init_process_group";
  std::string why;
  const CclApi* api = gpu::ccl_api(&why);
  if (!api)
    throw RuntimeError(errmsg(fn, std::string("backend '") + gpu::kCclName + "': " + why +
                                      " (NVIDIA: pip install nvidia-nccl-cu13, or a system NCCL on the "
                                      "library path; AMD: ROCm's librccl)"));
  if (!r::is_available()) throw RuntimeError(errmsg(fn, std::string("backend '") + gpu::kCclName + "' needs a GPU"));
  int rank = host ? host->rank() : 0;
  int world = host ? host->size() : 1;
  int device = local_rank() % r::get_device_count();
  return std::make_unique<CclTransport>(api, rank, world, device, timeout_s, std::move(host));
}

namespace {
// A fresh device copy of x, which an in-place collective then overwrites.
Tensor staged_copy(const Tensor& x, CclTransport& c, const char* fn) {
  Tensor in = staged(x, c, fn);
  Tensor out = fresh(in.shape(), in.dtype(), c);
  if (in.size() == 0) return out;
  PF_HIP_CHECK(hipMemcpyAsync(out.raw_data(), in.raw_data(), in.nbytes(), hipMemcpyDeviceToDevice,
                              r::current_stream(c.device())));
  return out;
}
}  // namespace

namespace {
// A collective in flight on the communicator's stream, writing `out`.
class CclWork final : public Work {
 public:
  CclWork(std::shared_ptr<Transport> t, hipEvent_t done, Tensor out, const char* fn, const char* what)
      : t_(std::move(t)), done_(done), out_(std::move(out)), fn_(fn), what_(what) {}
  ~CclWork() override {
    if (done_) ccl(*t_).release(done_);
  }
  bool is_completed() override {
    std::lock_guard<std::mutex> lock(mu_);
    return !done_ || ccl(*t_).finished(done_);
  }
  Tensor wait() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) {
      hipEvent_t done = std::exchange(done_, nullptr);
      try {
        ccl(*t_).wait(done, fn_, what_);
      } catch (...) {
        ccl(*t_).release(done);
        throw;
      }
      (void)hipEventDestroy(done);
    }
    return out_;
  }

 private:
  std::shared_ptr<Transport> t_;
  hipEvent_t done_;  // null once waited (or for an empty tensor)
  Tensor out_;
  const char* fn_;
  const char* what_;
  std::mutex mu_;
};
}  // namespace

std::shared_ptr<Work> gpu_all_reduce_start(std::shared_ptr<Transport> t, const Tensor& x, ReduceOp op,
                                           const char* fn) {
  CclTransport& c = ccl(*t);
  Tensor out = staged_copy(x, c, fn);
  hipEvent_t done = out.size() > 0 ? c.start_all_reduce(out.raw_data(), out.size(), out.dtype(), op, fn) : nullptr;
  return std::make_shared<CclWork>(std::move(t), done, out, fn, "ncclAllReduce");
}

std::shared_ptr<Work> gpu_broadcast_start(std::shared_ptr<Transport> t, const Tensor& x, int src, const char* fn) {
  CclTransport& c = ccl(*t);
  Tensor out = staged_copy(x, c, fn);
  hipEvent_t done = out.size() > 0 ? c.start_broadcast(out.raw_data(), out.nbytes(), src, fn) : nullptr;
  return std::make_shared<CclWork>(std::move(t), done, out, fn, "ncclBroadcast");
}

Tensor gpu_all_gather(Transport& t, const Tensor& x, const Shape& out_shape, const char* fn) {
  CclTransport& c = ccl(t);
  Tensor in = staged(x, c, fn);
  Tensor out = fresh(out_shape, in.dtype(), c);
  if (in.size() > 0) c.all_gather(in.raw_data(), out.raw_data(), in.nbytes(), fn);
  return out;
}

Tensor gpu_reduce_scatter(Transport& t, const Tensor& x, const Shape& out_shape, ReduceOp op, const char* fn) {
  CclTransport& c = ccl(t);
  Tensor in = staged(x, c, fn);
  Tensor out = fresh(out_shape, in.dtype(), c);
  if (out.size() > 0) c.reduce_scatter(in.raw_data(), out.raw_data(), out.size(), in.dtype(), op, fn);
  return out;
}

void gpu_send(Transport& t, const Tensor& x, int dst, const char* fn) {
  CclTransport& c = ccl(t);
  Tensor in = staged(x, c, fn);
  if (in.size() > 0) c.send(in.raw_data(), in.nbytes(), dst, 0, fn);
}

Tensor gpu_recv(Transport& t, const Tensor& like, int src, const char* fn) {
  CclTransport& c = ccl(t);
  if (!like.device().is_gpu() || like.device().index != c.device()) staged(like, c, fn);  // raises
  Tensor out = fresh(like.shape(), like.dtype(), c);
  if (out.size() > 0) c.recv(out.raw_data(), out.nbytes(), src, 0, fn);
  return out;
}

}  // namespace pyflame::distributed::detail
