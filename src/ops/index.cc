// Index and shape ops: concat/stack/split, gathers, pad, dropout,
// batch_matmul.
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "ops/op_utils.h"

namespace pyflame {

namespace {

std::string axis_str(int a) { return std::to_string(a); }

std::string num_str(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

void check_index_dtype(const Tensor& index, const char* fn, const char* what = "index") {
  // As PyTorch: indices are int32 or int64 (the kernels read those two).
  if (index.dtype() != Dtype::Int32 && index.dtype() != Dtype::Int64) {
    throw ValueError(errmsg(fn, std::string(what) + " must be an int32 or int64 tensor, got " +
                                    dtype_name(index.dtype())));
  }
}

// A key for one counter-based draw: the key a `rand` call would take here.
uint64_t draw_key(Device device) {
  Tensor r = rand({}, Dtype::Float32, device);  // never evaluated
  return static_cast<Random*>(r.primitive())->key;
}

}  // namespace

// ---------------------------------------------------------------- concat/stack/split

Tensor concat(const std::vector<Tensor>& tensors, int axis) {
  const char* fn = "concat";
  if (tensors.empty()) throw ValueError(errmsg(fn, "expected a non-empty list of tensors"));
  for (const auto& t : tensors) check_defined(t, fn);
  const Tensor& first = tensors[0];
  const int nd = first.ndim();
  if (nd == 0) throw ValueError(errmsg(fn, "zero-dimensional tensors cannot be concatenated"));
  const int a = normalize_axis(axis, nd, fn);
  Dtype t = first.dtype();
  Shape out_shape = first.shape();
  out_shape[a] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& x = tensors[i];
    check_same_device(first, x, fn);
    if (x.ndim() != nd) {
      throw ValueError(errmsg(fn, "tensor " + std::to_string(i) + " has " + std::to_string(x.ndim()) +
                                      " dimensions, expected " + std::to_string(nd)));
    }
    for (int d = 0; d < nd; ++d) {
      if (d != a && x.shape()[d] != first.shape()[d]) {
        throw ValueError(errmsg(fn, "sizes must match except along axis " + axis_str(a) +
                                        ": tensor 0 has shape " + shape_str(first.shape()) +
                                        ", tensor " + std::to_string(i) + " has shape " +
                                        shape_str(x.shape())));
      }
    }
    out_shape[a] = checked_add(out_shape[a], x.shape()[a], fn);
    t = promote_types(t, x.dtype());
  }
  if (tensors.size() == 1) return astype(first, t);
  // Zero-size inputs stay (the kernels skip them) so autograd reaches them.
  std::vector<Tensor> ins;
  for (const auto& x : tensors) ins.push_back(astype(x, t));
  return Tensor::make(out_shape, t, first.device(), std::make_shared<Concat>(a), std::move(ins));
}

Tensor stack(const std::vector<Tensor>& tensors, int axis) {
  const char* fn = "stack";
  if (tensors.empty()) throw ValueError(errmsg(fn, "expected a non-empty list of tensors"));
  for (const auto& t : tensors) check_defined(t, fn);
  const int a = normalize_axis(axis, tensors[0].ndim() + 1, fn);
  std::vector<Tensor> ex;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].shape() != tensors[0].shape()) {
      throw ValueError(errmsg(fn, "all tensors must have the same shape: tensor 0 has shape " +
                                      shape_str(tensors[0].shape()) + ", tensor " +
                                      std::to_string(i) + " has shape " +
                                      shape_str(tensors[i].shape())));
    }
    check_same_device(tensors[0], tensors[i], fn);
    ex.push_back(unsqueeze(tensors[i], a));
  }
  return concat(ex, a);
}

