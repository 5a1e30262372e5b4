// DNN library wrapper (spec: ROCmDNN): convolution, pooling and batch
// normalization through MIOpen on AMD and cuDNN 9 on NVIDIA (its legacy
// API, and its graph API for 16-bit channels-last convolutions), behind one
// platform-neutral interface. Each device/stream pair has
// one library handle, created on first use bound to that stream and used by
// one thread at a time. Tensors are dense row-major (N, C, *spatial) arrays
// of float32, float16 or bfloat16; 1-d problems run as 2-d with a unit
// height. Convolutions accumulate in fp32 (TF32 only with set_allow_tf32).
// The algorithm of each convolution problem comes from the tuning cache
// (pyflame/backend/tuning.h) or, on a miss, from an exhaustive (Find) or
// heuristic (Get) search whose answer is cached. On cuDNN, Find's leading
// candidates are timed again, warm, with the math type each runs with, since
// its own cold single timings reorder them from one process to the next.
//
// Layout. Both libraries reach their tensor-core (NVIDIA) and matrix-core
// (AMD) convolution kernels for 16-bit floats through channels-last
// tensors: NHWC activations and KRSC filters (the channel axis innermost).
// With NCHW, cuDNN's legacy API picks slow kernels (a bf16 3x3 convolution
// took 5x PyTorch's channels-last time on an H100). Our tensors are NCHW, so
// a float16 or bfloat16 convolution with 1 or 2 spatial axes and per-group
// channel counts that are multiples of 8 (what the tensor-core kernels
// take) runs channels-last inside the call: its inputs are transposed into
// scratch (transpose_batched, a tiled kernel at copy speed), the library
// runs NHWC, and the result is transposed back. An input x that is
// channels-last already (a PyTorch-style channels-last tensor: the op
// functions pass one through, see ir/primitives_conv.h) is read as it is.
// Outputs are always row-major, so every consumer of a convolution reads
// its usual layout. Weights are converted on every call (they change every
// training step; a filter is small). A channels-last problem the library
// rejects (not supported, no algorithm) is remembered in the tuning cache
// and runs NCHW: never an error, never a different answer. float32 stays
// NCHW (already within 10% of PyTorch there). PYFLAME_CONV_LAYOUT=nchw
// turns the channels-last path off and =nhwc takes it for every floating
// type and channel count (runtime/settings.h), to measure one against the
// other.
//
// On NVIDIA a row-major 16-bit problem first goes to cuDNN's graph API as it
// is (library_layout_only): its engines convert NCHW to NHWC and back inside
// the call, as PyTorch runs them, in less time than our transposes (a bf16
// 3x3 convolution of 32x256x14x14: 29.4 us of kernels, PyTorch's exact
// kernels, against 36.9 us with our transposes, H100). Only where it builds
// no plan do the transposes run. The 16-bit transposes move element pairs
// in 64x64 tiles, and a filter's few columns (KCRS -> KRSC) go through a
// gather kernel instead of mostly empty tiles.
//
// cuDNN's graph API. Even channels-last, cuDNN's legacy API picks no
// tensor-core NHWC kernel for float16/bfloat16 on Hopper (a bf16 3x3
// convolution: 147 us against PyTorch's 35.5 us on an H100). Its graph
// ("backend") API does, as PyTorch uses it: on NVIDIA every 16-bit
// channels-last batch chunk, in each direction, is an operation graph of one
// convolution node (NHWC tensors, a KRSC filter, fp32 compute type); mode-A
// heuristics rank engine configurations, and the first that finalizes into
// an execution plan (skipping engines that convert inputs down or reduce in
// reduced precision, and plans asking for more than the workspace limit) is
// kept in memory per problem (shapes, strides, dtype, geometry, groups,
// device, operand alignment) and handle. Its workspace comes from our
// allocator on the evaluation's stream, and it runs on the handle bound to
// that stream. A problem with no plan is remembered and runs through the
// legacy API, which stays the reference; PYFLAME_CUDNN_GRAPH=0 sends every
// problem there. Plans are chosen by heuristics, not timed, and are not in
// the tuning cache. pyflame.backend.rocm.dnn_graph_stats() counts plans
// built, problems without one (and why the latest has none) and runs.
//
// Code: dnn.cc holds the shared part (handles, problem keys, the layout
// path, the API), dnn_cudnn.cc and dnn_miopen.cc the vendor calls and
// dnn_cudnn_graph.cc the graph API, behind dnn_vendor.h.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/rocm/context.h"
#include "pyflame/dtype.h"
#include "pyflame/tensor.h"

