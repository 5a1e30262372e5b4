// Op functions of the scatter family: put, scatter and scatter_add.
#include <algorithm>
#include <memory>
#include <string>

#include "ops/op_utils.h"

namespace pyflame {

namespace {

void check_index_dtype(const Tensor& index, const char* fn) {
  if (index.dtype() != Dtype::Int32 && index.dtype() != Dtype::Int64) {
    throw ValueError(errmsg(fn, std::string("index must be an int32 or int64 tensor, got ") +
                                    dtype_name(index.dtype())));
  }
}

// The shared checks of scatter and scatter_add; returns src cut to index's
// shape (a 0-d src broadcasts) in x's dtype.
Tensor scatter_source(const Tensor& x, int axis, const Tensor& index, const Tensor& src,
                      const char* fn) {
  for (const Tensor* t : {&x, &index, &src}) check_defined(*t, fn);
  check_same_device(x, index, fn);
  check_same_device(x, src, fn);
  check_index_dtype(index, fn);
  if (index.ndim() != x.ndim() || (src.ndim() != 0 && src.ndim() != x.ndim())) {
    throw ValueError(errmsg(fn, "index " + shape_str(index.shape()) + " and src " +
                                    shape_str(src.shape()) + " must have the ndim of x " +
                                    shape_str(x.shape())));
  }
  for (int d = 0; d < x.ndim(); ++d) {
    const int64_t m = index.shape()[d];
    if ((src.ndim() != 0 && m > src.shape()[d]) || (d != axis && m > x.shape()[d])) {
      throw ValueError(errmsg(fn, "index " + shape_str(index.shape()) + " is larger than src " +
                                      shape_str(src.shape()) + " or than x " +
                                      shape_str(x.shape()) + " off axis " + std::to_string(axis)));
    }
  }
  Tensor s = astype(src, x.dtype());
  if (s.ndim() == 0) return broadcast_to(s, index.shape());
  return slice(s, std::vector<int64_t>(s.ndim(), 0), index.shape(),
               std::vector<int64_t>(s.ndim(), 1));
}

}  // namespace

Tensor put(const Tensor& x, const Tensor& index_in, const Tensor& source) {
  const char* fn = "put";
  for (const Tensor* t : {&x, &index_in, &source}) check_defined(*t, fn);
  check_same_device(x, index_in, fn);
  check_same_device(x, source, fn);
  check_index_dtype(index_in, fn);
  if (broadcast_shapes(source.shape(), index_in.shape(), fn) != index_in.shape()) {
    throw ValueError(errmsg(fn, "source of shape " + shape_str(source.shape()) +
                                    " does not broadcast to index's shape " +
                                    shape_str(index_in.shape())));
  }
  Tensor src = contiguous(broadcast_to(astype(source, x.dtype()), index_in.shape()));
  return Tensor::make(x.shape(), x.dtype(), x.device(), std::make_shared<Put>(),
                      {x, contiguous(index_in), src});
}

Tensor scatter_add(const Tensor& x, int axis, const Tensor& index, const Tensor& src) {
  const char* fn = "scatter_add";
  check_defined(x, fn);
  const int a = normalize_axis(axis, std::max(x.ndim(), 1), fn);
  Tensor s = scatter_source(x, a, index, src, fn);
  if (!is_floating(x.dtype())) {
    throw ValueError(errmsg(fn, std::string("only floating-point tensors are supported, got ") +
                                    dtype_name(x.dtype())));
  }
  Tensor added = Tensor::make(x.shape(), x.dtype(), x.device(), std::make_shared<ScatterAdd>(a, fn),
                              {s, contiguous(index)});
  return add(x, added);
}

Tensor scatter(const Tensor& x, int axis, const Tensor& index, const Tensor& src) {
  const char* fn = "scatter";
  check_defined(x, fn);
  const int a = normalize_axis(axis, std::max(x.ndim(), 1), fn);
  Tensor s = scatter_source(x, a, index, src, fn);
  // Flat positions: index along `axis`, the element's own coordinate on
  // the other axes, each times x's row-major stride. An index outside
  // [0, size) becomes a position past the end, so put raises at evaluation
  // instead of writing into a neighbouring row.
  const Strides st = row_major_strides(x.shape());
  const Device dev = x.device();
  Tensor idx = astype(index, Dtype::Int64);
  const Tensor size_a = scalar(static_cast<double>(x.ndim() ? x.shape()[a] : 1), Dtype::Int64, dev);
  Tensor pos = mul(idx, scalar(static_cast<double>(x.ndim() ? st[a] : 1), Dtype::Int64, dev));
  for (int d = 0; d < x.ndim(); ++d) {
    if (d == a) continue;
    Shape sh(x.ndim(), 1);
    sh[d] = index.shape()[d];
    Tensor coord = reshape(arange(0, static_cast<double>(sh[d]), 1, Dtype::Int64, dev), sh);
    pos = add(pos, mul(coord, scalar(static_cast<double>(st[d]), Dtype::Int64, dev)));
  }
  const double beyond = static_cast<double>(std::max<int64_t>(x.size(), 1));
  const Tensor past_end = scalar(beyond, Dtype::Int64, dev);
  pos = where(lt(idx, scalar(0, Dtype::Int64, dev)), past_end, pos);
  pos = where(ge(idx, size_a), past_end, pos);
  return Tensor::make(x.shape(), x.dtype(), x.device(),
                      std::make_shared<Put>(fn, a, x.ndim() ? x.shape()[a] : 1),
                      {x, contiguous(pos), contiguous(s)});
}

Tensor clone(const Tensor& x) {
  check_defined(x, "clone");
  return Tensor::make(x.shape(), x.dtype(), x.device(), std::make_shared<AsType>(), {x});
}

}  // namespace pyflame
