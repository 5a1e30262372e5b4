#include "backend/rocm/solver.h"

#include <memory>

namespace pyflame::backend::rocm::solver {

SolverHandle& handle_for(DeviceContext& ctx) {
  if (SolverHandle* h = ctx.solver.load(std::memory_order_acquire)) return *h;
  static std::mutex mu;  // creation only
  std::lock_guard lk(mu);
  if (!ctx.solver.load()) {
    DeviceGuard g(ctx.device);
    auto h = std::make_unique<SolverHandle>();
    h->h = gpu::create_solver_handle(ctx.stream);
    PF_SOLVER_CHECK(hipsolverDnCreateSyevjInfo(&h->syevj));
    PF_SOLVER_CHECK(hipsolverDnXsyevjSetSortEig(h->syevj, 1));  // ascending eigenvalues
    PF_SOLVER_CHECK(hipsolverDnCreateGesvdjInfo(&h->gesvdj));
    PF_SOLVER_CHECK(hipsolverDnXgesvdjSetSortEig(h->gesvdj, 1));  // descending singular values
    ctx.solver.store(h.release(), std::memory_order_release);
  }
  return *ctx.solver.load();
}

}  // namespace pyflame::backend::rocm::solver
