// Vector-Jacobian products of the scatter family. put: x's cotangent is the
// output's with the written positions zeroed (a put of zeros); source's is
// the output's cotangent read at those positions (a gather). Where an index
// repeats, every writer gets the gradient of the kept value (PyTorch leaves
// this case undefined too).
#include "autograd/vjp_utils.h"

namespace pyflame {

std::vector<Tensor> Put::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                             const std::vector<int>& argnums) {
  const Tensor& index = in[1];
  return for_each_arg(argnums, [&](int i) {
    if (i == 1) throw ValueError(errmsg("backward", std::string(fn) + "'s index is not differentiable"));
    if (i == 0) {
      Tensor zero = contiguous(broadcast_to(like_scalar(0, c), index.shape()));
      return Tensor::make(c.shape(), c.dtype(), c.device(), std::make_shared<Put>(fn, axis, axis_size),
                          {c, index, zero});
    }
    const Tensor n = scalar(static_cast<double>(c.size()), index.dtype(), index.device());
    Tensor pos = where(lt(index, scalar(0, index.dtype(), index.device())), add(index, n), index);
    Tensor g = index_select(reshape(c, {-1}), 0, reshape(pos, {-1}));
    return reshape(g, index.shape());
  });
}

}  // namespace pyflame
