// Every compute primitive, grouped by op family. Each family's kernels live
// in backend/cpu/<family>.cc and backend/rocm/kernels/<family>.hip.
#pragma once
#include <cstdint>

#include "ir/primitive.h"
#include "ir/primitives_conv.h"
#include "ir/primitives_index.h"
#include "ir/primitives_linalg.h"
#include "ir/primitives_llm.h"
#include "ir/primitives_loss.h"
#include "ir/primitives_math.h"
#include "ir/primitives_norm.h"
#include "ir/primitives_scatter.h"
#include "ir/primitives_sort.h"

namespace pyflame {

// The list every backend implements (a build without GPU stubs eval_gpu).
#define PF_FOR_EACH_PRIMITIVE(X) \
  X(Full)                        \
  X(Arange)                      \
  X(Eye)                         \
  X(Random)                      \
  X(Unary)                       \
  X(Binary)                      \
  X(Where)                       \
  X(AsType)                      \
  X(ToDevice)                    \
  X(DownloadTo)                  \
  X(Reduce)                      \
  X(Softmax)                     \
  X(Matmul)                      \
  X(FusedGemm)                   \
  PF_CONV_PRIMITIVES(X)          \
  PF_INDEX_PRIMITIVES(X)         \
  PF_LINALG_PRIMITIVES(X)        \
  PF_LLM_PRIMITIVES(X)           \
  PF_LOSS_PRIMITIVES(X)          \
  PF_MATH_PRIMITIVES(X)          \
  PF_NORM_PRIMITIVES(X)          \
  PF_SCATTER_PRIMITIVES(X)       \
  PF_SORT_PRIMITIVES(X)


// ---- creation ----
class Full : public Primitive {
 public:
  explicit Full(double v) : value(v) {}
  const char* name() const override { return "full"; }
  Family family() const override { return Family::Full; }
  PF_PARAMS(value)
  PF_EVAL_DECLS
  // Full ignores its inputs when it has any: an op whose result is a
  // constant (a reduction over zero elements) keeps its input here so the
  // input stays in the autograd graph, with a zero gradient.
  PF_VJP_DECL
  double value;
};

class Arange : public Primitive {
 public:
  Arange(double s, double st) : start(s), step(st) {}
  const char* name() const override { return "arange"; }
  PF_PARAMS(start, step)
  PF_EVAL_DECLS
  double start, step;
};

class Eye : public Primitive {
 public:
  explicit Eye(int64_t diag) : k(diag) {}
  const char* name() const override { return "eye"; }
  PF_PARAMS(k)
  PF_EVAL_DECLS
  int64_t k;
};

// Counter-based: element i of a draw is a pure function of (key, i).
class Random : public Primitive {
 public:
  enum Kind { Uniform, Normal, Integer };
  Random(Kind kd, uint64_t ky, int64_t lo = 0, int64_t hi = 0)
      : kind(kd), key(ky), low(lo), high(hi) {}
  const char* name() const override {
    return kind == Uniform ? "rand" : kind == Normal ? "randn" : "randint";
  }
  PF_PARAMS(kind, key, low, high)
  PF_EVAL_DECLS
  Kind kind;
  uint64_t key;
  int64_t low, high;
};

// ---- elementwise ----
enum class UnaryOp : uint8_t {
  Neg, Abs, Sqrt, Exp, Log, Sin, Cos, Tanh, Relu, Sigmoid, Gelu, GeluTanh, Silu, Erf
};
const char* unary_name(UnaryOp op);

class Unary : public Primitive {
 public:
  explicit Unary(UnaryOp o) : op(o) {}
  const char* name() const override { return unary_name(op); }
  Family family() const override { return Family::Unary; }
  PF_PARAMS(op)
  PF_EVAL_DECLS
  PF_VJP_DECL
  UnaryOp op;
};

enum class BinaryOp : uint8_t {
  Add, Sub, Mul, Div, Pow, Maximum, Minimum, Eq, Ne, Lt, Le, Gt, Ge
};
const char* binary_name(BinaryOp op);
constexpr bool is_comparison(BinaryOp op) { return op >= BinaryOp::Eq; }

// Inputs have the output's shape (broadcast views) and the same dtype.
// With a scalar operand (a Python number: `x * 0.5`, `1 - x`) the one input
// is the tensor operand and the number travels to the kernel as an
// argument, converted to the input dtype exactly as full() would store it;
// scalar_side says which operand it is (0: a, 1: b).
class Binary : public Primitive {
 public:
  explicit Binary(BinaryOp o) : op(o) {}
  Binary(BinaryOp o, int side, double value) : op(o), scalar_side(side), scalar(value) {}
  const char* name() const override { return binary_name(op); }
  Family family() const override { return Family::Binary; }
  PF_PARAMS(op, scalar_side, scalar)
  PF_EVAL_DECLS
  PF_VJP_DECL
  bool has_scalar() const { return scalar_side >= 0; }
  BinaryOp op;
  int scalar_side = -1;  // -1: two tensor inputs
  double scalar = 0.0;
};

// Inputs: bool condition, a, b; all broadcast to the output shape.
class Where : public Primitive {
 public:
  const char* name() const override { return "where"; }
  Family family() const override { return Family::Where; }
  PF_NO_PARAMS
  PF_EVAL_DECLS
  PF_VJP_DECL
};

// Converts (or just copies, for the same dtype) into a row-major output.
class AsType : public Primitive {
 public:
  const char* name() const override { return "astype"; }
  Family family() const override { return Family::AsType; }
  PF_NO_PARAMS
  PF_EVAL_DECLS
  PF_VJP_DECL
};

// Moves data between devices; runs on the destination's backend.
class ToDevice : public Primitive {
 public:
  const char* name() const override { return "to"; }
  PF_NO_PARAMS
  PF_EVAL_DECLS
  PF_VJP_DECL
};

// Copies its row-major GPU input into caller-owned host memory, evaluated
// with whatever produces the input (Tensor::copy_to_host): a download lands
// in the destination directly, with no host tensor in between. The output
// is a 0-d byte on the CPU that nothing reads.
class DownloadTo : public Primitive {
 public:
  explicit DownloadTo(void* d) : dst(d) {}
  const char* name() const override { return "copy_to_host"; }
  PF_PARAMS(reinterpret_cast<uintptr_t>(dst))
  PF_EVAL_DECLS
  void* dst;
};

// ---- reductions ----
enum class ReduceOp : uint8_t { Sum, Mean, Max, Min, Prod };

// Output keeps reduced axes as size 1; `axes` are sorted and normalized.
class Reduce : public Primitive {
 public:
  Reduce(ReduceOp o, std::vector<int> ax) : op(o), axes(std::move(ax)) {}
  const char* name() const override;
  Family family() const override { return Family::Reduce; }
  PF_PARAMS(op, axes)
  PF_EVAL_DECLS
  PF_VJP_DECL
  ReduceOp op;
  std::vector<int> axes;
};

// ---- softmax: over the last axis ----
class Softmax : public Primitive {
 public:
  explicit Softmax(bool lg) : log(lg) {}
  const char* name() const override { return log ? "log_softmax" : "softmax"; }
  PF_PARAMS(log)
  PF_EVAL_DECLS
  PF_VJP_DECL
  bool log;
};

// ---- matmul: (B..., M, K) x (B..., K, N), batch dims already broadcast ----
class Matmul : public Primitive {
 public:
  const char* name() const override { return "matmul"; }
  PF_NO_PARAMS
  PF_EVAL_DECLS
  PF_VJP_DECL
};

// A 2-D product with what follows it done in the GEMM library's epilogue:
// y = a @ b, then with `bias` y + bias (bias of shape (N,), float32 only:
// the library adds it before rounding, which for 16-bit outputs is one
// rounding fewer than the unfused ops), then with `relu` relu(y).
// Recorded by add and relu on a GPU with fusion on, gradients included
// (docs/design/fusion.md, "GEMM epilogues"). Inputs: a, b, and with `bias`
// the bias.
class FusedGemm : public Primitive {
 public:
  FusedGemm(bool b, bool r) : bias(b), relu(r) {}
  const char* name() const override { return "fused_gemm"; }
  PF_PARAMS(bias, relu)
  PF_EVAL_DECLS
  PF_VJP_DECL
  // The same values through the unfused primitives, one kernel each: the
  // GPU's path when the library cannot take the epilogue.
  void eval_unfused(const std::vector<Tensor>& in, Tensor& out) const;
  bool bias, relu;
};

// ---- views (layout fixed at record time; no kernels) ----
// Each keeps what its vjp needs to map a cotangent back to the input. The
// layout itself belongs to the node (its shape, strides and offset), so these
// four carry no parameters.
#define PF_VIEW(Cls, nm)                             \
  class Cls : public ViewPrimitive {                 \
   public:                                           \
    const char* name() const override { return nm; } \
    PF_NO_PARAMS                                     \
    PF_VJP_DECL                                      \
  };
PF_VIEW(Reshape, "reshape")
PF_VIEW(Broadcast, "broadcast_to")
PF_VIEW(Squeeze, "squeeze")
PF_VIEW(Unsqueeze, "unsqueeze")
#undef PF_VIEW

class Transpose : public ViewPrimitive {
 public:
  explicit Transpose(std::vector<int> p) : perm(std::move(p)) {}
  const char* name() const override { return "transpose"; }
  PF_PARAMS(perm)
  PF_VJP_DECL
  std::vector<int> perm;
};

// Basic slicing. `starts` are the adjusted first indices per input axis;
// `dropped_axis` is the axis an integer index removed (select), or -1.
class Slice : public ViewPrimitive {
 public:
  Slice(std::vector<int64_t> st, std::vector<int64_t> sp, int dropped = -1)
      : starts(std::move(st)), steps(std::move(sp)), dropped_axis(dropped) {}
  const char* name() const override { return "slice"; }
  PF_PARAMS(starts, steps, dropped_axis)
  PF_VJP_DECL
  std::vector<int64_t> starts, steps;
  int dropped_axis;
};

// detach(): shares the data and cuts the autograd history.
class StopGradient : public ViewPrimitive {
 public:
  const char* name() const override { return "detach"; }
  PF_NO_PARAMS
};

}  // namespace pyflame
