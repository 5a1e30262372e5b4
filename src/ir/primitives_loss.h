// Primitives of the 'loss' family: the per-target parts of the class-index
// losses. Each writes float32 of the target's shape. Inputs: scores (N, C, S)
// row-major (S the product of any trailing dims, 1 for (N, C)), the target
// (N, S) row-major int32 or int64, and, with has_weight, the class weights
// as a contiguous float32 (C) vector. A target that is neither ignore_index
// nor in [0, C) raises IndexError (checked on the device on the GPU).
#pragma once
#include <cstdint>
#include <string>

#include "ir/primitive.h"

// Every primitive of this family, for the backends' lists.
#define PF_LOSS_PRIMITIVES(X) \
  X(CrossEntropy)             \
  X(NllLoss)                  \
  X(TargetWeight)             \
  X(CheckRange)

namespace pyflame {

// The IndexError message for a class target outside [0, classes).
inline std::string loss_target_error(const char* fn, int64_t target, int64_t classes,
                                     int64_t ignore_index) {
  return errmsg(fn, "target " + std::to_string(target) + " is out of range for " +
                        std::to_string(classes) + " classes (expected a value in [0, " +
                        std::to_string(classes) + ") or ignore_index " +
                        std::to_string(ignore_index) + ")");
}

// Fused log-softmax over C and gather: (1 - s) * w[t] * -logp[t]
// + s / C * sum_c w[c] * -logp[c]; 0 for ignored targets.
class CrossEntropy : public Primitive {
 public:
  CrossEntropy(int64_t ignore, double smoothing, bool w)
      : ignore_index(ignore), label_smoothing(smoothing), has_weight(w) {}
  const char* name() const override { return "cross_entropy"; }
  PF_PARAMS(ignore_index, label_smoothing, has_weight)
  PF_EVAL_DECLS
  PF_VJP_DECL
  int64_t ignore_index;
  double label_smoothing;
  bool has_weight;
};

// -w[t] * log_probs[t]; 0 for ignored targets.
class NllLoss : public Primitive {
 public:
  NllLoss(int64_t ignore, bool w) : ignore_index(ignore), has_weight(w) {}
  const char* name() const override { return "nll_loss"; }
  PF_PARAMS(ignore_index, has_weight)
  PF_EVAL_DECLS
  PF_VJP_DECL
  int64_t ignore_index;
  bool has_weight;
};

// The weight a target contributes to a mean: 0 when ignored, else w[t] (1
// without weights). Inputs: target, [weight]; `classes` is C. Out-of-range
// targets give 0 here (the loss primitive they come with reports them).
class TargetWeight : public Primitive {
 public:
  TargetWeight(int64_t classes_, int64_t ignore, bool w)
      : classes(classes_), ignore_index(ignore), has_weight(w) {}
  const char* name() const override { return "loss_target_weight"; }
  PF_PARAMS(classes, ignore_index, has_weight)
  PF_EVAL_DECLS
  PF_VJP_DECL
  int64_t classes;
  int64_t ignore_index;
  bool has_weight;
};

// A copy of a row-major float32 tensor that raises ValueError (message
// `message`) when an element lies outside [lo, hi] or is NaN: the data check
// of bce_loss's probabilities, as PyTorch makes it. Its gradient is the identity.
class CheckRange : public Primitive {
 public:
  CheckRange(float lo_, float hi_, std::string msg) : lo(lo_), hi(hi_), message(std::move(msg)) {}
  const char* name() const override { return "check_range"; }
  PF_PARAMS(lo, hi, message)
  PF_EVAL_DECLS
  PF_VJP_DECL
  float lo, hi;
  std::string message;
};

}  // namespace pyflame
