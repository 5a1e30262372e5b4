// Builds without MPI (no libopenmpi-dev found): the MPI transport says so.
#include "distributed/backend.h"
#include "pyflame/errors.h"

namespace pyflame::distributed::detail {

std::unique_ptr<Transport> make_mpi_transport(double) {
  throw RuntimeError(errmsg("init_process_group",
                            "this build of PyFlame has no MPI (install libopenmpi-dev and rebuild)"));
}

bool mpi_compiled() { return false; }

}  // namespace pyflame::distributed::detail
