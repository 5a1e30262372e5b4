// Distributed collectives over process groups (docs/design/distributed.md).
// CPU tensors travel through MPI (Open MPI) or, without it, the rendezvous
// store ('tcp'); GPU tensors through NCCL on NVIDIA and RCCL on AMD, on the
// communicator's stream ordered after the evaluation's. Collectives are
// eager: they evaluate their input and return an evaluated result.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "pyflame/tensor.h"

namespace pyflame::distributed {

enum class ReduceOp { Sum, Avg, Max, Min };

struct InitOptions {
  // "mpi", "tcp", "nccl", "rccl" or "auto" (the GPU library where the build
  // has one and LOCAL_RANK's GPU exists, else MPI under mpirun, else "tcp").
  std::string backend = "auto";
  // A collective that waits longer than this (a rank died or never came)
  // raises RuntimeError instead of hanging; the group is unusable after it.
  double timeout_s = 1800.0;
  // -1: from RANK / WORLD_SIZE or MPI's environment (OMPI_COMM_WORLD_*, PMI_*).
  int rank = -1;
  int world_size = -1;
};

// Joins the process group. Under mpirun, rank and size come from MPI; the
// environment's RANK / WORLD_SIZE must agree. Otherwise the processes meet
// at MASTER_ADDR:MASTER_PORT, where rank 0 serves the rendezvous store.
void init_process_group(const InitOptions& opts = {});
bool is_initialized();
// Finishes outstanding work and leaves the group (MPI_Finalize happens once,
// at exit, as MPI allows a single init per process).
void destroy_process_group();
// "mpi", "tcp", "nccl" or "rccl".
std::string get_backend();
int get_rank();
int get_world_size();
// Whether this build has the MPI path / the GPU collective library.
bool mpi_available();
bool gpu_collectives_available();

void barrier();
// Out of place: each returns the collective's result (same device as x).
Tensor all_reduce(const Tensor& x, ReduceOp op = ReduceOp::Sum);
Tensor broadcast(const Tensor& x, int src);
// Concatenation along a new leading axis: (world_size, *x.shape).
Tensor all_gather(const Tensor& x);
// x of shape (world_size * n, ...) reduced across ranks; this rank keeps the
// rank-th block of n rows.
Tensor reduce_scatter(const Tensor& x, ReduceOp op = ReduceOp::Sum);

// A collective started without waiting (torch.distributed's async_op=True).
// On NCCL/RCCL the collective is enqueued on the communicator's own stream,
// after an event on the device's stream (the input's producer); wait() polls
// it with the group's deadline, orders the device's stream after it, and
// returns the result. MPI and 'tcp' collectives complete before the call
// returns (their Work is already complete).
class Work {
 public:
  virtual ~Work() = default;
  virtual bool is_completed() = 0;
  // The result; raises RuntimeError on a timeout or a failed collective.
  virtual Tensor wait() = 0;
};
std::shared_ptr<Work> all_reduce_async(const Tensor& x, ReduceOp op = ReduceOp::Sum);
std::shared_ptr<Work> broadcast_async(const Tensor& x, int src);

void send(const Tensor& x, int dst, int tag = 0);
// Receives a tensor of `like`'s shape and dtype (on its device) from src.
Tensor recv(const Tensor& like, int src, int tag = 0);

}  // namespace pyflame::distributed
