// The MPI transport (Open MPI on Debian). Every collective is the nonblocking
// MPI-3 form followed by a wait with a deadline, so a rank that died or never
// arrived costs a timeout and a RuntimeError instead of a hang.
#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "distributed/backend.h"
#include "pyflame/errors.h"

namespace pyflame::distributed::detail {

namespace {

// MPI allows one MPI_Init and one MPI_Finalize per process: initialize on the
// first group, finalize at exit unless a timeout left requests in flight (an
// exit without MPI_Finalize makes mpirun end the whole job: no stray ranks).
bool g_broken = false;

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && !g_broken) MPI_Finalize();
}

void ensure_mpi(const char* fn) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (inited) return;
  // Serialized: this transport holds a mutex around every call.
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
    throw RuntimeError(errmsg(fn, "MPI_Init_thread failed"));
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  std::atexit(finalize_at_exit);
}

void check(int rc, const char* fn, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw RuntimeError(errmsg(fn, std::string(what) + " failed: " + std::string(msg, len)));
}

int as_count(size_t n, const char* fn) {
  if (n > static_cast<size_t>(INT_MAX))
    throw ValueError(errmsg(fn, "a buffer of more than 2^31-1 elements; split the tensor"));
  return static_cast<int>(n);
}

MPI_Datatype mpi_type(Dtype t, const char* fn) {
  switch (t) {
    case Dtype::Bool: return MPI_C_BOOL;
    case Dtype::Int8: return MPI_INT8_T;
    case Dtype::Int16: return MPI_INT16_T;
    case Dtype::Int32: return MPI_INT32_T;
    case Dtype::Int64: return MPI_INT64_T;
    case Dtype::UInt8: return MPI_UINT8_T;
    case Dtype::Float32: return MPI_FLOAT;
    case Dtype::Float64: return MPI_DOUBLE;
    default: break;  // 16-bit floats are widened by the caller
  }
  throw ValueError(errmsg(fn, std::string("MPI cannot reduce ") + dtype_name(t)));
}

MPI_Op mpi_op(ReduceOp op, Dtype t) {
  if (t == Dtype::Bool) return op == ReduceOp::Min ? MPI_LAND : MPI_LOR;
  switch (op) {
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
    default: return MPI_SUM;
  }
}

class MpiTransport final : public HostTransport {
 public:
  explicit MpiTransport(double timeout_s) : timeout_(timeout_s) {
    ensure_mpi("init_process_group");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void barrier(const char* fn) override {
    run(fn, "MPI_Ibarrier", [&](MPI_Request* r) { return MPI_Ibarrier(MPI_COMM_WORLD, r); });
  }
  void all_reduce(void* buf, size_t count, Dtype dtype, ReduceOp op, const char* fn) override {
    int n = as_count(count, fn);
    MPI_Datatype t = mpi_type(dtype, fn);
    run(fn, "MPI_Iallreduce", [&](MPI_Request* r) {
      return MPI_Iallreduce(MPI_IN_PLACE, buf, n, t, mpi_op(op, dtype), MPI_COMM_WORLD, r);
    });
  }
  void broadcast(void* buf, size_t bytes, int root, const char* fn) override {
    int n = as_count(bytes, fn);
    run(fn, "MPI_Ibcast", [&](MPI_Request* r) { return MPI_Ibcast(buf, n, MPI_BYTE, root, MPI_COMM_WORLD, r); });
  }
  void all_gather(const void* in, void* out, size_t bytes, const char* fn) override {
    int n = as_count(bytes, fn);
    as_count(bytes * size_, fn);
    run(fn, "MPI_Iallgather", [&](MPI_Request* r) {
      return MPI_Iallgather(in, n, MPI_BYTE, out, n, MPI_BYTE, MPI_COMM_WORLD, r);
    });
  }
  void reduce_scatter(const void* in, void* out, size_t count, Dtype dtype, ReduceOp op,
                      const char* fn) override {
    int n = as_count(count, fn);
    MPI_Datatype t = mpi_type(dtype, fn);
    run(fn, "MPI_Ireduce_scatter_block", [&](MPI_Request* r) {
      return MPI_Ireduce_scatter_block(in, out, n, t, mpi_op(op, dtype), MPI_COMM_WORLD, r);
    });
  }
  void send(const void* buf, size_t bytes, int dst, int tag, const char* fn) override {
    int n = as_count(bytes, fn);
    run(fn, "MPI_Isend", [&](MPI_Request* r) { return MPI_Isend(buf, n, MPI_BYTE, dst, tag, MPI_COMM_WORLD, r); });
  }
  void recv(void* buf, size_t bytes, int src, int tag, const char* fn) override {
    int n = as_count(bytes, fn);
    run(fn, "MPI_Irecv", [&](MPI_Request* r) { return MPI_Irecv(buf, n, MPI_BYTE, src, tag, MPI_COMM_WORLD, r); });
  }

 private:
  // Starts a request and polls it until done or the deadline. Polling (not
  // MPI_Wait) is what makes the timeout possible; the back-off keeps a long
  // idle wait from burning a core that another rank on this machine needs.
  template <typename Start>
  void run(const char* fn, const char* what, Start start) {
    std::lock_guard<std::mutex> lock(mu_);
    if (g_broken)
      throw RuntimeError(errmsg(fn, "the process group timed out earlier and is unusable; exit and restart"));
    MPI_Request req;
    check(start(&req), fn, what);
    auto t0 = std::chrono::steady_clock::now();
    auto deadline = t0 + std::chrono::duration<double>(timeout_);
    int done = 0;
    for (;;) {
      check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), fn, what);
      if (done) return;
      auto now = std::chrono::steady_clock::now();
      if (now > deadline) {
        g_broken = true;
        throw RuntimeError(errmsg(fn, "timed out after " + std::to_string(timeout_) +
                                          " s waiting for the other ranks (a rank died, hangs or "
                                          "skipped this call); the process group is unusable"));
      }
      // MPI progresses large messages only inside MPI_Test: poll tightly at
      // first, then back off for a long wait.
      if (now - t0 < std::chrono::milliseconds(200)) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  double timeout_;
  int rank_ = 0, size_ = 1;
  std::mutex mu_;
};

}  // namespace

std::unique_ptr<Transport> make_mpi_transport(double timeout_s) {
  return std::make_unique<MpiTransport>(timeout_s);
}

bool mpi_compiled() { return true; }

}  // namespace pyflame::distributed::detail
