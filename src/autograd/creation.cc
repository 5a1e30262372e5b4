// Vector-Jacobian products of the creation family. A constant does not
// depend on the values of the inputs it keeps (see Full), so each gets zeros.
#include "autograd/vjp_utils.h"

namespace pyflame {

std::vector<Tensor> Full::vjp(const std::vector<Tensor>& in, const Tensor&, const Tensor&,
                              const std::vector<int>& argnums) {
  return for_each_arg(argnums, [&](int i) { return zeros_like(in[i]); });
}

}  // namespace pyflame
