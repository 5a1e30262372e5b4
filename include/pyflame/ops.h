// The op API. Each function checks its arguments, infers shape and dtype and
// records a node; nothing is computed until evaluation.
#pragma once
#include <optional>
#include <vector>

#include "pyflame/tensor.h"

namespace pyflame {

using Axes = std::vector<int>;
using OptDevice = std::optional<Device>;

// ---- creation ----
Tensor full(const Shape& shape, double value, Dtype dtype = Dtype::Float32,
            OptDevice device = {});
Tensor zeros(const Shape& shape, Dtype dtype = Dtype::Float32, OptDevice device = {});
Tensor ones(const Shape& shape, Dtype dtype = Dtype::Float32, OptDevice device = {});
// A 0-d constant; scalars in binary ops become these, then broadcast.
Tensor scalar(double value, Dtype dtype, OptDevice device = {});
Tensor arange(double start, double stop, double step, Dtype dtype = Dtype::Float32,
              OptDevice device = {});
Tensor eye(int64_t n, int64_t m = -1, int64_t k = 0, Dtype dtype = Dtype::Float32,
           OptDevice device = {});

// ---- random (counter-based: the same seed gives the same numbers on every device) ----
void manual_seed(uint64_t seed);
// The generator's state (the seed and how many draws it has given), saved
// and restored to replay random ops (checkpointing recomputes dropout).
struct RngState {
  uint64_t seed = 0, counter = 0;
};
RngState get_rng_state();
void set_rng_state(const RngState& state);
Tensor rand(const Shape& shape, Dtype dtype = Dtype::Float32, OptDevice device = {});
Tensor randn(const Shape& shape, Dtype dtype = Dtype::Float32, OptDevice device = {});
Tensor randint(int64_t low, int64_t high, const Shape& shape, Dtype dtype = Dtype::Int64,
               OptDevice device = {});

// ---- elementwise (broadcasting) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);  // true division: ints give float32
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor gelu(const Tensor& x, bool tanh_approx = false);
Tensor silu(const Tensor& x);
Tensor erf(const Tensor& x);

// ---- comparison and selection ----
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi);

// ---- type and device ----
Tensor astype(const Tensor& x, Dtype dtype);
Tensor to_device(const Tensor& x, Device device);
Tensor contiguous(const Tensor& x);  // row-major copy unless already row-major

// ---- shape (views where the layout allows) ----
Tensor reshape(const Tensor& x, Shape shape);  // one -1 allowed
Tensor flatten(const Tensor& x, int start_axis = 0, int end_axis = -1);
Tensor transpose(const Tensor& x, std::vector<int> perm);  // empty: reverse
Tensor swapaxes(const Tensor& x, int a, int b);
Tensor squeeze(const Tensor& x, std::optional<Axes> axes = {});
Tensor unsqueeze(const Tensor& x, int axis);
Tensor broadcast_to(const Tensor& x, const Shape& shape);
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* fn = "broadcast");
// Basic slicing along every axis; stops are clamped like Python slices.
Tensor slice(const Tensor& x, const std::vector<int64_t>& starts,
             const std::vector<int64_t>& stops, const std::vector<int64_t>& steps);
Tensor select(const Tensor& x, int axis, int64_t index);  // x[..., i, ...]

// ---- reductions (empty axes: all) ----
Tensor sum(const Tensor& x, Axes axes = {}, bool keepdim = false);
Tensor mean(const Tensor& x, Axes axes = {}, bool keepdim = false);
Tensor max(const Tensor& x, Axes axes = {}, bool keepdim = false);
Tensor min(const Tensor& x, Axes axes = {}, bool keepdim = false);
Tensor prod(const Tensor& x, Axes axes = {}, bool keepdim = false);

// ---- softmax ----
Tensor softmax(const Tensor& x, int axis = -1);
Tensor log_softmax(const Tensor& x, int axis = -1);

// ---- linear algebra ----
Tensor matmul(const Tensor& a, const Tensor& b);
// x @ weight.T + bias, as nn.Linear: weight (out_features, in_features),
// bias (out_features,) or undefined for none. The ops it records are those
// three (the transposed weight a view).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// Normalizes an axis against ndim or raises "[fn] axis ... out of range".
int normalize_axis(int axis, int ndim, const char* fn);

}  // namespace pyflame

// Op families beyond the core slice, one header each.
#include "pyflame/ops_conv.h"   // NOLINT(build/include_order)
#include "pyflame/ops_index.h"  // NOLINT
#include "pyflame/ops_linalg.h" // NOLINT
#include "pyflame/ops_llm.h"    // NOLINT
#include "pyflame/ops_loss.h"   // NOLINT
#include "pyflame/ops_math.h"   // NOLINT
#include "pyflame/ops_norm.h"   // NOLINT
#include "pyflame/ops_scatter.h"  // NOLINT
#include "pyflame/ops_sort.h"   // NOLINT
