// Primitives of the 'norm' family. Each normalizes rows of a row-major input
// and writes a row-major output of the input's shape and dtype. The optional
// affine inputs come after x, as contiguous float32 vectors.
#pragma once
#include <cstdint>

#include "ir/primitive.h"

// Every primitive of this family, for the backends' lists.
#define PF_NORM_PRIMITIVES(X) \
  X(LayerNorm)                \
  X(RMSNorm)                  \
  X(GroupNorm)

namespace pyflame {

// Inputs: x, [weight (cols)], [bias (cols)]. Rows of `cols` elements (the
// product of normalized_shape) are normalized with mean and biased variance.
class LayerNorm : public Primitive {
 public:
  LayerNorm(int64_t cols_, double eps_, bool w, bool b)
      : cols(cols_), eps(eps_), has_weight(w), has_bias(b) {}
  const char* name() const override { return "layer_norm"; }
  PF_PARAMS(cols, eps, has_weight, has_bias)
  PF_EVAL_DECLS
  PF_VJP_DECL
  int64_t cols;
  double eps;
  bool has_weight, has_bias;
};

// Inputs: x, [weight (last dim)]. x / sqrt(mean(x^2) + eps) * weight over the last axis.
class RMSNorm : public Primitive {
 public:
  RMSNorm(double eps_, bool w) : eps(eps_), has_weight(w) {}
  const char* name() const override { return "rms_norm"; }
  PF_PARAMS(eps, has_weight)
  PF_EVAL_DECLS
  PF_VJP_DECL
  double eps;
  bool has_weight;
};

// Inputs: x (N, C, *), [weight (C)], [bias (C)]. Each (sample, group) is one
// contiguous row of (C / groups) * spatial elements.
class GroupNorm : public Primitive {
 public:
  GroupNorm(int64_t groups_, double eps_, bool w, bool b)
      : groups(groups_), eps(eps_), has_weight(w), has_bias(b) {}
  const char* name() const override { return "group_norm"; }
  PF_PARAMS(groups, eps, has_weight, has_bias)
  PF_EVAL_DECLS
  PF_VJP_DECL
  int64_t groups;
  double eps;
  bool has_weight, has_bias;
};

}  // namespace pyflame
