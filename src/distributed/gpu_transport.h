// The GPU side of pyflame::distributed: NCCL (NVIDIA) or RCCL (AMD) through
// one platform header (backend/rocm/gpu/ccl.h). Implemented by
// backend/rocm/collectives.cc in GPU builds and by no_gpu_ccl.cc otherwise.
// Each gpu_* call evaluates its input on the device's stream and enqueues the
// collective on the communicator's stream after it; the blocking ones wait
// for it (docs/design/distributed.md).
#pragma once
#include <memory>
#include <string>

#include "distributed/backend.h"

namespace pyflame::distributed::detail {

bool gpu_collectives_compiled();
// Compiled in and a GPU is present: what backend='auto' picks.
bool gpu_collectives_usable();
std::string gpu_collectives_name();  // "nccl" or "rccl"
// A communicator over the GPU of LOCAL_RANK (or rank % device count). `host`
// (MPI or the rendezvous store; null in a world of one) carries rank 0's
// unique id and the cross-rank checks; rank and world are host's.
std::unique_ptr<Transport> make_gpu_transport(std::unique_ptr<Transport> host, double timeout_s);

// Started on the communicator's stream; the Work keeps the transport alive.
std::shared_ptr<Work> gpu_all_reduce_start(std::shared_ptr<Transport> t, const Tensor& x, ReduceOp op,
                                           const char* fn);
std::shared_ptr<Work> gpu_broadcast_start(std::shared_ptr<Transport> t, const Tensor& x, int src, const char* fn);
Tensor gpu_all_gather(Transport& t, const Tensor& x, const Shape& out_shape, const char* fn);
Tensor gpu_reduce_scatter(Transport& t, const Tensor& x, const Shape& out_shape, ReduceOp op, const char* fn);
void gpu_send(Transport& t, const Tensor& x, int dst, const char* fn);
Tensor gpu_recv(Transport& t, const Tensor& like, int src, const char* fn);

}  // namespace pyflame::distributed::detail
