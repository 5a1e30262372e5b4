// Losses. mse_loss and bce_loss are compositions of elementwise ops and
// reductions (16-bit inputs compute in float32 and round once at the end);
// cross_entropy and nll_loss record a per-target primitive (fused log-softmax
// and gather) plus, for the mean, the per-target weights it divides by.
#include <cmath>

#include "ops/op_utils.h"

namespace pyflame {

namespace {

// Losses compute in float32 (16-bit inputs round once, on the result).
constexpr Dtype kCompute = Dtype::Float32;

Tensor reduce_loss(const Tensor& l, LossReduction r) {
  switch (r) {
    case LossReduction::Mean: return mean(l);
    case LossReduction::Sum: return sum(l);
    default: return l;
  }
}

// Scores, target and weights of a class-index loss, in the primitives' layout.
struct ClassLoss {
  Tensor scores;  // (N, C, ...) row-major
  Tensor target;  // row-major integers
  std::optional<Tensor> weight;  // contiguous float32 (C)
  Shape out_shape;               // the target's shape
  int64_t classes = 0;
};

ClassLoss prepare_class_loss(const Tensor& scores, const Tensor& target,
                             const std::optional<Tensor>& weight, const char* fn,
                             const char* what) {
  check_defined(scores, fn);
  check_defined(target, fn);
  check_same_device(scores, target, fn);
  if (!is_floating(scores.dtype())) {
    throw ValueError(errmsg(fn, std::string("expected floating-point ") + what + ", got " +
                                    dtype_name(scores.dtype())));
  }
  if (target.dtype() != Dtype::Int32 && target.dtype() != Dtype::Int64) {
    throw ValueError(errmsg(fn, std::string("target must hold integer class indices (int32 or "
                                            "int64), got ") + dtype_name(target.dtype())));
  }
  if (scores.ndim() == 0) {
    throw ValueError(errmsg(fn, std::string(what) + " must be (C,), (N, C) or (N, C, d1, ...), got a "
                                                    "0-d tensor"));
  }
  ClassLoss cl;
  cl.out_shape = target.shape();
  Shape want;
  if (scores.ndim() == 1) {
    cl.classes = scores.shape()[0];
  } else {
    cl.classes = scores.shape()[1];
    want.push_back(scores.shape()[0]);
    want.insert(want.end(), scores.shape().begin() + 2, scores.shape().end());
  }
  if (target.shape() != want) {
    throw ValueError(errmsg(fn, "expected target of shape " + shape_str(want) + " for " + what +
                                    " of shape " + shape_str(scores.shape()) + ", got " +
                                    shape_str(target.shape())));
  }
  if (cl.classes == 0 && target.size() > 0) {
    throw ValueError(errmsg(fn, std::string(what) + " of shape " + shape_str(scores.shape()) +
                                    " have no classes"));
  }
  if (weight) {
    check_defined(*weight, fn);
    check_same_device(scores, *weight, fn);
    if (!is_floating(weight->dtype())) {
      throw ValueError(errmsg(fn, std::string("weight must be a floating-point tensor, got ") +
                                      dtype_name(weight->dtype())));
    }
    if (weight->shape() != Shape{cl.classes}) {
      throw ValueError(errmsg(fn, "weight must have shape (" + std::to_string(cl.classes) +
                                      ",), one per class, got " + shape_str(weight->shape())));
    }
    cl.weight = contiguous(astype(*weight, Dtype::Float32));
  }
  cl.scores = contiguous(scores.ndim() == 1 ? reshape(scores, {1, cl.classes}) : scores);
  cl.target = contiguous(target);
  return cl;
}

Tensor finish_class_loss(const ClassLoss& cl, Tensor per_target, int64_t ignore_index,
                         LossReduction reduction) {
  Tensor out;
  if (reduction == LossReduction::Mean) {
    std::vector<Tensor> in{cl.target};
    if (cl.weight) in.push_back(*cl.weight);
    Tensor w = Tensor::make(cl.target.shape(), Dtype::Float32, cl.target.device(),
                            std::make_shared<TargetWeight>(cl.classes, ignore_index,
                                                           cl.weight.has_value()),
                            std::move(in));
    out = div(sum(per_target), sum(w));
  } else {
    out = reduce_loss(per_target, reduction);
  }
  return astype(out, cl.scores.dtype());
}

}  // namespace

LossReduction loss_reduction(std::string_view name, const char* fn) {
  if (name == "mean") return LossReduction::Mean;
  if (name == "sum") return LossReduction::Sum;
  if (name == "none") return LossReduction::None;
  throw ValueError(errmsg(fn, "reduction must be 'none', 'mean' or 'sum', got '" + std::string(name) +
                                  "'"));
}

Tensor mse_loss(const Tensor& input, const Tensor& target, LossReduction reduction) {
  const char* fn = "mse_loss";
  check_defined(input, fn);
  check_defined(target, fn);
  check_same_device(input, target, fn);
  const Dtype t = promote_types(input.dtype(), target.dtype());
  if (!is_floating(t)) {
    throw ValueError(errmsg(fn, std::string("expected floating-point tensors, got ") +
                                    dtype_name(input.dtype()) + " and " + dtype_name(target.dtype())));
  }
  broadcast_shapes(input.shape(), target.shape(), fn);
  const Dtype ct = kCompute;
  Tensor d = sub(astype(input, ct), astype(target, ct));
  return astype(reduce_loss(mul(d, d), reduction), t);
}

Tensor bce_loss(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                LossReduction reduction) {
  const char* fn = "bce_loss";
  check_defined(input, fn);
  check_defined(target, fn);
  check_same_device(input, target, fn);
  if (!is_floating(input.dtype())) {
    throw ValueError(errmsg(fn, std::string("expected floating-point probabilities, got ") +
                                    dtype_name(input.dtype())));
  }
  if (target.dtype() == Dtype::Bool) {
    throw ValueError(errmsg(fn, "target must be a numeric tensor, got bool"));
  }
  if (target.shape() != input.shape()) {
    throw ValueError(errmsg(fn, "target of shape " + shape_str(target.shape()) +
                                    " must have the input's shape " + shape_str(input.shape())));
  }
  const Dtype ct = kCompute;
  const Device dev = input.device();
  // Probabilities outside [0, 1] (or NaN) raise when evaluated, as in
  // PyTorch, instead of giving NaN.
  Tensor p = Tensor::make(input.shape(), ct, dev,
                          std::make_shared<CheckRange>(0.0f, 1.0f, errmsg(fn, "all elements of input should be "
                                                                              "between 0 and 1")),
                          {contiguous(astype(input, ct))});
  Tensor y = astype(target, ct);
  Tensor one = scalar(1.0, ct, dev), lo = scalar(-100.0, ct, dev);
  Tensor log_p = maximum(log(p), lo);
  Tensor log_1mp = maximum(log(sub(one, p)), lo);
  // (y - 1) * log(1 - p) - y * log(p), as PyTorch computes it.
  Tensor loss = sub(mul(sub(y, one), log_1mp), mul(y, log_p));
  if (weight) {
    check_defined(*weight, fn);
    check_same_device(input, *weight, fn);
    if (broadcast_shapes(weight->shape(), input.shape(), fn) != input.shape()) {
      throw ValueError(errmsg(fn, "weight of shape " + shape_str(weight->shape()) +
                                      " does not broadcast to the input's shape " +
                                      shape_str(input.shape())));
    }
    if (weight->dtype() == Dtype::Bool) {
      throw ValueError(errmsg(fn, "weight must be a numeric tensor, got bool"));
    }
    loss = mul(loss, astype(*weight, ct));
  }
  return astype(reduce_loss(loss, reduction), input.dtype());
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const std::optional<Tensor>& weight,
                     int64_t ignore_index, LossReduction reduction, double label_smoothing) {
  const char* fn = "cross_entropy";
  if (!(label_smoothing >= 0.0 && label_smoothing <= 1.0)) {
    throw ValueError(errmsg(fn, "label_smoothing must be in [0, 1], got " +
                                    std::to_string(label_smoothing)));
  }
  ClassLoss cl = prepare_class_loss(logits, target, weight, fn, "logits");
  std::vector<Tensor> in{cl.scores, cl.target};
  if (cl.weight) in.push_back(*cl.weight);
  Tensor per = Tensor::make(cl.out_shape, Dtype::Float32, logits.device(),
                            std::make_shared<CrossEntropy>(ignore_index, label_smoothing,
                                                           cl.weight.has_value()),
                            std::move(in));
  return finish_class_loss(cl, per, ignore_index, reduction);
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const std::optional<Tensor>& weight,
                int64_t ignore_index, LossReduction reduction) {
  const char* fn = "nll_loss";
  ClassLoss cl = prepare_class_loss(log_probs, target, weight, fn, "log_probs");
  std::vector<Tensor> in{cl.scores, cl.target};
  if (cl.weight) in.push_back(*cl.weight);
  Tensor per = Tensor::make(cl.out_shape, Dtype::Float32, log_probs.device(),
                            std::make_shared<NllLoss>(ignore_index, cl.weight.has_value()),
                            std::move(in));
  return finish_class_loss(cl, per, ignore_index, reduction);
}

}  // namespace pyflame
