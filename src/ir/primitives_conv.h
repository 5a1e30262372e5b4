// Primitives of the 'conv' family: convolution (forward and transposed),
// pooling and batch normalization over 1 to 3 spatial axes. Inputs are
// row-major (the op functions make them contiguous), except the data input
// x of a forward Conv and of ConvWeightGrad, which may also be channels-last
// dense (conv_data_input); layouts are (N, C, *spatial) with the batch axis
// always present.
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
  X(BatchNorm)                \
  X(ConvWeightGrad)           \
  X(PoolGrad)                 \
  X(AdaptivePoolGrad)

namespace pyflame {

// Geometry of a convolution: one entry per spatial axis.
struct ConvGeometry {
  std::vector<int64_t> stride, padding, dilation;
  std::vector<int64_t> output_padding;  // transposed only
  int64_t groups = 1;
  bool transposed = false;
  int nspatial() const { return static_cast<int>(stride.size()); }
  void params(ParamSink& sink) const { sink(stride, padding, dilation, output_padding, groups, transposed); }
};

// Whether x (N, C, *spatial) is dense in the memory order (N, *spatial, C):
// a channels-last tensor (a permutation of a row-major NHWC array).
bool is_channels_last(const Tensor& x);

// The data input of a forward convolution or its weight gradient: x itself
// when row-major or channels-last dense (the GPU's channels-last path reads
// it without a conversion), else a row-major copy.
Tensor conv_data_input(const Tensor& x);

// Inputs: x (N, Cin, *in), weight, and optionally bias (Cout). Forward:
// weight (Cout, Cin/groups, *k). Transposed (the gradient of the forward
// convolution with respect to its input): weight (Cin, Cout/groups, *k).
class Conv : public Primitive {
 public:
  Conv(ConvGeometry g, bool bias) : geom(std::move(g)), has_bias(bias) {
    nm = std::string(geom.transposed ? "conv_transpose" : "conv") + std::to_string(geom.nspatial()) + "d";
  }
  const char* name() const override { return nm.c_str(); }
  PF_PARAMS(geom, has_bias)
  PF_EVAL_DECLS
  PF_VJP_DECL
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
  PF_PARAMS(kind, kernel, stride, padding, dilation, ceil_mode, count_include_pad, divisor_override)
  int nspatial() const { return static_cast<int>(kernel.size()); }
  PF_EVAL_DECLS
  PF_VJP_DECL
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
  PF_PARAMS(kind)
  PF_EVAL_DECLS
  PF_VJP_DECL
  PoolKind kind;
  std::string nm;
};

// Per-channel statistics of x (N, C, *spatial): a float32 (2, C) output,
// row 0 the mean, row 1 the biased variance, over every axis but 1.
class BatchNormStats : public Primitive {
 public:
  const char* name() const override { return "batch_norm"; }
  PF_NO_PARAMS
  PF_EVAL_DECLS
  PF_VJP_DECL
};

// y = (x - mean) / sqrt(var + eps) * weight + bias per channel (axis 1).
// Inputs: x (N, C, *spatial), then mean, var, weight, bias, each a float32
// (C) vector. batch_stats: mean and var are x's batch statistics (training),
// which gradients flow through; otherwise they are running statistics,
// constants of the graph.
class BatchNorm : public Primitive {
 public:
  explicit BatchNorm(double e, bool batch = false) : eps(e), batch_stats(batch) {}
  const char* name() const override { return "batch_norm"; }
  PF_PARAMS(eps, batch_stats)
  PF_EVAL_DECLS
  PF_VJP_DECL
  double eps;
  bool batch_stats;
};

// ---- backward primitives (no vjp of their own: gradients are not
// differentiated again) ----

// The gradient of a forward convolution with respect to its weight. Inputs:
// x (N, Cin, *in), the convolution's input, and gy (N, Cout, *out), the
// cotangent of its output (out by the forward rule of geom). Output
// (Cout, Cin/groups, *k): dw[k][c][t] = sum over n, o of
// gy[n][k][o] * x[n][g*Cin/groups + c][o*stride - padding + t*dilation]
// (zero outside x) for k in group g.
class ConvWeightGrad : public Primitive {
 public:
  explicit ConvWeightGrad(ConvGeometry g) : geom(std::move(g)) {
    nm = "conv" + std::to_string(geom.nspatial()) + "d_weight_grad";
  }
  const char* name() const override { return nm.c_str(); }
  PF_PARAMS(geom)
  PF_EVAL_DECLS
  ConvGeometry geom;
  std::string nm;
};

// The gradient of pooling with respect to its input. Inputs: x (N, C, *in),
// y = pool(x) and gy (y's cotangent); output dx (x's shape). Max pooling
// sends each output's cotangent to the first maximum of its window (the
// last NaN where there is one), as PyTorch; averaging spreads it over the
// window with the forward divisor.
class PoolGrad : public Primitive {
 public:
  explicit PoolGrad(const Pool& p) : pool(p) { nm = std::string(p.name()) + "_grad"; }
  const char* name() const override { return nm.c_str(); }
  PF_PARAMS(pool)
  PF_EVAL_DECLS
  Pool pool;  // the forward pooling's parameters
  std::string nm;
};

// The gradient of adaptive pooling with respect to its input. Inputs:
// x (N, C, *in) and gy (N, C, *out); output dx (x's shape), with
// AdaptivePool's windows and PoolGrad's rules.
class AdaptivePoolGrad : public Primitive {
 public:
  AdaptivePoolGrad(PoolKind k, int nsp)
      : kind(k), nm(std::string(k == PoolKind::Max ? "adaptive_max_pool" : "adaptive_avg_pool") +
                    std::to_string(nsp) + "d_grad") {}
  const char* name() const override { return nm.c_str(); }
  PF_PARAMS(kind)
  PF_EVAL_DECLS
  PoolKind kind;
  std::string nm;
};

}  // namespace pyflame
