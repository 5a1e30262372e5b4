// The transport under pyflame::distributed: collectives on contiguous
// buffers. process_group.cc does the tensor work (evaluation, layout, dtype
// widening, cross-rank checks) once for every transport.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "pyflame/distributed.h"

namespace pyflame::distributed::detail {

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Whether buffers live on the GPU (device pointers) or on the host.
  virtual bool on_gpu() const = 0;

  // Every call raises RuntimeError("[fn] ...") when it waits longer than the
  // group's timeout; the transport is unusable afterwards.
  virtual void barrier(const char* fn) = 0;
  // In place; op is Sum, Max or Min (Avg is a Sum divided afterwards). Bool
  // buffers reduce as logical or (Sum, Max) and and (Min).
  virtual void all_reduce(void* buf, size_t count, Dtype dtype, ReduceOp op, const char* fn) = 0;
  virtual void broadcast(void* buf, size_t bytes, int root, const char* fn) = 0;
  // out holds size() blocks of `bytes`, in rank order.
  virtual void all_gather(const void* in, void* out, size_t bytes, const char* fn) = 0;
  // in holds size() blocks of `count` elements; out gets this rank's block reduced.
  virtual void reduce_scatter(const void* in, void* out, size_t count, Dtype dtype, ReduceOp op,
                              const char* fn) = 0;
  virtual void send(const void* buf, size_t bytes, int dst, int tag, const char* fn) = 0;
  virtual void recv(void* buf, size_t bytes, int src, int tag, const char* fn) = 0;
  // Small host-side exchanges for the cross-rank checks, whatever the transport.
  virtual void host_all_gather(const void* in, void* out, size_t bytes, const char* fn) = 0;
  virtual void host_send(const void* buf, size_t bytes, int dst, int tag, const char* fn) = 0;
  virtual void host_recv(void* buf, size_t bytes, int src, int tag, const char* fn) = 0;
};

// A transport whose buffers are host memory: its host exchanges are its own.
class HostTransport : public Transport {
 public:
  bool on_gpu() const override { return false; }
  void host_all_gather(const void* in, void* out, size_t bytes, const char* fn) override {
    all_gather(in, out, bytes, fn);
  }
  void host_send(const void* buf, size_t bytes, int dst, int tag, const char* fn) override {
    send(buf, bytes, dst, tag, fn);
  }
  void host_recv(void* buf, size_t bytes, int src, int tag, const char* fn) override {
    recv(buf, bytes, src, tag, fn);
  }
};

// MPI (mpi.cc, or no_mpi.cc where the build has no MPI). Initializes MPI once
// per process; timeout_s bounds every wait.
std::unique_ptr<Transport> make_mpi_transport(double timeout_s);
bool mpi_compiled();
// Rank and size from the launcher's environment (OMPI_COMM_WORLD_*, PMI_*,
// PMIX_RANK), -1 when absent: whether MPI started this process.
int mpi_env_rank();
int mpi_env_size();

// The 'tcp' transport (tcp.cc): a rendezvous at MASTER_ADDR:MASTER_PORT, where
// rank 0 serves the store; every exchange goes through it. Also the host
// side of NCCL/RCCL groups whose processes mpirun did not start.
std::unique_ptr<Transport> make_tcp_transport(int rank, int world, double timeout_s);
bool rendezvous_env_set();  // MASTER_ADDR and MASTER_PORT both set

}  // namespace pyflame::distributed::detail