namespace {
std::vector<Tensor> split_sizes(const Tensor& x, const std::vector<int64_t>& sizes, int a) {
  std::vector<Tensor> out;
  const int nd = x.ndim();
  std::vector<int64_t> starts(nd, 0), stops(x.shape()), steps(nd, 1);
  int64_t pos = 0;
  for (int64_t s : sizes) {
    starts[a] = pos;
    stops[a] = pos + s;
    out.push_back(slice(x, starts, stops, steps));
    pos += s;
  }
  return out;
}
}  // namespace

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int axis) {
  const char* fn = "split";
  check_defined(x, fn);
  if (x.ndim() == 0) throw ValueError(errmsg(fn, "cannot split a zero-dimensional tensor"));
  const int a = normalize_axis(axis, x.ndim(), fn);
  const int64_t dim = x.shape()[a];
  if (split_size < 0 || (split_size == 0 && dim != 0)) {
    throw ValueError(errmsg(fn, "split_size must be positive (0 only for an empty axis), got " +
                                    std::to_string(split_size)));
  }
  std::vector<int64_t> sizes;
  if (dim == 0) {
    sizes.push_back(0);
  } else {
    for (int64_t p = 0; p < dim; p += split_size) sizes.push_back(std::min(split_size, dim - p));
  }
  return split_sizes(x, sizes, a);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sections, int axis) {
  const char* fn = "split";
  check_defined(x, fn);
  if (x.ndim() == 0) throw ValueError(errmsg(fn, "cannot split a zero-dimensional tensor"));
  const int a = normalize_axis(axis, x.ndim(), fn);
  int64_t total = 0;
  for (int64_t s : sections) {
    if (s < 0) throw ValueError(errmsg(fn, "section sizes must be non-negative, got " + std::to_string(s)));
    total = checked_add(total, s, fn);
  }
  if (sections.empty() || total != x.shape()[a]) {
    throw ValueError(errmsg(fn, "section sizes sum to " + std::to_string(total) +
                                    " but axis " + axis_str(a) + " has size " +
                                    std::to_string(x.shape()[a])));
  }
  return split_sizes(x, sections, a);
}

// ---------------------------------------------------------------- gathers

Tensor gather(const Tensor& x, int axis, const Tensor& index) {
  const char* fn = "gather";
  check_defined(x, fn);
  check_defined(index, fn);
  check_same_device(x, index, fn);
  check_index_dtype(index, fn);
  if (x.ndim() == 0 && index.ndim() == 0) {
    normalize_axis(axis, 1, fn);
    return squeeze(gather(unsqueeze(x, 0), 0, unsqueeze(index, 0)), Axes{0});
  }
  if (index.ndim() != x.ndim()) {
    throw ValueError(errmsg(fn, "index must have as many dimensions as x (" +
                                    std::to_string(x.ndim()) + "), got " +
                                    std::to_string(index.ndim())));
  }
  const int a = normalize_axis(axis, x.ndim(), fn);
  for (int d = 0; d < x.ndim(); ++d) {
    if (d != a && index.shape()[d] > x.shape()[d]) {
      throw ValueError(errmsg(fn, "index shape " + shape_str(index.shape()) +
                                      " exceeds x shape " + shape_str(x.shape()) +
                                      " at axis " + std::to_string(d) + " (only axis " +
                                      axis_str(a) + " may be larger)"));
    }
  }
  if (index.size() > 0 && x.shape()[a] == 0) {
    throw IndexError(errmsg(fn, "cannot gather from an empty axis " + axis_str(a)));
  }
  return Tensor::make(index.shape(), x.dtype(), x.device(), std::make_shared<Gather>(a, "gather"),
                      {x, index});
}