namespace pyflame::backend::rocm::dnn {

// A convolution in the forward sense: x (N, C, *in) * w (K, C/groups, *k)
// -> y (N, K, *out), PyTorch's cross-correlation. Shapes are always in this
// logical order and the data dense. The API below takes row-major operands,
// except that x, when it is an input (forward, weight gradient), may be
// channels-last (memory order (N, *in, C)) with x_channels_last set.
// channels_last is the layout of a library call (set by the wrapper): x and
// y as (N, *spatial, C), w as (K, *k, C/groups).
struct ConvProblem {
  Dtype dtype = Dtype::Float32;
  Shape x, w, y;
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;
  bool x_channels_last = false;
  bool channels_last = false;
  // Only through the library's own handling of this memory order (cuDNN's
  // graph API): a chunk without such a plan returns false, writing nothing.
  bool library_layout_only = false;
};

// y = conv(x, w).
void conv_forward(DeviceContext& ctx, const ConvProblem& p, const void* x, const void* w, void* y);

// The gradient of conv_forward with respect to x, written into x: PyTorch's
// transposed convolution of `y` (here the input) by w. `p.x` must be
// consistent with p.y under the forward rule (output_padding beyond what
// that rule absorbs is handled by the caller).
void conv_backward_data(DeviceContext& ctx, const ConvProblem& p, void* x, const void* w, const void* y);

// The gradient of conv_forward with respect to w, written into w (the
// backward-filter / backward-weights pass), from x and the output
// cotangent y.
void conv_backward_weights(DeviceContext& ctx, const ConvProblem& p, const void* x, void* w, const void* y);

// dst (B, C, R) = src (B, R, C) for `batch` dense matrices of `itemsize`-byte
// elements, on ctx's stream: the layout conversions of the channels-last
// path (kernels/conv.hip).
void transpose_batched(DeviceContext& ctx, size_t itemsize, int64_t batch, int64_t rows, int64_t cols,
                       const void* src, void* dst);

// The library handle bound to ctx's stream (created on first use).
gpu::dnn_handle_t handle(DeviceContext& ctx);

enum class PoolMode { Max, AvgIncludePad, AvgExcludePad };

// Pooling when the library expresses it exactly (no dilation, output size
// by the floor rule, supported dtype); returns false, having launched
// nothing, otherwise, and the caller runs its own kernel. Pool::eval_gpu
// uses it for average pooling only: the libraries start a max window at
// -FLT_MAX, so an all -inf window would not give -inf.
bool pool_forward(DeviceContext& ctx, Dtype dtype, PoolMode mode, const Shape& x_shape, const void* x,
                  const Shape& y_shape, void* y, const std::vector<int64_t>& kernel,
                  const std::vector<int64_t>& stride, const std::vector<int64_t>& padding);

// The input gradient dx of average pooling from the output cotangent dy
// (x and y are the forward pass's input and output), under the same
// conditions as pool_forward; false (nothing launched) otherwise. Max
// pooling always returns false: neither library promises PyTorch's rule for
// ties (the first maximum of the window gets the gradient; cuDNN picks one
// of them nondeterministically), so the caller's kernel runs.
bool pool_backward(DeviceContext& ctx, Dtype dtype, PoolMode mode, const Shape& x_shape, const void* x, void* dx,
                   const Shape& y_shape, const void* y, const void* dy, const std::vector<int64_t>& kernel,
                   const std::vector<int64_t>& stride, const std::vector<int64_t>& padding);

// y = (x - mean) / sqrt(var + eps) * scale + bias per channel (axis 1), with
// float32 per-channel vectors; false (nothing launched) when the library
// cannot run it.
bool batch_norm_inference(DeviceContext& ctx, Dtype dtype, const Shape& x_shape, const void* x, void* y,
                          const float* scale, const float* bias, const float* mean, const float* var,
                          double eps);

}  // namespace pyflame::backend::rocm::dnn
