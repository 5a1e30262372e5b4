// Vector-Jacobian products of the conv family: convolution, pooling and
// batch normalization. A convolution's input gradient is the adjoint
// convolution (transposed for a forward one and vice versa); weight and
// pooling gradients are backward primitives (ConvWeightGrad, PoolGrad,
// AdaptivePoolGrad); batch normalization is written with ops.
#include <algorithm>
#include <optional>

#include "autograd/vjp_utils.h"

namespace pyflame {

namespace {

// Every axis but the channel axis 1 of an (N, C, *spatial) tensor.
Axes all_but_channel(int ndim) {
  Axes axes{0};
  for (int a = 2; a < ndim; ++a) axes.push_back(a);
  return axes;
}

// (1, C, 1, ...): a per-channel vector shaped to broadcast against x.
Tensor per_channel(const Tensor& v, int ndim) {
  Shape s(ndim, 1);
  s[1] = v.shape(0);
  return reshape(v, s);
}

// The weight gradient of the forward convolution of x by a weight of shape
// w_shape (geometry g) given its output cotangent gy.
Tensor conv_weight_grad(const Tensor& x, const Tensor& gy, const Shape& w_shape, const ConvGeometry& g) {
  ConvGeometry fwd = g;
  fwd.transposed = false;
  fwd.output_padding.assign(g.nspatial(), 0);
  return Tensor::make(w_shape, x.dtype(), x.device(), std::make_shared<ConvWeightGrad>(std::move(fwd)),
                      {conv_data_input(x), contiguous(gy)});
}

// Spatial size of a forward convolution's output (PyTorch's rule).
int64_t conv_out_size(int64_t in, int64_t k, const ConvGeometry& g, int d) {
  return (in + 2 * g.padding[d] - g.dilation[d] * (k - 1) - 1) / g.stride[d] + 1;
}

// Forward y = conv(x, w): dx is the transposed convolution of the cotangent,
// with the output padding that gives back x's size (the forward rule drops
// up to stride - 1 trailing input elements, which get zero).
Tensor conv_input_grad(const ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor& c) {
  const int nsp = g.nspatial();
  IntList out_pad(nsp);
  for (int d = 0; d < nsp; ++d) {
    const int64_t reached = (c.shape(2 + d) - 1) * g.stride[d] - 2 * g.padding[d] +
                            g.dilation[d] * (w.shape(2 + d) - 1) + 1;
    out_pad[d] = x.shape(2 + d) - reached;
  }
  return conv_transpose(c, w, std::nullopt, nsp, g.stride, g.padding, out_pad, g.groups, g.dilation);
}

// Transposed y = conv_transpose(x, w): dx is the forward convolution of the
// cotangent. An output_padding of stride or more (allowed when the dilation
// is larger) gives the forward convolution extra trailing outputs, which
// correspond to no element of x and are dropped.
Tensor conv_transpose_input_grad(const ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor& c) {
  const int nsp = g.nspatial();
  Tensor dx = convolution(c, w, std::nullopt, nsp, g.stride, g.padding, g.dilation, g.groups);
  if (dx.shape() == x.shape()) return dx;
  IntList starts(nsp + 2, 0), stops(x.shape().begin(), x.shape().end()), steps(nsp + 2, 1);
  return slice(dx, starts, stops, steps);
}

// Transposed: the weight gradient is the forward convolution's, with the
// cotangent as that convolution's input and x as its output cotangent
// (zero-extended where the forward rule gives more outputs than x has).
Tensor conv_transpose_weight_grad(const ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor& c) {
  const int nsp = g.nspatial();
  std::vector<int64_t> pads;  // pad() order: last axis first, (low, high) pairs
  bool any = false;
  for (int d = nsp - 1; d >= 0; --d) {
    const int64_t full = conv_out_size(c.shape(2 + d), w.shape(2 + d), g, d);
    pads.push_back(0);
    pads.push_back(full - x.shape(2 + d));
    any = any || full != x.shape(2 + d);
  }
  return conv_weight_grad(c, any ? pad(x, pads) : x, w.shape(), g);
}

}  // namespace

std::vector<Tensor> Conv::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                              const std::vector<int>& argnums) {
  const Tensor &x = in[0], &w = in[1];
  return for_each_arg(argnums, [&](int i) {
    if (i == 0) return geom.transposed ? conv_transpose_input_grad(geom, x, w, c) : conv_input_grad(geom, x, w, c);
    if (i == 1) return geom.transposed ? conv_transpose_weight_grad(geom, x, w, c) : conv_weight_grad(x, c, w.shape(), geom);
    return sum(c, all_but_channel(c.ndim()));  // bias
  });
}

