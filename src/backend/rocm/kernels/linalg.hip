// The 'linalg' family on the GPU: no cuSOLVER/rocSOLVER path yet. A clear
// error naming the op, never a silent round trip through the host.
#include "backend/rocm/kernels/common.h"

namespace pyflame {

void Lapack::eval_gpu(const std::vector<Tensor>&, Tensor&) {
  throw RuntimeError(errmsg(name(), "not implemented on the rocm backend yet (no cuSOLVER/rocSOLVER "
                                    "path); move the input to 'cpu' with .to('cpu')"));
}

}  // namespace pyflame
