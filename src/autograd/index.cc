// Vector-Jacobian products of the index family: concat (slices of the
// cotangent), the gathers (scatter_add), pad (a crop for constant padding,
// pad_backward folds for the other modes), dropout (the same mask), and
// scatter_add itself (a gather).
#include <algorithm>

#include "autograd/vjp_utils.h"

namespace pyflame {

namespace {
[[noreturn]] void index_not_differentiable(const char* fn) {
  throw ValueError(errmsg("backward", std::string(fn) + "'s index is not differentiable"));
}
}  // namespace

std::vector<Tensor> Concat::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                                const std::vector<int>& argnums) {
  std::vector<int64_t> first(in.size());
  int64_t pos = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    first[i] = pos;
    pos += in[i].shape()[axis];
  }
  return for_each_arg(argnums, [&](int i) {
    std::vector<int64_t> starts(c.ndim(), 0), stops = c.shape(), steps(c.ndim(), 1);
    starts[axis] = first[i];
    stops[axis] = first[i] + in[i].shape()[axis];
    return slice(c, starts, stops, steps);
  });
}

std::vector<Tensor> Gather::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                                const std::vector<int>& argnums) {
  return for_each_arg(argnums, [&](int i) {
    if (i != 0) index_not_differentiable(fn);
    const Tensor& index = in[1];
    Tensor g = c;
    if (padding_idx) {  // the padding row gets no gradient
      Tensor pad_row = scalar(static_cast<double>(*padding_idx), index.dtype(), index.device());
      g = where(eq(index, pad_row), like_scalar(0, c), c);
    }
    return Tensor::make(in[0].shape(), c.dtype(), c.device(),
                        std::make_shared<ScatterAdd>(axis, fn), {g, index});
  });
}

std::vector<Tensor> ScatterAdd::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                                    const std::vector<int>& argnums) {
  return for_each_arg(argnums, [&](int i) {
    if (i != 0) index_not_differentiable(name());
    return Tensor::make(in[1].shape(), c.dtype(), c.device(), std::make_shared<Gather>(axis, fn),
                        {c, in[1]});
  });
}

namespace {
// Constant padding: the part of the cotangent that came from x, with zeros
// where the forward cropped x.
Tensor constant_pad_grad(const Tensor& c, const Shape& xs, const std::vector<int64_t>& lo) {
  const int nd = c.ndim();
  std::vector<int64_t> starts(nd), stops(nd), steps(nd, 1), pads;
  for (int a = 0; a < nd; ++a) {
    const int64_t m = c.shape()[a], n = xs[a];
    starts[a] = std::clamp<int64_t>(lo[a], 0, m);
    stops[a] = std::clamp<int64_t>(lo[a] + n, starts[a], m);
  }
  Tensor g = slice(c, starts, stops, steps);
  for (int a = nd - 1; a >= 0; --a) {  // pad() order: last axis first
    const int64_t low = starts[a] - lo[a];
    pads.push_back(low);
    pads.push_back(xs[a] - low - (stops[a] - starts[a]));
  }
  while (pads.size() >= 2 && pads[pads.size() - 1] == 0 && pads[pads.size() - 2] == 0) {
    pads.resize(pads.size() - 2);  // leading axes that need none
  }
  return pads.empty() ? g : pad(g, pads);
}
}  // namespace

std::vector<Tensor> Pad::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                             const std::vector<int>&) {
  const Shape& xs = in[0].shape();
  if (mode == PadMode::Constant) return {constant_pad_grad(c, xs, lo)};
  // The other modes read some inputs several times: fold one axis at a time.
  Tensor g = c;
  for (int a = 0; a < g.ndim(); ++a) {
    if (lo[a] == 0 && g.shape()[a] == xs[a]) continue;
    Shape s = g.shape();
    s[a] = xs[a];
    g = Tensor::make(s, c.dtype(), c.device(), std::make_shared<PadGrad>(mode, a, lo[a], xs[a]),
                     {g});
  }
  return {g};
}

// The mask is a pure function of (key, element index), so dropout of the
// cotangent with the same key multiplies by the forward's mask * scale.
std::vector<Tensor> Dropout::vjp(const std::vector<Tensor>&, const Tensor& c, const Tensor&,
                                 const std::vector<int>&) {
  return {Tensor::make(c.shape(), c.dtype(), c.device(), std::make_shared<Dropout>(p, key), {c})};
}

// The cache's cotangent is c with the written region zeroed; the update's
// is that region of c.
std::vector<Tensor> SliceUpdate::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                                     const std::vector<int>& argnums) {
  return for_each_arg(argnums, [&](int i) {
    const Tensor& update = in[1];
    if (i == 0) return slice_update(c, zeros(update.shape(), c.dtype(), c.device()), start, axis);
    std::vector<int64_t> starts(c.ndim(), 0), stops = c.shape(), steps(c.ndim(), 1);
    starts[axis] = start;
    stops[axis] = start + update.shape()[axis];
    return slice(c, starts, stops, steps);
  });
}

}  // namespace pyflame
