// Vector-Jacobian products of the class-index losses, per target (the mean's
// division by the target weights is a composite and differentiates itself).
// Gradients reach the scores only: targets are integers, and class weights
// are not differentiable (as in PyTorch). With p = softmax(x) over classes,
// smoothing s, weights w (1 without), target t, W = sum_c w[c], C classes:
//   d cross_entropy / dx_j = p_j ((1-s) w[t] + s W / C) - w_j ((1-s) [j=t] + s / C)
//   d nll_loss / dx_j      = -w_j [j=t]
// and 0 for ignored targets.
#include "autograd/vjp_utils.h"

namespace pyflame {

namespace {

[[noreturn]] void weights_not_differentiable(const char* fn) {
  throw ValueError(errmsg("backward", std::string(fn) +
                                          ": the class weights are not differentiable (pass a "
                                          "weight that does not require grad, e.g. w.detach())"));
}

// The pieces shared by both losses, shaped to broadcast against the scores
// (N, C, S...): the cotangent zeroed on ignored targets (N, 1, S...), the
// one-hot target (N, C, S...) and the weights (1, C, 1...; undefined
// without), float32.
struct ClassGrad {
  Tensor g, hot, w;
};

ClassGrad class_grad_parts(const std::vector<Tensor>& in, const Tensor& c, int64_t ignore_index,
                           bool has_weight) {
  const Tensor &scores = in[0], &target = in[1];
  const Dtype f32 = Dtype::Float32;
  const int64_t C = scores.shape()[1];
  Shape per_target = scores.shape(), per_class(scores.ndim(), 1);
  per_target[1] = 1;
  per_class[1] = C;
  Tensor t = reshape(target, per_target);
  Tensor classes = reshape(arange(0, static_cast<double>(C), 1, target.dtype(), target.device()),
                           per_class);
  Tensor kept = ne(t, scalar(static_cast<double>(ignore_index), target.dtype(), target.device()));
  ClassGrad parts;
  // where, not a product: an ignored target passes exactly 0 even when the
  // cotangent is inf or NaN (a mean over no kept targets divides by 0).
  parts.g = where(kept, reshape(astype(c, f32), per_target), scalar(0.0, f32, c.device()));
  parts.hot = astype(eq(classes, t), f32);
  if (has_weight) parts.w = reshape(in[2], per_class);
  return parts;
}

}  // namespace

std::vector<Tensor> CrossEntropy::vjp(const std::vector<Tensor>& in, const Tensor& c,
                                      const Tensor&, const std::vector<int>& argnums) {
  return for_each_arg(argnums, [&](int i) {
    if (i != 0) weights_not_differentiable(name());
    const ClassGrad k = class_grad_parts(in, c, ignore_index, has_weight);
    const double s = label_smoothing, C = static_cast<double>(in[0].shape()[1]);
    Tensor p = softmax(astype(in[0], Dtype::Float32), 1);
    auto num = [&](double v) { return like_scalar(v, p); };
    // p_j * a - w_j * b with a = (1-s) w[t] + s W / C, b = (1-s) [j=t] + s / C
    Tensor b = s == 0.0 ? k.hot : add(mul(num(1.0 - s), k.hot), num(s / C));
    if (!has_weight) return astype(mul(k.g, sub(p, b)), in[0].dtype());  // a = 1
    Tensor wt = sum(mul(k.hot, k.w), {1}, /*keepdim=*/true);
    Tensor a = add(mul(num(1.0 - s), wt), mul(num(s / C), sum(in[2])));
    return astype(mul(k.g, sub(mul(p, a), mul(k.w, b))), in[0].dtype());
  });
}

std::vector<Tensor> NllLoss::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                                 const std::vector<int>& argnums) {
  return for_each_arg(argnums, [&](int i) {
    if (i != 0) weights_not_differentiable(name());
    const ClassGrad k = class_grad_parts(in, c, ignore_index, has_weight);
    Tensor d = has_weight ? mul(k.hot, k.w) : k.hot;
    return astype(neg(mul(k.g, d)), in[0].dtype());
  });
}

std::vector<Tensor> TargetWeight::vjp(const std::vector<Tensor>&, const Tensor&, const Tensor&,
                                      const std::vector<int>&) {
  weights_not_differentiable("cross_entropy/nll_loss");
}

std::vector<Tensor> CheckRange::vjp(const std::vector<Tensor>&, const Tensor& c, const Tensor&,
                                    const std::vector<int>&) {
  return {c};
}

}  // namespace pyflame
