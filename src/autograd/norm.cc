// Vector-Jacobian products of layer_norm, rms_norm and group_norm, written
// with ops in float32. Each normalizes rows: xhat = (x - mean) * rstd, and
// d/dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) for the row cotangent g
// (without the mean(g) term for RMS, which does not center).
#include "autograd/vjp_utils.h"

namespace pyflame {

namespace {
Tensor f32(const Tensor& t) { return astype(t, Dtype::Float32); }

struct Normalized {
  Tensor xhat, rstd;  // rows of the input: (R, M) and (R, 1)
};

Normalized normalize_rows(const Tensor& x2d, double eps, bool center) {
  Tensor x = f32(x2d);
  Tensor xc = center ? sub(x, mean(x, {-1}, true)) : x;
  Tensor var = mean(mul(xc, xc), {-1}, true);
  Tensor rstd = div(like_scalar(1, var), sqrt(add(var, like_scalar(eps, var))));
  return {mul(xc, rstd), rstd};
}

// d/dx of the row normalization, given g = cotangent of xhat.
Tensor normalize_grad(const Normalized& n, const Tensor& g, bool center) {
  Tensor proj = mul(n.xhat, mean(mul(g, n.xhat), {-1}, true));
  Tensor d = center ? sub(sub(g, mean(g, {-1}, true)), proj) : sub(g, proj);
  return mul(d, n.rstd);
}

// Gradients of y = xhat * w + b over rows (R, C): for x, w (sum over rows), b.
std::vector<Tensor> rowwise_affine_grads(const std::vector<Tensor>& in, const Tensor& c, int64_t cols,
                                         double eps, bool center, bool has_w, bool has_b,
                                         const std::vector<int>& argnums) {
  const Tensor& x = in[0];
  Normalized n = normalize_rows(reshape(x, {x.size() / std::max<int64_t>(cols, 1), cols}), eps, center);
  Tensor g = f32(reshape(c, n.xhat.shape()));
  return for_each_arg(argnums, [&](int i) -> Tensor {
    if (i == 0) {
      Tensor gw = has_w ? mul(g, in[1]) : g;
      return reshape(normalize_grad(n, gw, center), x.shape());
    }
    if (i == 1 && has_w) return sum(mul(g, n.xhat), {0});
    return sum(g, {0});  // bias
  });
}
}  // namespace

std::vector<Tensor> LayerNorm::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                                   const std::vector<int>& argnums) {
  return rowwise_affine_grads(in, c, cols, eps, true, has_weight, has_bias, argnums);
}

std::vector<Tensor> RMSNorm::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                                 const std::vector<int>& argnums) {
  return rowwise_affine_grads(in, c, in[0].shape().back(), eps, false, has_weight, false, argnums);
}

// Rows are (sample, group); the affine parameters are per channel.
std::vector<Tensor> GroupNorm::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                                   const std::vector<int>& argnums) {
  const Tensor& x = in[0];
  const int64_t N = x.shape()[0], C = x.shape()[1];
  const int64_t S = N * C == 0 ? 0 : x.size() / (N * C);
  Normalized n = normalize_rows(reshape(x, {N * groups, (C / groups) * S}), eps, true);
  Tensor g = f32(reshape(c, {N, C, S}));
  Tensor xhat = reshape(n.xhat, {N, C, S});
  return for_each_arg(argnums, [&](int i) -> Tensor {
    if (i == 0) {
      Tensor gw = has_weight ? mul(g, reshape(in[1], {1, C, 1})) : g;
      Tensor d = normalize_grad(n, reshape(gw, n.xhat.shape()), true);
      return reshape(d, x.shape());
    }
    if (i == 1 && has_weight) return sum(mul(g, xhat), {0, 2});
    return sum(g, {0, 2});
  });
}

}  // namespace pyflame
