// The dense solver library's handle of a context (docs/design/eval_context.md): one per
// DeviceContext, created on first use bound to the context's stream and kept with it (process
// lifetime, like the context), found without a lock once made. A library handle serves one thread
// at a time: its lock is contended only when evaluations share the device's context (multi_stream
// off); each multi_stream bundle has a handle of its own.
#pragma once
#include <mutex>

#include "backend/rocm/context.h"
#include "backend/rocm/gpu/solver.h"

namespace pyflame::backend::rocm::solver {

struct SolverHandle {
  gpu::solver_handle_t h = nullptr;
  // Parameters of the batched Jacobi routines: the libraries' defaults
  // (machine-precision tolerance, 100 sweeps) with sorted results.
  hipsolverSyevjInfo_t syevj = nullptr;
  hipsolverGesvdjInfo_t gesvdj = nullptr;
  std::mutex mu;
};

// ctx's handle, made on first use.
SolverHandle& handle_for(DeviceContext& ctx);

}  // namespace pyflame::backend::rocm::solver
