// The spec's kernel launchers: float32 arrays of `numel` elements in device
// memory, queued as if on `stream` (the work starts after what the stream
// holds and the stream waits for the output). They run the backend's own
// kernels, the ones tensor ops use, through the eval loop (see
// src/backend/rocm/raw_ops.h); inputs and output are dense and may not
// overlap. Errors: ValueError for a bad op or size, RuntimeError without a GPU.
#pragma once
#include <cstdint>

#include "pyflame/backend/rocm/gpu_build.h"
#include "backend/rocm/gpu/runtime.h"  // NOLINT(build/include_order)
#include "pyflame/backend/rocm/op_type.h"

namespace pyflame::backend::rocm {

// Activations: gelu (erf form), silu.
void launch_gelu_forward(float* output, const float* input, int64_t numel, hipStream_t stream);
void launch_silu_forward(float* output, const float* input, int64_t numel, hipStream_t stream);

// op: Add, Sub, Mul, Div, Pow, Maximum or Minimum.
void launch_elementwise_binary(ir::OpType op, float* output, const float* a, const float* b, int64_t numel,
                               hipStream_t stream);
// op: Neg, Abs, Sqrt, Exp, Log, Sin, Cos, Tanh, Relu, Sigmoid, Gelu, Silu or Erf.
void launch_elementwise_unary(ir::OpType op, float* output, const float* input, int64_t numel,
                              hipStream_t stream);
// op: Eq, Ne, Lt, Le, Gt or Ge; output 1.0 where true, else 0.0.
void launch_comparison(ir::OpType op, float* output, const float* a, const float* b, int64_t numel,
                       hipStream_t stream);

// output = condition != 0 ? x : y.
void launch_where(float* output, const float* condition, const float* x, const float* y, int64_t numel,
                  hipStream_t stream);
void launch_clamp(float* output, const float* input, float min_val, float max_val, int64_t numel,
                  hipStream_t stream);

// Losses write one float, the mean over the elements (rows for cross entropy).
void launch_mse_loss(float* output, const float* predictions, const float* targets, int64_t numel,
                     hipStream_t stream);
// predictions are probabilities in [0, 1].
void launch_bce_loss(float* output, const float* predictions, const float* targets, int64_t numel,
                     hipStream_t stream);
// logits (N, C), targets (N) class indices in [0, C).
void launch_cross_entropy_loss(float* output, const float* logits, const int32_t* targets, int64_t N, int64_t C,
                               hipStream_t stream);

}  // namespace pyflame::backend::rocm