std::vector<Tensor> Pool::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor& out,
                              const std::vector<int>&) {
  const Tensor& x = in[0];
  return {Tensor::make(x.shape(), x.dtype(), x.device(), std::make_shared<PoolGrad>(*this), {x, out, contiguous(c)})};
}

std::vector<Tensor> AdaptivePool::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                                      const std::vector<int>&) {
  const Tensor& x = in[0];
  return {Tensor::make(x.shape(), x.dtype(), x.device(),
                       std::make_shared<AdaptivePoolGrad>(kind, x.ndim() - 2), {x, contiguous(c)})};
}

// y = (x - mean) * invstd * w + b with invstd = 1 / sqrt(var + eps), per
// channel. In training, mean and var are BatchNormStats outputs, whose vjp
// carries their cotangents on to x; in evaluation they are running
// statistics and must not require grad. Computed in float32 (the engine
// casts dx back to x's dtype).
std::vector<Tensor> BatchNorm::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                                   const std::vector<int>& argnums) {
  for (int i : argnums) {
    if ((i == 1 || i == 2) && !batch_stats) {
      throw ValueError(errmsg("backward", std::string("batch_norm: ") + (i == 1 ? "running_mean" : "running_var") +
                                              " requires grad, but in evaluation mode (training=False) the "
                                              "running statistics are constants; detach them"));
    }
  }
  const Tensor& x = in[0];
  const int nd = x.ndim();
  const Axes red = all_but_channel(nd);
  const Tensor &mean = in[1], &var = in[2], &w = in[3];
  const Tensor g = astype(c, Dtype::Float32);
  const Tensor invstd = div(like_scalar(1, var), sqrt(add(var, like_scalar(eps, var))));
  std::optional<Tensor> sum_g, sum_gxc;  // shared by several cotangents
  auto get_sum_g = [&] {
    if (!sum_g) sum_g = sum(g, red);
    return *sum_g;
  };
  auto get_sum_gxc = [&] {  // sum of g * (x - mean) per channel
    if (!sum_gxc) {
      Tensor xc = sub(astype(x, Dtype::Float32), per_channel(mean, nd));
      sum_gxc = sum(mul(g, xc), red);
    }
    return *sum_gxc;
  };
  return for_each_arg(argnums, [&](int i) -> Tensor {
    switch (i) {
      case 0: return mul(g, per_channel(mul(w, invstd), nd));
      case 1: return neg(mul(get_sum_g(), mul(w, invstd)));
      case 2: {  // d invstd / d var = -invstd^3 / 2
        Tensor d = mul(mul(invstd, mul(invstd, invstd)), like_scalar(-0.5, invstd));
        return mul(get_sum_gxc(), mul(w, d));
      }
      case 3: return mul(get_sum_gxc(), invstd);
      default: return get_sum_g();
    }
  });
}

// mean = sum(x) / M and var = sum((x - mean)^2) / M per channel (M values
// each): dx = dmean / M + dvar * 2 (x - mean) / M. The mean's own
// dependence on x drops out of var's gradient (the deviations sum to zero).
std::vector<Tensor> BatchNormStats::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor& out,
                                        const std::vector<int>&) {
  const Tensor& x = in[0];
  const int nd = x.ndim();
  const double M = static_cast<double>(x.size() / std::max<int64_t>(x.shape(1), 1));
  const Tensor cm = per_channel(select(c, 0, 0), nd), cv = per_channel(select(c, 0, 1), nd);
  const Tensor xc = sub(astype(x, Dtype::Float32), per_channel(select(out, 0, 0), nd));
  Tensor dx = add(mul(cv, mul(xc, like_scalar(2.0 / M, xc))), div(cm, like_scalar(M, cm)));
  return {dx};
}

}  // namespace pyflame