Tensor index_select(const Tensor& x, int axis, const Tensor& index) {
  const char* fn = "index_select";
  check_defined(x, fn);
  check_defined(index, fn);
  check_same_device(x, index, fn);
  check_index_dtype(index, fn);
  if (index.ndim() > 1) {
    throw ValueError(errmsg(fn, "index must be 0-d or 1-d, got shape " + shape_str(index.shape())));
  }
  if (x.ndim() == 0) {
    normalize_axis(axis, 1, fn);
    return reshape(index_select(reshape(x, {1}), 0, index), {});
  }
  const int a = normalize_axis(axis, x.ndim(), fn);
  const int64_t n = index.size();
  if (n > 0 && x.shape()[a] == 0) {
    throw IndexError(errmsg(fn, "cannot select from an empty axis " + axis_str(a)));
  }
  Shape out = x.shape();
  out[a] = n;
  Shape ish(x.ndim(), 1);
  ish[a] = n;
  Tensor idx = broadcast_to(reshape(index, ish), out);
  return Tensor::make(out, x.dtype(), x.device(), std::make_shared<Gather>(a, fn), {x, idx});
}

Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx) {
  const char* fn = "embedding";
  check_defined(indices, fn);
  check_defined(weight, fn);
  check_same_device(indices, weight, fn);
  check_index_dtype(indices, fn, "indices");
  if (weight.ndim() != 2) {
    throw ValueError(errmsg(fn, "weight must be 2-d (num_embeddings, embedding_dim), got shape " +
                                    shape_str(weight.shape())));
  }
  const int64_t V = weight.shape()[0], D = weight.shape()[1];
  if (padding_idx && (*padding_idx < -V || *padding_idx >= V)) {
    throw ValueError(errmsg(fn, "padding_idx " + std::to_string(*padding_idx) +
                                    " must be within num_embeddings (" + std::to_string(V) + ")"));
  }
  if (indices.size() > 0 && V == 0) {
    throw IndexError(errmsg(fn, "cannot look up indices in an empty weight"));
  }
  // A gather along axis 0 of weight, index = the flat indices as (n, D); its
  // vjp scatters straight into (V, D). padding_idx is kept for that vjp.
  const int64_t n = indices.size();
  Tensor idx = broadcast_to(reshape(indices, {n, 1}), {n, D});
  std::optional<int64_t> pad;
  if (padding_idx) pad = *padding_idx < 0 ? *padding_idx + V : *padding_idx;
  Tensor out;
  if (D == 0 && n > 0) {
    // Nothing to gather, yet a bad index must raise (as in PyTorch): a
    // one-column gather from a broadcast zero checks them, and the empty
    // result takes it as an input so it runs whenever the result does.
    Tensor column = broadcast_to(zeros({1, 1}, weight.dtype(), weight.device()), {V, 1});
    Tensor probe = Tensor::make({n, 1}, weight.dtype(), weight.device(),
                                std::make_shared<Gather>(0, fn, pad), {column, reshape(indices, {n, 1})});
    out = Tensor::make({n, 0}, weight.dtype(), weight.device(), std::make_shared<Full>(0.0), {weight, probe});
  } else {
    out = Tensor::make({n, D}, weight.dtype(), weight.device(), std::make_shared<Gather>(0, fn, pad),
                       {weight, idx});
  }
  Shape os = indices.shape();
  os.push_back(D);
  return reshape(out, os);
}

// ---------------------------------------------------------------- pad

PadMode pad_mode_from_string(const std::string& mode) {
  if (mode == "constant") return PadMode::Constant;
  if (mode == "reflect") return PadMode::Reflect;
  if (mode == "replicate") return PadMode::Replicate;
  if (mode == "circular") return PadMode::Circular;
  throw ValueError(errmsg("pad", "mode must be 'constant', 'reflect', 'replicate' or 'circular', got '" +
                                     mode + "'"));
}

Tensor pad(const Tensor& x_in, const std::vector<int64_t>& pads, PadMode mode, double value) {
  const char* fn = "pad";
  check_defined(x_in, fn);
  if (pads.size() % 2 != 0) {
    throw ValueError(errmsg(fn, "pad must have an even number of entries, got " +
                                    std::to_string(pads.size())));
  }
  const int k = static_cast<int>(pads.size() / 2);
  if (k > x_in.ndim()) {
    throw ValueError(errmsg(fn, "pad has " + std::to_string(pads.size()) + " entries (" +
                                    std::to_string(k) + " axes) for a " +
                                    std::to_string(x_in.ndim()) + "-d tensor"));
  }
  if (k > 7) throw ValueError(errmsg(fn, "at most 7 axes can be padded at once"));
  if (mode != PadMode::Constant && value != 0.0) {
    throw ValueError(errmsg(fn, "only mode 'constant' takes a fill value"));
  }
  if (mode == PadMode::Constant && !std::isfinite(value) && !is_floating(x_in.dtype())) {
    throw ValueError(errmsg(fn, "a non-finite fill value needs a floating-point tensor"));
  }
  if (mode == PadMode::Constant) check_value_fits(value, x_in.dtype(), fn);
  // Merge the unpadded leading axes into one (the kernels take <= 8 axes).
  Tensor x = x_in;
  const int lead = x_in.ndim() - k;
  if (lead > 1) {
    Shape s{1};
    for (int d = 0; d < lead; ++d) s[0] *= x_in.shape()[d];
    s.insert(s.end(), x_in.shape().begin() + lead, x_in.shape().end());
    x = reshape(x_in, s);
  }
  const int nd = x.ndim();
  std::vector<int64_t> lo(nd, 0);
  Shape out = x.shape(), final_shape = x_in.shape();
  bool noop = true;
  for (int i = 0; i < k; ++i) {
    const int d = nd - 1 - i;
    const int64_t l = pads[2 * i], h = pads[2 * i + 1], size = x.shape()[d];
    const int64_t n = checked_add(checked_add(size, l, fn), h, fn);
    if (n < 0) {
      throw ValueError(errmsg(fn, "axis " + std::to_string(x_in.ndim() - 1 - i) + " of size " +
                                      std::to_string(size) + " with padding (" + std::to_string(l) +
                                      ", " + std::to_string(h) + ") has a negative output size"));
    }
    if (mode != PadMode::Constant && (l > 0 || h > 0)) {
      const std::string where = "axis " + std::to_string(x_in.ndim() - 1 - i) + " of size " +
                                std::to_string(size);
      if (mode == PadMode::Reflect && (l >= size || h >= size)) {
        throw ValueError(errmsg(fn, "reflect padding (" + std::to_string(l) + ", " + std::to_string(h) +
                                        ") must be smaller than " + where));
      }
      if (mode == PadMode::Replicate && size == 0) {
        throw ValueError(errmsg(fn, "replicate padding of an empty " + where));
      }
      if (mode == PadMode::Circular && (l > size || h > size)) {
        throw ValueError(errmsg(fn, "circular padding (" + std::to_string(l) + ", " + std::to_string(h) +
                                        ") must not exceed " + where));
      }
    }
    lo[d] = l;
    out[d] = n;
    final_shape[x_in.ndim() - 1 - i] = n;
    noop &= l == 0 && h == 0;
  }
  if (noop) return x_in;
  Tensor y = Tensor::make(out, x.dtype(), x.device(), std::make_shared<Pad>(mode, value, lo), {x});
  return out == final_shape ? y : reshape(y, final_shape);
}

