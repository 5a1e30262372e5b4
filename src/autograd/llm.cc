// Vector-Jacobian products of rope and the fused attention kernel.
#include "autograd/vjp_utils.h"
#include "ops/op_utils.h"
#include "pyflame/autograd.h"

namespace pyflame {

// Rope rotates pairs by angle(position); its transpose rotates by the
// negated angle: the same primitive with positions -p and offset -offset.
std::vector<Tensor> Rope::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                              const std::vector<int>& argnums) {
  for (int i : argnums) {
    if (i != 0) throw ValueError(errmsg("backward", "rope positions are not differentiable"));
  }
  const Tensor& x = in[0];
  Shape rows(x.shape().begin(), x.shape().end() - 1);
  Tensor pos;
  if (has_positions) {
    pos = in[1];
  } else {  // the implicit positions: the index along the sequence axis
    const int64_t S = x.ndim() >= 2 ? x.shape()[x.ndim() - 2] : 1;
    pos = broadcast_to(arange(0, static_cast<double>(S), 1, Dtype::Float32, x.device()), rows);
  }
  auto inverse = std::make_shared<Rope>(theta, -offset, interleaved, true, freqs);
  return {Tensor::make(x.shape(), c.dtype(), c.device(), inverse, {contiguous(c), neg(pos)})};
}

// Recomputes the attention from matmul and softmax (as flash attention's
// backward recomputes the scores) and differentiates that graph.
std::vector<Tensor> Attention::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                                   const std::vector<int>& argnums) {
  std::vector<Tensor> leaves;
  for (int i = 0; i < 3; ++i) {  // q, k, v (a 4th input, the offset, is an integer)
    Tensor l = detach(in[i]);
    l.set_requires_grad(true);
    leaves.push_back(l);
  }
  std::optional<Tensor> offset_t;
  if (in.size() > 3) offset_t = in[3];
  Tensor out;
  {
    GradModeGuard grad_on(true);
    out = attention_composed(leaves[0], leaves[1], leaves[2], causal, scale, causal_offset,
                             std::nullopt, 0.0, offset_t);
  }
  std::vector<Tensor> wrt;
  for (int i : argnums) wrt.push_back(leaves[i]);
  return grad({out}, wrt, {c});
}

}  // namespace pyflame
