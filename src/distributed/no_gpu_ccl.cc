// Builds without NCCL/RCCL: backend='nccl'/'rccl' raise, 'auto' picks MPI.
#include "distributed/gpu_transport.h"
#include "pyflame/errors.h"

namespace pyflame::distributed::detail {

namespace {
[[noreturn]] void unavailable(const char* fn) {
  throw RuntimeError(errmsg(fn, "this build of PyFlame has no NCCL/RCCL; use backend='mpi' or 'tcp'"));
}
}  // namespace

bool gpu_collectives_compiled() { return false; }
bool gpu_collectives_usable() { return false; }
std::string gpu_collectives_name() { return "nccl"; }
std::unique_ptr<Transport> make_gpu_transport(std::unique_ptr<Transport>, double) { unavailable("init_process_group"); }
std::shared_ptr<Work> gpu_all_reduce_start(std::shared_ptr<Transport>, const Tensor&, ReduceOp, const char* fn) {
  unavailable(fn);
}
std::shared_ptr<Work> gpu_broadcast_start(std::shared_ptr<Transport>, const Tensor&, int, const char* fn) {
  unavailable(fn);
}
Tensor gpu_all_gather(Transport&, const Tensor&, const Shape&, const char* fn) { unavailable(fn); }
Tensor gpu_reduce_scatter(Transport&, const Tensor&, const Shape&, ReduceOp, const char* fn) { unavailable(fn); }
void gpu_send(Transport&, const Tensor&, int, const char* fn) { unavailable(fn); }
Tensor gpu_recv(Transport&, const Tensor&, int, const char* fn) { unavailable(fn); }

}  // namespace pyflame::distributed::detail