// ---------------------------------------------------------------- dropout

Tensor dropout(const Tensor& x, double p, bool training) {
  const char* fn = "dropout";
  check_defined(x, fn);
  if (!(p >= 0.0 && p < 1.0)) {
    throw ValueError(errmsg(fn, "p must be in [0, 1), got " + num_str(p)));
  }
  if (!is_floating(x.dtype())) {
    throw ValueError(errmsg(fn, std::string("needs a floating-point tensor, got ") + dtype_name(x.dtype())));
  }
  if (!training || p == 0.0) return x;
  return Tensor::make(x.shape(), x.dtype(), x.device(),
                      std::make_shared<Dropout>(p, draw_key(x.device())), {x});
}

// ---------------------------------------------------------------- batch_matmul

// ---------------------------------------------------------------- slice_update

Tensor slice_update(const Tensor& cache, const Tensor& update_in, int64_t start, int axis) {
  const char* fn = "slice_update";
  check_defined(cache, fn);
  check_defined(update_in, fn);
  check_same_device(cache, update_in, fn);
  if (cache.ndim() == 0) throw ValueError(errmsg(fn, "cache must have at least one dimension"));
  const int a = normalize_axis(axis, cache.ndim(), fn);
  bool ok = update_in.ndim() == cache.ndim();
  for (int d = 0; ok && d < cache.ndim(); ++d) ok = d == a || update_in.shape()[d] == cache.shape()[d];
  if (!ok) {
    throw ValueError(errmsg(fn, "update of shape " + shape_str(update_in.shape()) +
                                    " does not match cache of shape " + shape_str(cache.shape()) +
                                    " outside axis " + std::to_string(a)));
  }
  const int64_t len = update_in.shape()[a], cap = cache.shape()[a];
  if (start < 0 || start + len > cap) {
    throw ValueError(errmsg(fn, "positions [" + std::to_string(start) + ", " + std::to_string(start + len) +
                                    ") do not fit axis " + std::to_string(a) + " of size " +
                                    std::to_string(cap)));
  }
  Tensor update = astype(update_in, cache.dtype());
  return Tensor::make(cache.shape(), cache.dtype(), cache.device(), std::make_shared<SliceUpdate>(a, start),
                      {cache, update});
}

Tensor batch_matmul(const Tensor& a, const Tensor& b) {
  const char* fn = "batch_matmul";
  check_defined(a, fn);
  check_defined(b, fn);
  if (a.ndim() != 3 || b.ndim() != 3) {
    throw ValueError(errmsg(fn, "expected 3-d tensors (B, M, K) and (B, K, N), got shapes " +
                                    shape_str(a.shape()) + " and " + shape_str(b.shape())));
  }
  if (a.shape()[0] != b.shape()[0]) {
    throw ValueError(errmsg(fn, "batch sizes differ: " + shape_str(a.shape()) + " and " +
                                    shape_str(b.shape())));
  }
  if (a.shape()[2] != b.shape()[1]) {
    throw ValueError(errmsg(fn, "shapes " + shape_str(a.shape()) + " and " + shape_str(b.shape()) +
                                    " do not align"));
  }
  return matmul(a, b);
}

}  // namespace pyflame
