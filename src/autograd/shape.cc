// Vector-Jacobian products of the view primitives: each maps the output's
// cotangent back onto its input's shape.
#include "autograd/vjp_utils.h"

namespace pyflame {

Tensor sum_to_shape(const Tensor& g, const Shape& to) {
  if (g.shape() == to) return g;
  const int lead = g.ndim() - static_cast<int>(to.size());
  Axes axes;
  for (int i = 0; i < g.ndim(); ++i) {
    if (i < lead || (to[i - lead] == 1 && g.shape()[i] != 1)) axes.push_back(i);
  }
  Tensor s = axes.empty() ? g : sum(g, axes, /*keepdim=*/true);
  return reshape(s, to);
}

std::vector<Tensor> Reshape::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                                 const std::vector<int>&) {
  return {reshape(c, in[0].shape())};
}
std::vector<Tensor> Squeeze::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                                 const std::vector<int>&) {
  return {reshape(c, in[0].shape())};
}
std::vector<Tensor> Unsqueeze::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                                   const std::vector<int>&) {
  return {reshape(c, in[0].shape())};
}

std::vector<Tensor> Broadcast::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                                   const std::vector<int>&) {
  return {sum_to_shape(c, in[0].shape())};
}

std::vector<Tensor> Transpose::vjp(const std::vector<Tensor>&, const Tensor& c, const Tensor&,
                                   const std::vector<int>&) {
  std::vector<int> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int>(i);
  return {transpose(c, inverse)};
}

namespace {
// Spreads a cotangent taken every `step` elements along `axis` back to
// consecutive positions, with zeros between: length (n - 1) * step + 1.
Tensor unstride(const Tensor& g, int axis, int64_t step) {
  Shape zshape = g.shape();
  zshape.insert(zshape.begin() + axis + 1, step - 1);
  Tensor z = zeros(zshape, g.dtype(), g.device());
  Tensor spread = concat({unsqueeze(g, axis + 1), z}, axis + 1);
  Shape merged = g.shape();
  merged[axis] *= step;
  spread = reshape(spread, merged);
  std::vector<int64_t> starts(g.ndim(), 0), stops = g.shape(), steps(g.ndim(), 1);
  stops[axis] = (g.shape()[axis] - 1) * step + 1;
  return slice(spread, starts, stops, steps);
}

Tensor reverse_axis(const Tensor& g, int axis) {
  std::vector<int64_t> starts(g.ndim(), 0), stops = g.shape(), steps(g.ndim(), 1);
  starts[axis] = g.shape()[axis] - 1;
  stops[axis] = -g.shape()[axis] - 1;
  steps[axis] = -1;
  return slice(g, starts, stops, steps);
}
}  // namespace

std::vector<Tensor> Slice::vjp(const std::vector<Tensor>& in, const Tensor& c, const Tensor&,
                               const std::vector<int>&) {
  const Shape& full = in[0].shape();
  Tensor g = dropped_axis >= 0 ? unsqueeze(c, dropped_axis) : c;
  if (g.size() == 0) return {zeros(full, c.dtype(), c.device())};
  std::vector<int64_t> pads;  // pad() order: last axis first, (low, high) pairs
  for (int a = g.ndim() - 1; a >= 0; --a) {
    int64_t n = g.shape()[a], first = starts[a], step = steps[a];
    if (step < 0) {  // walk the same positions upwards
      g = reverse_axis(g, a);
      first += (n - 1) * step;
      step = -step;
    }
    if (step > 1 && n > 1) g = unstride(g, a, step);
    int64_t len = g.shape()[a];
    pads.push_back(first);
    pads.push_back(full[a] - first - len);
  }
  while (pads.size() >= 2 && pads[pads.size() - 1] == 0 && pads[pads.size() - 2] == 0) {
    pads.resize(pads.size() - 2);  // leading axes that need no padding
  }
  return {pads.empty() ? g : pad(g, pads)};
}

}  // namespace pyflame
