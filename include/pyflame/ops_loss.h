// Ops of the 'loss' family (see ops.h for the contract).
//
// Semantics follow torch.nn.functional. Class targets are int32 or int64;
// a target that is neither ignore_index nor in [0, C) raises IndexError when
// the loss is evaluated (on every device). Mean reduction with class weights
// or ignore_index divides by the sum of the weights of the non-ignored
// targets (NaN when there are none, as in PyTorch).
#pragma once
#include <optional>
#include <string_view>

#include "pyflame/ops.h"

namespace pyflame {

enum class LossReduction { None, Mean, Sum };

// "none", "mean" or "sum"; anything else raises ValueError naming `fn`.
LossReduction loss_reduction(std::string_view name, const char* fn);

// (input - target)^2, broadcasting; float result.
Tensor mse_loss(const Tensor& input, const Tensor& target,
                LossReduction reduction = LossReduction::Mean);

// logits (N, C) or (N, C, d1, ...) or (C,); target (N,) / (N, d1, ...) / ()
// of class indices. weight: (C,) class weights. label_smoothing in [0, 1].
Tensor cross_entropy(const Tensor& logits, const Tensor& target,
                     const std::optional<Tensor>& weight = {}, int64_t ignore_index = -100,
                     LossReduction reduction = LossReduction::Mean, double label_smoothing = 0.0);

// log_probs shaped like cross_entropy's logits: -weight[t] * log_probs[t].
Tensor nll_loss(const Tensor& log_probs, const Tensor& target,
                const std::optional<Tensor>& weight = {}, int64_t ignore_index = -100,
                LossReduction reduction = LossReduction::Mean);

// Binary cross entropy on probabilities; each log is clamped at -100 like
// PyTorch. weight broadcasts to the input's shape. Probabilities outside
// [0, 1] give NaN.
Tensor bce_loss(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight = {},
                LossReduction reduction = LossReduction::Mean);

}  // namespace pyflame
