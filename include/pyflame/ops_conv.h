// Ops of the 'conv' family (see ops.h for the contract): convolution,
// transposed convolution, pooling and batch normalization with the semantics
// of torch.nn.functional. Inputs are (N, C, *spatial) or, except for
// batch_norm, unbatched (C, *spatial). Per-axis parameters take one value
// (used for every spatial axis) or one value per spatial axis.
#pragma once
#include <optional>
#include <vector>

#include "pyflame/ops.h"

namespace pyflame {

using IntList = std::vector<int64_t>;

// ---- convolution ----
enum class ConvPadding { Explicit, Valid, Same };

Tensor conv1d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
              const IntList& stride = {1}, const IntList& padding = {0}, const IntList& dilation = {1},
              int64_t groups = 1);
Tensor conv2d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
              const IntList& stride = {1}, const IntList& padding = {0}, const IntList& dilation = {1},
              int64_t groups = 1);
Tensor conv3d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
              const IntList& stride = {1}, const IntList& padding = {0}, const IntList& dilation = {1},
              int64_t groups = 1);
// Any of the above (nspatial = 1, 2 or 3); `mode` Valid means zero padding,
// Same pads so that the output has the input's size (stride 1 only; an odd
// total padding puts the extra element at the end, as PyTorch does).
Tensor convolution(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias, int nspatial,
                   const IntList& stride, const IntList& padding, const IntList& dilation, int64_t groups,
                   ConvPadding mode = ConvPadding::Explicit);

// Transposed convolution: weight (Cin, Cout/groups, *k).
Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
                        const IntList& stride = {1}, const IntList& padding = {0},
                        const IntList& output_padding = {0}, int64_t groups = 1, const IntList& dilation = {1});
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
                        const IntList& stride = {1}, const IntList& padding = {0},
                        const IntList& output_padding = {0}, int64_t groups = 1, const IntList& dilation = {1});
Tensor conv_transpose3d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
                        const IntList& stride = {1}, const IntList& padding = {0},
                        const IntList& output_padding = {0}, int64_t groups = 1, const IntList& dilation = {1});
Tensor conv_transpose(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias, int nspatial,
                      const IntList& stride, const IntList& padding, const IntList& output_padding,
                      int64_t groups, const IntList& dilation);

// ---- pooling (an empty stride means stride = kernel_size) ----
Tensor max_pool1d(const Tensor& x, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, const IntList& dilation = {1}, bool ceil_mode = false);
Tensor max_pool2d(const Tensor& x, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, const IntList& dilation = {1}, bool ceil_mode = false);
Tensor max_pool3d(const Tensor& x, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, const IntList& dilation = {1}, bool ceil_mode = false);
Tensor avg_pool1d(const Tensor& x, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, bool ceil_mode = false, bool count_include_pad = true);
// divisor_override (non-zero) replaces every window's divisor.
Tensor avg_pool2d(const Tensor& x, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, bool ceil_mode = false, bool count_include_pad = true,
                  int64_t divisor_override = 0);
Tensor avg_pool3d(const Tensor& x, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, bool ceil_mode = false, bool count_include_pad = true,
                  int64_t divisor_override = 0);
// Output sizes per spatial axis; nullopt keeps the input's size.
Tensor adaptive_avg_pool1d(const Tensor& x, const std::vector<std::optional<int64_t>>& output_size);
Tensor adaptive_avg_pool2d(const Tensor& x, const std::vector<std::optional<int64_t>>& output_size);
Tensor adaptive_avg_pool3d(const Tensor& x, const std::vector<std::optional<int64_t>>& output_size);
Tensor adaptive_max_pool1d(const Tensor& x, const std::vector<std::optional<int64_t>>& output_size);
Tensor adaptive_max_pool2d(const Tensor& x, const std::vector<std::optional<int64_t>>& output_size);
Tensor adaptive_max_pool3d(const Tensor& x, const std::vector<std::optional<int64_t>>& output_size);

// ---- batch normalization over axis 1 of x (N, C, *spatial) ----
// Inference (training = false) normalizes with the running statistics.
// Training normalizes with the batch statistics (biased variance) and, where
// running statistics are given, returns their updated values
// (1 - momentum) * running + momentum * batch, with the unbiased batch
// variance, in the running tensors' dtypes. Tensors are immutable: the caller
// rebinds its running-statistics handles to the returned ones.
struct BatchNormResult {
  Tensor output;
  Tensor running_mean;  // undefined unless training with running statistics
  Tensor running_var;
};
BatchNormResult batch_norm_update(const Tensor& x, const std::optional<Tensor>& running_mean,
                                  const std::optional<Tensor>& running_var,
                                  const std::optional<Tensor>& weight = std::nullopt,
                                  const std::optional<Tensor>& bias = std::nullopt, bool training = false,
                                  double momentum = 0.1, double eps = 1e-5);
// The normalized output only.
Tensor batch_norm(const Tensor& x, const std::optional<Tensor>& running_mean,
                  const std::optional<Tensor>& running_var, const std::optional<Tensor>& weight = std::nullopt,
                  const std::optional<Tensor>& bias = std::nullopt, bool training = false,
                  double momentum = 0.1, double eps = 1e-5);

}  // namespace pyflame
