// The spec's launch_* kernels (pyflame/backend/rocm/kernels.h) over the
// backend's own ops, through raw::Call.
#include "pyflame/backend/rocm/kernels.h"

#include "backend/rocm/raw_ops.h"
#include "pyflame/errors.h"
#include "pyflame/ops.h"
#include "pyflame/ops_loss.h"

namespace pyflame::ir {

const char* op_type_name(OpType op) {
  static const char* const names[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "neg",
                                      "abs", "sqrt", "exp", "log", "sin", "cos", "tanh", "relu",
                                      "sigmoid", "gelu", "silu", "erf", "eq", "ne", "lt", "le",
                                      "gt", "ge", "sum", "mean", "max", "min", "prod", "max_pool",
                                      "avg_pool"};
  const auto i = static_cast<size_t>(op);
  return i < sizeof(names) / sizeof(names[0]) ? names[i] : "unknown";
}

}  // namespace pyflame::ir

namespace pyflame::backend::rocm {

using ir::OpType;

namespace {

constexpr Dtype F32 = Dtype::Float32;

[[noreturn]] void bad_op(const char* fn, OpType op) {
  throw ValueError(errmsg(fn, std::string("unsupported op '") + ir::op_type_name(op) + "'"));
}

Tensor binary(OpType op, const Tensor& a, const Tensor& b, const char* fn) {
  switch (op) {
    case OpType::Add: return add(a, b);
    case OpType::Sub: return sub(a, b);
    case OpType::Mul: return mul(a, b);
    case OpType::Div: return div(a, b);
    case OpType::Pow: return pow(a, b);
    case OpType::Maximum: return maximum(a, b);
    case OpType::Minimum: return minimum(a, b);
    default: bad_op(fn, op);
  }
}

Tensor compare(OpType op, const Tensor& a, const Tensor& b, const char* fn) {
  switch (op) {
    case OpType::Eq: return eq(a, b);
    case OpType::Ne: return ne(a, b);
    case OpType::Lt: return lt(a, b);
    case OpType::Le: return le(a, b);
    case OpType::Gt: return gt(a, b);
    case OpType::Ge: return ge(a, b);
    default: bad_op(fn, op);
  }
}

}  // namespace

// Shared with ROCmDNN::activation_forward.
Tensor unary_op(OpType op, const Tensor& x, const char* fn) {
  switch (op) {
    case OpType::Neg: return neg(x);
    case OpType::Abs: return abs(x);
    case OpType::Sqrt: return sqrt(x);
    case OpType::Exp: return exp(x);
    case OpType::Log: return log(x);
    case OpType::Sin: return sin(x);
    case OpType::Cos: return cos(x);
    case OpType::Tanh: return tanh(x);
    case OpType::Relu: return relu(x);
    case OpType::Sigmoid: return sigmoid(x);
    case OpType::Gelu: return gelu(x);
    case OpType::Silu: return silu(x);
    case OpType::Erf: return erf(x);
    default: bad_op(fn, op);
  }
}

void launch_gelu_forward(float* output, const float* input, int64_t numel, hipStream_t stream) {
  launch_elementwise_unary(OpType::Gelu, output, input, numel, stream);
}

void launch_silu_forward(float* output, const float* input, int64_t numel, hipStream_t stream) {
  launch_elementwise_unary(OpType::Silu, output, input, numel, stream);
}

void launch_elementwise_unary(OpType op, float* output, const float* input, int64_t numel, hipStream_t stream) {
  const char* fn = "launch_elementwise_unary";
  const Shape s = raw::vector_shape(numel, fn);
  raw::Call call(stream, fn);
  call.output(unary_op(op, call.input(input, s, F32), fn), output);
}

void launch_elementwise_binary(OpType op, float* output, const float* a, const float* b, int64_t numel,
                               hipStream_t stream) {
  const char* fn = "launch_elementwise_binary";
  const Shape s = raw::vector_shape(numel, fn);
  raw::Call call(stream, fn);
  call.output(binary(op, call.input(a, s, F32), call.input(b, s, F32), fn), output);
}

void launch_comparison(OpType op, float* output, const float* a, const float* b, int64_t numel,
                       hipStream_t stream) {
  const char* fn = "launch_comparison";
  const Shape s = raw::vector_shape(numel, fn);
  raw::Call call(stream, fn);
  call.output(astype(compare(op, call.input(a, s, F32), call.input(b, s, F32), fn), F32), output);
}

void launch_where(float* output, const float* condition, const float* x, const float* y, int64_t numel,
                  hipStream_t stream) {
  const char* fn = "launch_where";
  const Shape s = raw::vector_shape(numel, fn);
  raw::Call call(stream, fn);
  const Tensor cond = astype(call.input(condition, s, F32), Dtype::Bool);
  call.output(where(cond, call.input(x, s, F32), call.input(y, s, F32)), output);
}

void launch_clamp(float* output, const float* input, float min_val, float max_val, int64_t numel,
                  hipStream_t stream) {
  const char* fn = "launch_clamp";
  const Shape s = raw::vector_shape(numel, fn);
  raw::Call call(stream, fn);
  call.output(clamp(call.input(input, s, F32), min_val, max_val), output);
}

void launch_mse_loss(float* output, const float* predictions, const float* targets, int64_t numel,
                     hipStream_t stream) {
  const char* fn = "launch_mse_loss";
  const Shape s = raw::vector_shape(numel, fn);
  raw::Call call(stream, fn);
  call.output(mse_loss(call.input(predictions, s, F32), call.input(targets, s, F32)), output);
}

void launch_bce_loss(float* output, const float* predictions, const float* targets, int64_t numel,
                     hipStream_t stream) {
  const char* fn = "launch_bce_loss";
  const Shape s = raw::vector_shape(numel, fn);
  raw::Call call(stream, fn);
  call.output(bce_loss(call.input(predictions, s, F32), call.input(targets, s, F32)), output);
}

void launch_cross_entropy_loss(float* output, const float* logits, const int32_t* targets, int64_t N, int64_t C,
                               hipStream_t stream) {
  const char* fn = "launch_cross_entropy_loss";
  if (N < 0 || C <= 0) {
    throw ValueError(errmsg(fn, "N must be >= 0 and C > 0, got N=" + std::to_string(N) + ", C=" +
                                    std::to_string(C)));
  }
  raw::Call call(stream, fn);
  call.output(cross_entropy(call.input(logits, {N, C}, F32), call.input(targets, {N}, Dtype::Int32)), output);
}

}  // namespace pyflame::backend::rocm
