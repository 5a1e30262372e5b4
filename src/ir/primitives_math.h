// Primitives of the 'math' family: the Array API's elementwise functions
// beyond the core set. Inputs arrive broadcast to the output shape (any
// strides) in the compute dtype; predicates and logical ops give bool.
#pragma once
#include <cstdint>

#include "ir/primitive.h"

// Every primitive of this family, for the backends' lists.
#define PF_MATH_PRIMITIVES(X) \
  X(MathUnary)                \
  X(MathBinary)

namespace pyflame {

// Listed in groups; the op functions and kernels rely on the group order.
#define PF_MATH_UNARY_OPS(X)                                                                  \
  X(Acos) X(Acosh) X(Asin) X(Asinh) X(Atan) X(Atanh) X(Cosh) X(Sinh) X(Tan) X(Expm1) X(Log1p) \
  X(Log2) X(Log10) X(Floor) X(Ceil) X(Round) X(Trunc) X(Sign) X(BitwiseInvert)                \
  X(Signbit) X(IsNan) X(IsInf) X(IsFinite)

enum class MathUnaryOp : uint8_t {
#define PF_ENUM(n) n,
  PF_MATH_UNARY_OPS(PF_ENUM)
#undef PF_ENUM
};
const char* math_unary_name(MathUnaryOp op);
// Predicates: bool output.
constexpr bool is_predicate(MathUnaryOp op) { return op >= MathUnaryOp::Signbit; }

#define PF_MATH_BINARY_OPS(X)                                                            \
  X(Atan2) X(Hypot) X(Copysign) X(Nextafter) X(Logaddexp) X(FloorDivide) X(Remainder)    \
  X(BitwiseAnd) X(BitwiseOr) X(BitwiseXor) X(LeftShift) X(RightShift) X(LogicalAnd)      \
  X(LogicalOr) X(LogicalXor)

enum class MathBinaryOp : uint8_t {
#define PF_ENUM(n) n,
  PF_MATH_BINARY_OPS(PF_ENUM)
#undef PF_ENUM
};
const char* math_binary_name(MathBinaryOp op);
// Logical ops read bool inputs and give bool.
constexpr bool is_logical(MathBinaryOp op) { return op >= MathBinaryOp::LogicalAnd; }

class MathUnary : public Primitive {
 public:
  explicit MathUnary(MathUnaryOp o) : op(o) {}
  const char* name() const override { return math_unary_name(op); }
  PF_PARAMS(op)
  PF_EVAL_DECLS
  PF_VJP_DECL
  MathUnaryOp op;
};

class MathBinary : public Primitive {
 public:
  explicit MathBinary(MathBinaryOp o) : op(o) {}
  const char* name() const override { return math_binary_name(op); }
  PF_PARAMS(op)
  PF_EVAL_DECLS
  PF_VJP_DECL
  MathBinaryOp op;
};

}  // namespace pyflame
