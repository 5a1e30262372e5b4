// Vector-Jacobian products of the sort family. Only cumsum has one of its
// own: sort and topk values are gathers, which carry their gradients, and
// the index outputs are not differentiable.
#include "autograd/vjp_utils.h"

namespace pyflame {

// d/dx of an inclusive running sum: the running sum of the cotangent taken
// from the other end.
std::vector<Tensor> Cumsum::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                                const std::vector<int>& argnums) {
  return for_each_arg(argnums, [&](int) {
    Tensor g = contiguous(astype(c, in[0].dtype()));
    return Tensor::make(g.shape(), g.dtype(), g.device(), std::make_shared<Cumsum>(axis, !reverse), {g});
  });
}

}  // namespace pyflame
