// Primitives of the 'conv' family: convolution (forward and transposed),
// pooling and batch normalization over 1 to 3 spatial axes. Inputs are
// row-major (the op functions make them contiguous); layouts are
// (N, C, *spatial) with the batch axis always present.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/primitive.h"

// Every primitive of this family, for the backends' lists.
#define PF_CONV_PRIMITIVES(X) \
  X(Conv)                     \
  X(Pool)                     \
  X(AdaptivePool)             \
  X(BatchNormStats)           \
  X(BatchNorm)

namespace pyflame {

// Geometry of a convolution: one entry per spatial axis.
struct ConvGeometry {
  std::vector<int64_t> stride, padding, dilation;
  std::vector<int64_t> output_padding;  // transposed only
  int64_t groups = 1;
  bool transposed = false;
  int nspatial() const { return static_cast<int>(stride.size()); }
};

// Inputs: x (N, Cin, *in), weight, and optionally bias (Cout). Forward:
// weight (Cout, Cin/groups, *k). Transposed (the gradient of the forward
// convolution with respect to its input): weight (Cin, Cout/groups, *k).
class Conv : public Primitive {
 public:
  Conv(ConvGeometry g, bool bias) : geom(std::move(g)), has_bias(bias) {
    nm = std::string(geom.transposed ? "conv_transpose" : "conv") + std::to_string(geom.nspatial()) + "d";
  }
  const char* name() const override { return nm.c_str(); }
  PF_EVAL_DECLS
  ConvGeometry geom;
  bool has_bias;
  std::string nm;
};

enum class PoolKind : uint8_t { Max, Avg };

// Input x (N, C, *in); output (N, C, *out) with the output size fixed by the
// op function (PyTorch's rule, ceil_mode included).
class Pool : public Primitive {
 public:
  Pool(PoolKind k, std::vector<int64_t> ks, std::vector<int64_t> st, std::vector<int64_t> pd,
       std::vector<int64_t> dl, bool ceil, bool include_pad, int64_t divisor = 0)
      : kind(k), kernel(std::move(ks)), stride(std::move(st)), padding(std::move(pd)),
        dilation(std::move(dl)), ceil_mode(ceil), count_include_pad(include_pad), divisor_override(divisor) {
    nm = std::string(kind == PoolKind::Max ? "max_pool" : "avg_pool") + std::to_string(kernel.size()) + "d";
  }
  const char* name() const override { return nm.c_str(); }
  int nspatial() const { return static_cast<int>(kernel.size()); }
  PF_EVAL_DECLS
  PoolKind kind;
  std::vector<int64_t> kernel, stride, padding, dilation;
  bool ceil_mode, count_include_pad;
  int64_t divisor_override;  // average pooling: non-zero replaces the divisor
  std::string nm;
};

// Input x (N, C, *in); output (N, C, *out). Output cell o along an axis of
// input size I averages (or takes the max of, NaN propagating) the input
// cells [floor(o*I/O), ceil((o+1)*I/O)).
class AdaptivePool : public Primitive {
 public:
  AdaptivePool(PoolKind k, int nsp)
      : kind(k), nm(std::string(k == PoolKind::Max ? "adaptive_max_pool" : "adaptive_avg_pool") +
                    std::to_string(nsp) + "d") {}
  const char* name() const override { return nm.c_str(); }
  PF_EVAL_DECLS
  PoolKind kind;
  std::string nm;
};

// Per-channel statistics of x (N, C, *spatial): a float32 (2, C) output,
// row 0 the mean, row 1 the biased variance, over every axis but 1.
class BatchNormStats : public Primitive {
 public:
  const char* name() const override { return "batch_norm"; }
  PF_EVAL_DECLS
};

// y = (x - mean) / sqrt(var + eps) * weight + bias per channel (axis 1).
// Inputs: x (N, C, *spatial), then mean, var, weight, bias, each a float32
// (C) vector.
class BatchNorm : public Primitive {
 public:
  explicit BatchNorm(double e) : eps(e) {}
  const char* name() const override { return "batch_norm"; }
  PF_EVAL_DECLS
  double eps;
};

}  // namespace pyflame
