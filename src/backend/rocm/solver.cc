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
    ctx.solver.store(h.release(), std::memory_order_release);
  }
  return *ctx.solver.load();
}

}  // namespace pyflame::backend::rocm::solver
