// Shape ops. Each is a view (shared buffer, new strides) where the layout
// allows; reshape of a non-contiguous tensor copies first.
#include <algorithm>

#include "ops/op_utils.h"

namespace pyflame {

int normalize_axis(int axis, int ndim, const char* fn) {
  if (axis < -ndim || axis >= ndim) {
    throw ValueError(errmsg(fn, "axis " + std::to_string(axis) + " is out of range for a " +
                                    std::to_string(ndim) + "-d tensor"));
  }
  return axis < 0 ? axis + ndim : axis;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* fn) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      throw ValueError(errmsg(fn, "shapes " + shape_str(a) + " and " + shape_str(b) +
                                      " cannot be broadcast together"));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  check_defined(x, "broadcast_to");
  if (x.shape() == shape) return x;
  check_shape(shape, "broadcast_to");
  int nd = static_cast<int>(shape.size()), xd = x.ndim();
  if (xd > nd) {
    throw ValueError(errmsg("broadcast_to", "cannot broadcast " + shape_str(x.shape()) + " to " +
                                                shape_str(shape)));
  }
  Strides st(nd, 0);
  for (int i = 0; i < xd; ++i) {
    int64_t d = x.shape()[i], target = shape[nd - xd + i];
    if (d == target) {
      st[nd - xd + i] = x.strides()[i];
    } else if (d != 1) {
      throw ValueError(errmsg("broadcast_to", "cannot broadcast " + shape_str(x.shape()) +
                                                  " to " + shape_str(shape)));
    }
  }
  return Tensor::make_view(shape, std::move(st), x.offset(), std::make_shared<Broadcast>(), x);
}

Tensor reshape(const Tensor& x, Shape shape) {
  check_defined(x, "reshape");
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) throw ValueError(errmsg("reshape", "only one dimension can be -1"));
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      throw ValueError(errmsg("reshape", "invalid shape " + shape_str(shape)));
    } else {
      known = checked_mul(known, std::max<int64_t>(shape[i], 1), "reshape");
    }
  }
  if (infer >= 0) {
    bool has_zero = std::find(shape.begin(), shape.end(), 0) != shape.end();
    if (has_zero || x.size() % known != 0) {
      throw ValueError(errmsg("reshape", "cannot reshape " + shape_str(x.shape()) + " into " +
                                             shape_str(shape)));
    }
    shape[infer] = x.size() / known;
  }
  if (checked_shape_size(shape, "reshape") != x.size()) {
    throw ValueError(errmsg("reshape", "cannot reshape tensor of shape " + shape_str(x.shape()) +
                                           " (size " + std::to_string(x.size()) + ") into " +
                                           shape_str(shape)));
  }
  if (shape == x.shape()) return x;
  Tensor src = contiguous(x);
  Strides st = row_major_strides(shape);
  return Tensor::make_view(std::move(shape), std::move(st), src.offset(),
                           std::make_shared<Reshape>(), src);
}

Tensor flatten(const Tensor& x, int start, int end) {
  check_defined(x, "flatten");
  if (x.ndim() == 0) return reshape(x, {1});
  start = normalize_axis(start, x.ndim(), "flatten");
  end = normalize_axis(end, x.ndim(), "flatten");
  if (start > end) throw ValueError(errmsg("flatten", "start_axis must not come after end_axis"));
  Shape s(x.shape().begin(), x.shape().begin() + start);
  int64_t mid = 1;
  for (int i = start; i <= end; ++i) mid = checked_mul(mid, x.shape()[i], "flatten");
  s.push_back(mid);
  s.insert(s.end(), x.shape().begin() + end + 1, x.shape().end());
  return reshape(x, s);
}

Tensor transpose(const Tensor& x, std::vector<int> perm) {
  check_defined(x, "transpose");
  int nd = x.ndim();
  if (perm.empty()) {
    perm.resize(nd);
    for (int i = 0; i < nd; ++i) perm[i] = nd - 1 - i;
  }
  if (static_cast<int>(perm.size()) != nd) {
    throw ValueError(errmsg("transpose", "permutation has " + std::to_string(perm.size()) +
                                             " axes for a " + std::to_string(nd) + "-d tensor"));
  }
  // Axes seen: bits for the usual ranks (a weight's .T per layer per step
  // allocates nothing here), a vector beyond.
  uint64_t seen_bits = 0;
  std::vector<bool> seen(nd > 64 ? nd : 0, false);
  Shape s(nd);
  Strides st(nd);
  for (int i = 0; i < nd; ++i) {
    int a = normalize_axis(perm[i], nd, "transpose");
    const bool again = nd > 64 ? bool(seen[a]) : (seen_bits >> a) & 1;
    if (again) throw ValueError(errmsg("transpose", "repeated axis in permutation"));
    if (nd > 64) seen[a] = true;
    else seen_bits |= uint64_t(1) << a;
    perm[i] = a;
    s[i] = x.shape()[a];
    st[i] = x.strides()[a];
  }
  return Tensor::make_view(std::move(s), std::move(st), x.offset(), std::make_shared<Transpose>(std::move(perm)), x);
}

