// Convolution, pooling and batch normalization ops (torch.nn.functional
// semantics): argument checks, output shapes, graph recording.
#include <cmath>
#include <string>

#include "ops/op_utils.h"
#include "pyflame/amp.h"
#include "pyflame/autograd.h"
#include "pyflame/fusion.h"

namespace pyflame {

bool is_channels_last(const Tensor& x) {
  if (x.ndim() < 3) return false;
  const Shape& sh = x.shape();
  const Strides& st = x.strides();
  int64_t expect = 1;
  auto next = [&](int a) {  // axis a is the next one out in memory
    if (sh[a] != 1 && st[a] != expect) return false;
    expect *= sh[a];
    return true;
  };
  if (!next(1)) return false;
  for (int a = x.ndim() - 1; a >= 2; --a) {
    if (!next(a)) return false;
  }
  return next(0);
}

Tensor conv_data_input(const Tensor& x) {
  return x.is_row_contiguous() || is_channels_last(x) ? x : contiguous(x);
}

namespace {

std::string list_str(const IntList& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

// One value per spatial axis from one value or one per axis.
IntList per_axis(const IntList& v, int n, const std::string& fn, const char* what) {
  if (v.size() == 1) return IntList(n, v[0]);
  if (static_cast<int>(v.size()) == n) return v;
  throw ValueError(errmsg(fn.c_str(), std::string(what) + " must be one integer or " + std::to_string(n) +
                                          " integers, got " + list_str(v)));
}

void check_all(const IntList& v, int64_t min, const std::string& fn, const char* what) {
  for (int64_t e : v) {
    if (e < min) {
      throw ValueError(errmsg(fn.c_str(), std::string(what) + " must be " +
                                              (min == 0 ? "non-negative" : "positive") + ", got " +
                                              list_str(v)));
    }
  }
}

const char* dims_hint(int nsp) { return nsp == 1 ? "L" : nsp == 2 ? "H, W" : "D, H, W"; }

// Checks x is (N, C, *spatial) or unbatched (C, *spatial) with a floating
// dtype; returns the batched form.
Tensor batched_input(const Tensor& x, int nsp, const std::string& fn, bool& unbatched) {
  check_defined(x, fn.c_str());
  if (x.ndim() != nsp + 1 && x.ndim() != nsp + 2) {
    throw ValueError(errmsg(fn.c_str(), "expected a " + std::to_string(nsp + 1) + "-d (unbatched: C, " +
                                            dims_hint(nsp) + ") or " + std::to_string(nsp + 2) +
                                            "-d (batched: N, C, " + dims_hint(nsp) + ") input, got shape " +
                                            shape_str(x.shape())));
  }
  if (!is_floating(x.dtype())) {
    throw ValueError(errmsg(fn.c_str(), std::string("input must be a floating-point tensor, got ") +
                                            dtype_name(x.dtype())));
  }
  unbatched = x.ndim() == nsp + 1;
  return unbatched ? unsqueeze(x, 0) : x;
}

// Convolutions run in float32 arithmetic on the CPU and through the DNN
// libraries on the GPU; a float64 one would silently lose precision, so it
// is refused.
void check_conv_dtype(const Tensor& x, const std::string& fn) {
  if (x.dtype() == Dtype::Float64) {
    throw ValueError(errmsg(fn.c_str(), "float64 is not supported by convolutions yet; "
                                        "convert the input and weights with astype(float32)"));
  }
}

void check_param(const Tensor& p, const Tensor& x, const std::string& fn, const char* what) {
  check_defined(p, fn.c_str());
  if (p.dtype() != x.dtype()) {
    throw ValueError(errmsg(fn.c_str(), std::string(what) + " dtype " + dtype_name(p.dtype()) +
                                            " does not match the input dtype " + dtype_name(x.dtype())));
  }
  check_same_device(x, p, fn.c_str());
}

Tensor conv_impl(const Tensor& x_in, const Tensor& w, const std::optional<Tensor>& bias, int nsp,
                 const IntList& stride_in, const IntList& padding_in, const IntList& dilation_in,
                 const IntList& out_pad_in, int64_t groups, bool transposed, ConvPadding mode) {
  if (auto low = autocast_dtype()) {  // mixed precision: run in the autocast dtype
    AutocastGuard off(std::nullopt);
    return conv_impl(autocast_cast(x_in, *low), autocast_cast(w, *low), autocast_cast(bias, *low), nsp,
                     stride_in, padding_in, dilation_in, out_pad_in, groups, transposed, mode);
  }
  if (nsp < 1 || nsp > 3) {
    throw ValueError(errmsg("convolution", "supports 1 to 3 spatial axes, got " + std::to_string(nsp)));
  }
  const std::string fn = std::string(transposed ? "conv_transpose" : "conv") + std::to_string(nsp) + "d";
  const char* f = fn.c_str();
  bool unbatched = false;
  Tensor x = batched_input(x_in, nsp, fn, unbatched);
  check_conv_dtype(x, fn);
  check_param(w, x, fn, "weight");
  if (w.ndim() != nsp + 2) {
    throw ValueError(errmsg(f, "weight must be " + std::to_string(nsp + 2) + "-d (" +
                                   (transposed ? "in_channels, out_channels/groups, " :
                                                 "out_channels, in_channels/groups, ") +
                                   "kernel sizes), got shape " + shape_str(w.shape())));
  }
  if (bias) check_param(*bias, x, fn, "bias");
  IntList stride = per_axis(stride_in, nsp, fn, "stride");
  IntList padding = mode == ConvPadding::Explicit ? per_axis(padding_in, nsp, fn, "padding") : IntList(nsp, 0);
  IntList dilation = per_axis(dilation_in, nsp, fn, "dilation");
  IntList out_pad = transposed ? per_axis(out_pad_in, nsp, fn, "output_padding") : IntList(nsp, 0);
  check_all(stride, 1, fn, "stride");
  check_all(padding, 0, fn, "padding");
  check_all(dilation, 1, fn, "dilation");
  check_all(out_pad, 0, fn, "output_padding");
  if (groups <= 0) throw ValueError(errmsg(f, "groups must be positive, got " + std::to_string(groups)));

  const int64_t N = x.shape(0), Cin = x.shape(1);
  int64_t Cout;
  if (!transposed) {
    Cout = w.shape(0);
    if (Cout % groups != 0) {
      throw ValueError(errmsg(f, "out_channels (weight.shape[0] = " + std::to_string(Cout) +
                                     ") must be divisible by groups (" + std::to_string(groups) + ")"));
    }
    if (Cin % groups != 0) {
      throw ValueError(errmsg(f, "in_channels (" + std::to_string(Cin) + ") must be divisible by groups (" +
                                     std::to_string(groups) + ")"));
    }
    if (w.shape(1) * groups != Cin) {
      throw ValueError(errmsg(f, "weight of shape " + shape_str(w.shape()) + " with groups=" +
                                     std::to_string(groups) + " expects " + std::to_string(w.shape(1) * groups) +
                                     " input channels, but the input of shape " + shape_str(x_in.shape()) +
                                     " has " + std::to_string(Cin)));
    }
  } else {
    if (Cin % groups != 0) {
      throw ValueError(errmsg(f, "in_channels (" + std::to_string(Cin) + ") must be divisible by groups (" +
                                     std::to_string(groups) + ")"));
    }
    if (w.shape(0) != Cin) {
      throw ValueError(errmsg(f, "weight of shape " + shape_str(w.shape()) + " expects " +
                                     std::to_string(w.shape(0)) + " input channels, but the input of shape " +
                                     shape_str(x_in.shape()) + " has " + std::to_string(Cin)));
    }
    Cout = w.shape(1) * groups;
  }
  for (int d = 0; d < nsp; ++d) {
    if (x.shape(2 + d) <= 0) {
      throw ValueError(errmsg(f, "spatial axes must be non-empty, got input shape " + shape_str(x_in.shape())));
    }
    if (w.shape(2 + d) <= 0) {
      throw ValueError(errmsg(f, "kernel sizes must be positive, got weight shape " + shape_str(w.shape())));
    }
  }
  if (bias && (bias->ndim() != 1 || bias->shape(0) != Cout)) {
    throw ValueError(errmsg(f, "bias must have shape (" + std::to_string(Cout) + ",), got " +
                                   shape_str(bias->shape())));
  }

  // 'same': symmetric padding of the larger half; an odd total is evened
  // out by dropping the first output along that axis.
  std::vector<bool> drop_first(nsp, false);
  if (mode == ConvPadding::Same) {
    for (int d = 0; d < nsp; ++d) {
      if (stride[d] != 1) throw ValueError(errmsg(f, "padding='same' is not supported for strided convolutions"));
      const int64_t total = checked_mul(dilation[d], w.shape(2 + d) - 1, f), lo = total / 2, hi = total - lo;
      padding[d] = hi;
      drop_first[d] = lo != hi;
    }
  }

  Shape out_shape{N, Cout};
  for (int d = 0; d < nsp; ++d) {
    const int64_t in = x.shape(2 + d), k = w.shape(2 + d);
    if (!transposed) {
      // Checked: huge stride/padding/dilation arguments must not wrap around.
      const int64_t eff = checked_add(checked_mul(dilation[d], k - 1, f), 1, f);
      const int64_t padded = checked_add(in, checked_mul(2, padding[d], f), f);
      if (eff > padded) {
        throw ValueError(errmsg(f, "kernel size " + std::to_string(eff) +
                                       (dilation[d] > 1 ? " (dilated)" : "") + " along spatial axis " +
                                       std::to_string(d) + " is larger than the padded input size " +
                                       std::to_string(padded) + " (input shape " + shape_str(x_in.shape()) +
                                       ", weight shape " + shape_str(w.shape()) + ")"));
      }
      out_shape.push_back((padded - eff) / stride[d] + 1);
    } else {
      if (out_pad[d] >= stride[d] && out_pad[d] >= dilation[d]) {
        throw ValueError(errmsg(f, "output_padding must be smaller than either stride or dilation, got "
                                   "output_padding=" + list_str(out_pad) + ", stride=" + list_str(stride) +
                                   ", dilation=" + list_str(dilation)));
      }
      const int64_t o = checked_add(
          checked_add(checked_mul(in - 1, stride[d], f), checked_mul(-2, padding[d], f), f),
          checked_add(checked_mul(dilation[d], k - 1, f), checked_add(out_pad[d], 1, f), f), f);
      if (o <= 0 || in <= 0) {
        throw ValueError(errmsg(f, "the output size along spatial axis " + std::to_string(d) + " would be " +
                                       std::to_string(o) + " (input shape " + shape_str(x_in.shape()) +
                                       ", weight shape " + shape_str(w.shape()) + ", padding " +
                                       list_str(padding) + ")"));
      }
      out_shape.push_back(o);
    }
  }

  ConvGeometry g{stride, padding, dilation, out_pad, groups, transposed};
  std::vector<Tensor> inputs{transposed ? contiguous(x) : conv_data_input(x), contiguous(w)};
  if (bias) inputs.push_back(contiguous(*bias));
  Tensor out = Tensor::make(out_shape, x.dtype(), x.device(), std::make_shared<Conv>(std::move(g), bias.has_value()),
                            std::move(inputs));
  if (mode == ConvPadding::Same) {
    IntList starts(nsp + 2, 0), stops(out_shape.begin(), out_shape.end()), steps(nsp + 2, 1);
    bool any = false;
    for (int d = 0; d < nsp; ++d) {
      if (drop_first[d]) starts[2 + d] = 1, any = true;
    }
    if (any) out = slice(out, starts, stops, steps);
  }
  return unbatched ? squeeze(out, Axes{0}) : out;
}

// PyTorch's pooling output size (floor or ceil, the last window starting
// inside the input or its left padding).
int64_t pool_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode, const char* f) {
  int64_t num = checked_add(checked_add(in, checked_mul(2, p, f), f),
                            checked_add(-checked_mul(d, k - 1, f), ceil_mode ? s - 2 : -1, f), f);
  int64_t q = num >= 0 ? num / s : -((-num + s - 1) / s);  // floor division
  int64_t out = q + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

Tensor pool_impl(PoolKind kind, const Tensor& x_in, int nsp, const IntList& kernel_in, const IntList& stride_in,
                 const IntList& padding_in, const IntList& dilation_in, bool ceil_mode, bool count_include_pad,
                 int64_t divisor_override = 0) {
  const std::string fn = std::string(kind == PoolKind::Max ? "max_pool" : "avg_pool") + std::to_string(nsp) + "d";
  const char* f = fn.c_str();
  bool unbatched = false;
  Tensor x = batched_input(x_in, nsp, fn, unbatched);
  IntList kernel = per_axis(kernel_in, nsp, fn, "kernel_size");
  IntList stride = stride_in.empty() ? kernel : per_axis(stride_in, nsp, fn, "stride");
  IntList padding = per_axis(padding_in, nsp, fn, "padding");
  IntList dilation = per_axis(dilation_in, nsp, fn, "dilation");
  check_all(kernel, 1, fn, "kernel_size");
  check_all(stride, 1, fn, "stride");
  check_all(padding, 0, fn, "padding");
  check_all(dilation, 1, fn, "dilation");
  Shape out_shape{x.shape(0), x.shape(1)};
  for (int d = 0; d < nsp; ++d) {
    const int64_t in = x.shape(2 + d), eff = checked_add(checked_mul(dilation[d], kernel[d] - 1, f), 1, f);
    if (in <= 0) {
      throw ValueError(errmsg(f, "spatial axes must be non-empty, got input shape " + shape_str(x_in.shape())));
    }
    if (padding[d] > eff / 2) {  // padding * 2 > eff, without overflow
      throw ValueError(errmsg(f, "padding should be at most half of the " +
                                     std::string(kind == PoolKind::Max ? "effective " : "") + "kernel size, got padding=" +
                                     list_str(padding) + ", kernel_size=" + list_str(kernel) +
                                     (kind == PoolKind::Max ? ", dilation=" + list_str(dilation) : "")));
    }
    const int64_t o = pool_out_size(in, kernel[d], stride[d], padding[d], dilation[d], ceil_mode, f);
    if (o < 1) {
      throw ValueError(errmsg(f, "kernel size " + std::to_string(eff) + " along spatial axis " + std::to_string(d) +
                                     " is larger than the padded input size " +
                                     std::to_string(in + 2 * padding[d]) + " (input shape " +
                                     shape_str(x_in.shape()) + "): the output would be empty"));
    }
    out_shape.push_back(o);
  }
  Tensor out = Tensor::make(out_shape, x.dtype(), x.device(),
                            std::make_shared<Pool>(kind, kernel, stride, padding, dilation, ceil_mode,
                                                   count_include_pad, divisor_override),
                            {contiguous(x)});
  return unbatched ? squeeze(out, Axes{0}) : out;
}

Tensor adaptive_impl(PoolKind kind, const Tensor& x_in, int nsp,
                     const std::vector<std::optional<int64_t>>& size_in) {
  const std::string fn = std::string(kind == PoolKind::Max ? "adaptive_max_pool" : "adaptive_avg_pool") +
                         std::to_string(nsp) + "d";
  const char* f = fn.c_str();
  bool unbatched = false;
  Tensor x = batched_input(x_in, nsp, fn, unbatched);
  std::vector<std::optional<int64_t>> size = size_in;
  if (size.size() == 1) size.assign(nsp, size_in[0]);
  if (static_cast<int>(size.size()) != nsp) {
    throw ValueError(errmsg(f, "output_size must be one integer or " + std::to_string(nsp) + " values, got " +
                                   std::to_string(size_in.size())));
  }
  Shape out_shape{x.shape(0), x.shape(1)};
  for (int d = 0; d < nsp; ++d) {
    const int64_t in = x.shape(2 + d);
    if (in <= 0) {
      throw ValueError(errmsg(f, "spatial axes must be non-empty, got input shape " + shape_str(x_in.shape())));
    }
    const int64_t o = size[d].value_or(in);
    if (o < 0) throw ValueError(errmsg(f, "output sizes must be non-negative, got " + std::to_string(o)));
    out_shape.push_back(o);
  }
  Tensor out = Tensor::make(out_shape, x.dtype(), x.device(), std::make_shared<AdaptivePool>(kind, nsp),
                            {contiguous(x)});
  return unbatched ? squeeze(out, Axes{0}) : out;
}

// A per-channel parameter as a contiguous float32 (C) vector.
Tensor channel_param(const std::optional<Tensor>& p, const Tensor& x, int64_t C, const char* what) {
  const char* f = "batch_norm";
  check_defined(*p, f);
  check_same_device(x, *p, f);
  if (!is_floating(p->dtype())) {
    throw ValueError(errmsg(f, std::string(what) + " must be a floating-point tensor, got " + dtype_name(p->dtype())));
  }
  if (p->ndim() != 1 || p->shape(0) != C) {
    throw ValueError(errmsg(f, std::string(what) + " must have shape (" + std::to_string(C) + ",) for input of shape " +
                                   shape_str(x.shape()) + ", got " + shape_str(p->shape())));
  }
  return contiguous(astype(*p, Dtype::Float32));
}

// CONV_BN_RELU in inference: batch norm with running statistics right after
// a convolution is that convolution with scaled weights and a shifted bias,
// w' = w * s and b' = (b - mean) * s + beta with s = gamma / sqrt(var + eps)
// (s in double, as the batch norm kernels compute it). The convolution runs
// without a bias and the bias add is elementwise, so with a following relu it
// is one fused region. Folded only with fusion on, for a float32 convolution
// not evaluated yet, and when no gradient is recorded (the fold changes which
// values autograd would see); otherwise null.
std::optional<Tensor> fold_into_conv(const Tensor& x, const Tensor& mean, const Tensor& var, const Tensor& gamma,
                                     const Tensor& beta, double eps) {
  Node* n = x.node();
  const auto* conv = n->buffer ? nullptr : dynamic_cast<const Conv*>(n->prim.get());
  if (!conv || conv->geom.transposed || x.dtype() != Dtype::Float32 || !get_fusion()) return std::nullopt;
  if (is_grad_enabled() && (x.requires_grad() || gamma.requires_grad() || beta.requires_grad())) return std::nullopt;
  const int64_t C = x.shape(1);
  const Device dev = x.device();
  Tensor inv = sqrt(add(astype(var, Dtype::Float64), scalar(eps, Dtype::Float64, dev)));
  Tensor sc = astype(div(astype(gamma, Dtype::Float64), inv), Dtype::Float32);
  const Tensor& w = n->inputs[1];
  Shape per_out(w.ndim(), 1);
  per_out[0] = C;
  Tensor w2 = mul(w, reshape(sc, per_out));
  Tensor shift = conv->has_bias ? sub(n->inputs[2], mean) : neg(mean);
  Tensor b2 = add(mul(shift, sc), beta);
  Tensor y = Tensor::make(x.shape(), x.dtype(), dev, std::make_shared<Conv>(conv->geom, false),
                          {n->inputs[0], contiguous(w2)});
  Shape per_channel(x.ndim(), 1);
  per_channel[1] = C;
  return add(y, reshape(b2, per_channel));
}

}  // namespace

Tensor convolution(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias, int nspatial,
                   const IntList& stride, const IntList& padding, const IntList& dilation, int64_t groups,
                   ConvPadding mode) {
  return conv_impl(x, weight, bias, nspatial, stride, padding, dilation, {0}, groups, false, mode);
}

Tensor conv1d(const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, const IntList& s, const IntList& p,
              const IntList& d, int64_t g) {
  return conv_impl(x, w, b, 1, s, p, d, {0}, g, false, ConvPadding::Explicit);
}
Tensor conv2d(const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, const IntList& s, const IntList& p,
              const IntList& d, int64_t g) {
  return conv_impl(x, w, b, 2, s, p, d, {0}, g, false, ConvPadding::Explicit);
}
Tensor conv3d(const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, const IntList& s, const IntList& p,
              const IntList& d, int64_t g) {
  return conv_impl(x, w, b, 3, s, p, d, {0}, g, false, ConvPadding::Explicit);
}

Tensor conv_transpose(const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, int nspatial,
                      const IntList& s, const IntList& p, const IntList& op, int64_t g, const IntList& d) {
  return conv_impl(x, w, b, nspatial, s, p, d, op, g, true, ConvPadding::Explicit);
}
Tensor conv_transpose1d(const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, const IntList& s,
                        const IntList& p, const IntList& op, int64_t g, const IntList& d) {
  return conv_impl(x, w, b, 1, s, p, d, op, g, true, ConvPadding::Explicit);
}
Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, const IntList& s,
                        const IntList& p, const IntList& op, int64_t g, const IntList& d) {
  return conv_impl(x, w, b, 2, s, p, d, op, g, true, ConvPadding::Explicit);
}
Tensor conv_transpose3d(const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, const IntList& s,
                        const IntList& p, const IntList& op, int64_t g, const IntList& d) {
  return conv_impl(x, w, b, 3, s, p, d, op, g, true, ConvPadding::Explicit);
}

Tensor max_pool1d(const Tensor& x, const IntList& k, const IntList& s, const IntList& p, const IntList& d, bool c) {
  return pool_impl(PoolKind::Max, x, 1, k, s, p, d, c, true);
}
Tensor max_pool2d(const Tensor& x, const IntList& k, const IntList& s, const IntList& p, const IntList& d, bool c) {
  return pool_impl(PoolKind::Max, x, 2, k, s, p, d, c, true);
}
Tensor max_pool3d(const Tensor& x, const IntList& k, const IntList& s, const IntList& p, const IntList& d, bool c) {
  return pool_impl(PoolKind::Max, x, 3, k, s, p, d, c, true);
}
Tensor avg_pool1d(const Tensor& x, const IntList& k, const IntList& s, const IntList& p, bool c, bool inc) {
  return pool_impl(PoolKind::Avg, x, 1, k, s, p, {1}, c, inc);
}
Tensor avg_pool2d(const Tensor& x, const IntList& k, const IntList& s, const IntList& p, bool c, bool inc,
                  int64_t div) {
  return pool_impl(PoolKind::Avg, x, 2, k, s, p, {1}, c, inc, div);
}
Tensor avg_pool3d(const Tensor& x, const IntList& k, const IntList& s, const IntList& p, bool c, bool inc,
                  int64_t div) {
  return pool_impl(PoolKind::Avg, x, 3, k, s, p, {1}, c, inc, div);
}

Tensor adaptive_avg_pool1d(const Tensor& x, const std::vector<std::optional<int64_t>>& size) {
  return adaptive_impl(PoolKind::Avg, x, 1, size);
}
Tensor adaptive_avg_pool2d(const Tensor& x, const std::vector<std::optional<int64_t>>& size) {
  return adaptive_impl(PoolKind::Avg, x, 2, size);
}
Tensor adaptive_avg_pool3d(const Tensor& x, const std::vector<std::optional<int64_t>>& size) {
  return adaptive_impl(PoolKind::Avg, x, 3, size);
}
Tensor adaptive_max_pool1d(const Tensor& x, const std::vector<std::optional<int64_t>>& size) {
  return adaptive_impl(PoolKind::Max, x, 1, size);
}
Tensor adaptive_max_pool2d(const Tensor& x, const std::vector<std::optional<int64_t>>& size) {
  return adaptive_impl(PoolKind::Max, x, 2, size);
}
Tensor adaptive_max_pool3d(const Tensor& x, const std::vector<std::optional<int64_t>>& size) {
  return adaptive_impl(PoolKind::Max, x, 3, size);
}

BatchNormResult batch_norm_update(const Tensor& x, const std::optional<Tensor>& running_mean,
                                  const std::optional<Tensor>& running_var, const std::optional<Tensor>& weight,
                                  const std::optional<Tensor>& bias, bool training, double momentum, double eps) {
  const char* f = "batch_norm";
  check_defined(x, f);
  if (x.ndim() < 2) {
    throw ValueError(errmsg(f, "expected an input of at least 2 axes (N, C, ...), got shape " + shape_str(x.shape())));
  }
  if (!is_floating(x.dtype())) {
    throw ValueError(errmsg(f, std::string("input must be a floating-point tensor, got ") + dtype_name(x.dtype())));
  }
  if (running_mean.has_value() != running_var.has_value()) {
    throw ValueError(errmsg(f, "running_mean and running_var must be given together"));
  }
  if (!training && !running_mean) {
    throw ValueError(errmsg(f, "running_mean and running_var are required when training=False"));
  }
  if (!(eps >= 0) || !std::isfinite(eps)) {
    throw ValueError(errmsg(f, "eps must be a non-negative finite number, got " + std::to_string(eps)));
  }
  if (!std::isfinite(momentum)) {
    throw ValueError(errmsg(f, "momentum must be a finite number, got " + std::to_string(momentum)));
  }
  const int64_t C = x.shape(1);
  const Device dev = x.device();
  Tensor rm, rv;
  if (running_mean) {
    rm = channel_param(running_mean, x, C, "running_mean");
    rv = channel_param(running_var, x, C, "running_var");
  }
  Tensor w = weight ? channel_param(weight, x, C, "weight") : full({C}, 1.0, Dtype::Float32, dev);
  Tensor b = bias ? channel_param(bias, x, C, "bias") : full({C}, 0.0, Dtype::Float32, dev);
  Tensor xc = contiguous(x);
  BatchNormResult res;
  if (!training) {
    if (auto folded = fold_into_conv(x, rm, rv, w, b, eps)) {
      res.output = *folded;
      return res;
    }
    res.output = Tensor::make(x.shape(), x.dtype(), dev, std::make_shared<BatchNorm>(eps), {xc, rm, rv, w, b});
    return res;
  }
  const int64_t count = C ? x.size() / C : 0;
  if (count <= 1) {
    throw ValueError(errmsg(f, "expected more than 1 value per channel when training, got input shape " +
                                   shape_str(x.shape())));
  }
  Tensor stats = Tensor::make({2, C}, Dtype::Float32, dev, std::make_shared<BatchNormStats>(), {xc});
  Tensor mean = select(stats, 0, 0), var = select(stats, 0, 1);
  res.output = Tensor::make(x.shape(), x.dtype(), dev, std::make_shared<BatchNorm>(eps, /*batch=*/true),
                            {xc, mean, var, w, b});
  if (running_mean) {
    // Running statistics are state, not part of the differentiated graph.
    NoGradGuard no_grad;
    auto blend = [&](const Tensor& run, const Tensor& batch, const Tensor& orig) {
      Tensor t = add(mul(run, scalar(1.0 - momentum, Dtype::Float32, dev)),
                     mul(batch, scalar(momentum, Dtype::Float32, dev)));
      return astype(t, orig.dtype());
    };
    Tensor unbiased = mul(var, scalar(double(count) / double(count - 1), Dtype::Float32, dev));
    res.running_mean = blend(rm, mean, *running_mean);
    res.running_var = blend(rv, unbiased, *running_var);
  }
  return res;
}

Tensor batch_norm(const Tensor& x, const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
                  const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, bool training,
                  double momentum, double eps) {
  return batch_norm_update(x, running_mean, running_var, weight, bias, training, momentum, eps).output;
}

}  // namespace pyflame
