// A build without a GPU backend: every primitive's GPU entry raises. Tensors
// cannot reach a GPU in such a build (device parsing refuses), so this is a
// last guard, never a fallback.
#include "ir/primitives.h"

namespace pyflame {

#define PF_NO_GPU(Cls)                                                           \
  void Cls::eval_gpu(const std::vector<Tensor>&, Tensor&) {                      \
    throw RuntimeError(errmsg(name(), "the rocm backend is not built into this " \
                                      "installation"));                          \
  }
PF_FOR_EACH_PRIMITIVE(PF_NO_GPU)
#undef PF_NO_GPU

}  // namespace pyflame

// Fused regions: never on a GPU here.
#include "ir/fused.h"

namespace pyflame {
bool eval_fused_gpu(const FusedRegion&, const std::vector<Tensor>&, std::vector<Tensor>&) { return false; }
std::string fused_kernel_gpu(const FusedRegion&) { return "no GPU backend"; }
}  // namespace pyflame
