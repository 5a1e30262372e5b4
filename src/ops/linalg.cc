// The 'linalg' family's op functions: checks, the compute dtype and one
// Lapack node per output (see ir/primitives_linalg.h).
#include <algorithm>

#include "ops/op_utils.h"

namespace pyflame {

const char* Lapack::name() const {
  static const char* names[] = {"linalg.cholesky", "linalg.inv", "linalg.det", "linalg.slogdet",
                                "linalg.solve",    "linalg.qr",  "linalg.eigh", "linalg.svd"};
  return names[static_cast<int>(op)];
}

namespace linalg {

namespace {

// Row-major stacks in a dtype LAPACK takes (float32; wider floats as they are).
Tensor prepare(const Tensor& x, const char* fn, bool square) {
  check_defined(x, fn);
  if (x.ndim() < 2) {
    throw ValueError(errmsg(fn, "expected a stack of matrices (at least 2-d), got shape " + shape_str(x.shape())));
  }
  if (square && x.shape(-1) != x.shape(-2)) {
    throw ValueError(errmsg(fn, "expected square matrices, got shape " + shape_str(x.shape())));
  }
  Dtype t = is_floating(x.dtype()) && itemsize(x.dtype()) >= 4 ? x.dtype() : Dtype::Float32;
  return contiguous(astype(x, t));
}

Tensor node(LapackOp op, int output, bool flag, Shape shape, std::vector<Tensor> inputs) {
  Tensor x = inputs[0];
  return Tensor::make(std::move(shape), x.dtype(), x.device(), std::make_shared<Lapack>(op, output, flag),
                      std::move(inputs));
}

Shape batch(const Tensor& x) { return Shape(x.shape().begin(), x.shape().end() - 2); }

Shape with(Shape s, std::initializer_list<int64_t> tail) {
  s.insert(s.end(), tail);
  return s;
}

}  // namespace

Tensor cholesky(const Tensor& x_in, bool upper) {
  Tensor x = prepare(x_in, "linalg.cholesky", true);
  return node(LapackOp::Cholesky, 0, upper, x.shape(), {x});
}

Tensor inv(const Tensor& x_in) {
  Tensor x = prepare(x_in, "linalg.inv", true);
  return node(LapackOp::Inv, 0, false, x.shape(), {x});
}

Tensor det(const Tensor& x_in) {
  Tensor x = prepare(x_in, "linalg.det", true);
  return node(LapackOp::Det, 0, false, batch(x), {x});
}

std::pair<Tensor, Tensor> slogdet(const Tensor& x_in) {
  Tensor x = prepare(x_in, "linalg.slogdet", true);
  return {node(LapackOp::Slogdet, 0, false, batch(x), {x}), node(LapackOp::Slogdet, 1, false, batch(x), {x})};
}

Tensor solve(const Tensor& a_in, const Tensor& b_in) {
  const char* fn = "linalg.solve";
  Tensor a = prepare(a_in, fn, true);
  check_defined(b_in, fn);
  check_same_device(a_in, b_in, fn);
  const int64_t n = a.shape(-1);
  const bool vector = b_in.ndim() == 1;
  if (b_in.ndim() == 0 || (vector && b_in.shape(0) != n) || (!vector && b_in.shape(-2) != n)) {
    throw ValueError(errmsg(fn, "shapes " + shape_str(a_in.shape()) + " and " + shape_str(b_in.shape()) +
                                    " do not align"));
  }
  Tensor b = astype(vector ? unsqueeze(b_in, 1) : b_in, a.dtype());
  Shape bb = broadcast_shapes(batch(a), batch(b), fn);
  a = contiguous(broadcast_to(a, with(bb, {n, n})));
  b = contiguous(broadcast_to(b, with(bb, {n, b.shape(-1)})));
  Tensor x = node(LapackOp::Solve, 0, false, b.shape(), {a, b});
  return vector ? squeeze(x, Axes{x.ndim() - 1}) : x;
}

std::pair<Tensor, Tensor> qr(const Tensor& x_in, bool complete) {
  Tensor x = prepare(x_in, "linalg.qr", false);
  const int64_t m = x.shape(-2), n = x.shape(-1), k = std::min(m, n);
  Shape qs = with(batch(x), {m, complete ? m : k});
  Shape rs = with(batch(x), {complete ? m : k, n});
  return {node(LapackOp::Qr, 0, complete, qs, {x}), node(LapackOp::Qr, 1, complete, rs, {x})};
}

std::pair<Tensor, Tensor> eigh(const Tensor& x_in) {
  Tensor x = prepare(x_in, "linalg.eigh", true);
  const int64_t n = x.shape(-1);
  return {node(LapackOp::Eigh, 0, false, with(batch(x), {n}), {x}), node(LapackOp::Eigh, 1, false, x.shape(), {x})};
}

Tensor eigvalsh(const Tensor& x_in) {
  Tensor x = prepare(x_in, "linalg.eigvalsh", true);
  return node(LapackOp::Eigh, 0, false, with(batch(x), {x.shape(-1)}), {x});
}

std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& x_in, bool full) {
  Tensor x = prepare(x_in, "linalg.svd", false);
  const int64_t m = x.shape(-2), n = x.shape(-1), k = std::min(m, n);
  Shape us = with(batch(x), {m, full ? m : k}), vs = with(batch(x), {full ? n : k, n});
  return {node(LapackOp::Svd, 0, full, us, {x}), node(LapackOp::Svd, 1, full, with(batch(x), {k}), {x}),
          node(LapackOp::Svd, 2, full, vs, {x})};
}

Tensor svdvals(const Tensor& x_in) {
  Tensor x = prepare(x_in, "linalg.svdvals", false);
  const int64_t k = std::min(x.shape(-2), x.shape(-1));
  return node(LapackOp::Svd, 1, false, with(batch(x), {k}), {x});
}

}  // namespace linalg

}  // namespace pyflame