Tensor swapaxes(const Tensor& x, int a, int b) {
  check_defined(x, "swapaxes");
  std::vector<int> perm(x.ndim());
  for (int i = 0; i < x.ndim(); ++i) perm[i] = i;
  std::swap(perm[normalize_axis(a, x.ndim(), "swapaxes")], perm[normalize_axis(b, x.ndim(), "swapaxes")]);
  return transpose(x, perm);
}

Tensor squeeze(const Tensor& x, std::optional<Axes> axes) {
  check_defined(x, "squeeze");
  std::vector<bool> drop(x.ndim(), false);
  if (axes) {
    for (int a : *axes) {
      int n = normalize_axis(a, x.ndim(), "squeeze");
      if (x.shape()[n] != 1) {
        throw ValueError(errmsg("squeeze", "cannot squeeze axis " + std::to_string(a) +
                                               " of size " + std::to_string(x.shape()[n])));
      }
      if (drop[n]) throw ValueError(errmsg("squeeze", "repeated axis " + std::to_string(a)));
      drop[n] = true;
    }
  } else {
    for (int i = 0; i < x.ndim(); ++i) drop[i] = x.shape()[i] == 1;
  }
  Shape s;
  Strides st;
  for (int i = 0; i < x.ndim(); ++i) {
    if (!drop[i]) {
      s.push_back(x.shape()[i]);
      st.push_back(x.strides()[i]);
    }
  }
  if (s.size() == x.shape().size()) return x;
  return Tensor::make_view(std::move(s), std::move(st), x.offset(), std::make_shared<Squeeze>(), x);
}

Tensor unsqueeze(const Tensor& x, int axis) {
  check_defined(x, "unsqueeze");
  int nd = x.ndim();
  int a = normalize_axis(axis, nd + 1, "unsqueeze");
  Shape s = x.shape();
  Strides st = x.strides();
  int64_t stride = 1;  // any stride serves a size-1 axis; prefer the row-major one
  if (a < nd && __builtin_mul_overflow(st[a], s[a], &stride)) stride = st[a];
  s.insert(s.begin() + a, 1);
  st.insert(st.begin() + a, stride);
  return Tensor::make_view(std::move(s), std::move(st), x.offset(), std::make_shared<Unsqueeze>(), x);
}

namespace {
// Python slice semantics (CPython's PySlice_AdjustIndices) for one axis.
int64_t adjust_slice(int64_t dim, int64_t& start, int64_t& stop, int64_t step) {
  auto clampi = [&](int64_t& v) {
    if (v < 0) {
      v = v < -dim ? (step < 0 ? -1 : 0) : v + dim;
    } else if (v >= dim) {
      v = step < 0 ? dim - 1 : dim;
    }
  };
  clampi(start);
  clampi(stop);
  if (step < 0) return stop < start ? (start - stop - 1) / (-step) + 1 : 0;
  return start < stop ? (stop - start - 1) / step + 1 : 0;
}
}  // namespace

Tensor slice(const Tensor& x, const std::vector<int64_t>& starts, const std::vector<int64_t>& stops,
             const std::vector<int64_t>& steps) {
  check_defined(x, "slice");
  int nd = x.ndim();
  if (static_cast<int>(starts.size()) != nd || static_cast<int>(stops.size()) != nd ||
      static_cast<int>(steps.size()) != nd) {
    throw ValueError(errmsg("slice", "starts, stops and steps need one entry per axis"));
  }
  Shape s(nd);
  Strides st(nd);
  std::vector<int64_t> first(nd, 0);
  int64_t offset = x.offset();
  for (int i = 0; i < nd; ++i) {
    if (steps[i] == 0) throw ValueError(errmsg("slice", "slice step cannot be zero"));
    int64_t b = starts[i], e = stops[i];
    s[i] = adjust_slice(x.shape()[i], b, e, steps[i]);
    // One element needs no stride: a huge step must not overflow it.
    st[i] = s[i] > 1 ? checked_mul(x.strides()[i], steps[i], "slice", "stride") : x.strides()[i];
    if (s[i] > 0) {
      offset += b * x.strides()[i];
      first[i] = b;
    }
  }
  return Tensor::make_view(std::move(s), std::move(st), offset,
                           std::make_shared<Slice>(std::move(first), steps), x);
}

Tensor select(const Tensor& x, int axis, int64_t index) {
  check_defined(x, "select");
  int a = normalize_axis(axis, x.ndim(), "getitem");
  int64_t dim = x.shape()[a];
  if (index < -dim || index >= dim) {
    throw IndexError(errmsg("getitem", "index " + std::to_string(index) +
                                           " is out of bounds for axis " + std::to_string(a) +
                                           " with size " + std::to_string(dim)));
  }
  if (index < 0) index += dim;
  Shape s = x.shape();
  Strides st = x.strides();
  int64_t offset = x.offset() + index * st[a];
  s.erase(s.begin() + a);
  st.erase(st.begin() + a);
  std::vector<int64_t> first(x.ndim(), 0), steps(x.ndim(), 1);
  first[a] = index;
  return Tensor::make_view(std::move(s), std::move(st), offset,
                           std::make_shared<Slice>(std::move(first), std::move(steps), a), x);
}

}  // namespace pyflame
