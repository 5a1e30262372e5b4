// Vector-Jacobian products of the scatter family. put: x's cotangent is the
// output's with the written positions zeroed (a put of zeros); source's is
// the output's cotangent read at those positions (a gather), for the writes
// that were kept where an index repeats.
#include "autograd/vjp_utils.h"

namespace pyflame {

std::vector<Tensor> Put::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                             const std::vector<int>& argnums) {
  const Tensor& index = in[1];
  return for_each_arg(argnums, [&](int i) {
    if (i == 1) {
      throw ValueError(errmsg("backward", std::string(fn) + "'s index is not differentiable"));
    }
    if (i == 0) {
      Tensor zero = contiguous(broadcast_to(like_scalar(0, c), index.shape()));
      return Tensor::make(c.shape(), c.dtype(), c.device(),
                          std::make_shared<Put>(fn, axis, axis_size), {c, index, zero});
    }
    const Device dev = index.device();
    const Tensor n = scalar(static_cast<double>(c.size()), index.dtype(), dev);
    Tensor pos =
        reshape(where(lt(index, scalar(0, index.dtype(), dev)), add(index, n), index), {-1});
    Tensor g = index_select(reshape(c, {-1}), 0, pos);
    // Only the write that was kept reaches the output: put each write's
    // number the same way and keep the gradient where it won.
    const int64_t k = index.size();
    Tensor ids = arange(0, static_cast<double>(k), 1, Dtype::Int64, dev);
    Tensor owner =
        Tensor::make({c.size()}, Dtype::Int64, dev, std::make_shared<Put>(fn, axis, axis_size),
                     {full({c.size()}, -1, Dtype::Int64, dev), pos, ids});
    Tensor kept = eq(index_select(owner, 0, pos), ids);
    return reshape(where(kept, g, like_scalar(0, g)), index.shape());
  });
}

}  // namespace pyflame
