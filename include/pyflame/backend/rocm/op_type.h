// The op kinds named by the pointer-level GPU API (launch_* kernels and
// ROCmDNN), as the spec's ir::OpType.
#pragma once
#include <cstdint>

namespace pyflame::ir {

enum class OpType : uint8_t {
  // binary
  Add, Sub, Mul, Div, Pow, Maximum, Minimum,
  // unary (activations among them)
  Neg, Abs, Sqrt, Exp, Log, Sin, Cos, Tanh, Relu, Sigmoid, Gelu, Silu, Erf,
  // comparison
  Eq, Ne, Lt, Le, Gt, Ge,
  // reduction
  Sum, Mean, Max, Min, Prod,
  // pooling
  MaxPool, AvgPool,
};

const char* op_type_name(OpType op);

}  // namespace pyflame::ir
