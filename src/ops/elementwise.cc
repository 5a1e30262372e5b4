// Elementwise, comparison, selection, type and device ops.
#include <cmath>

#include "ops/op_utils.h"

namespace pyflame {

const char* unary_name(UnaryOp op) {
  static const char* names[] = {"neg",  "abs",  "sqrt",    "exp",  "log",       "sin", "cos",
                                "tanh", "relu", "sigmoid", "gelu", "gelu_tanh", "silu", "erf"};
  return names[static_cast<int>(op)];
}

const char* binary_name(BinaryOp op) {
  static const char* names[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum",
                                "eq",  "ne",  "lt",  "le",  "gt",  "ge"};
  return names[static_cast<int>(op)];
}

namespace {

// A constant that can travel as a kernel argument: an unevaluated 0-d
// full() of the compute dtype, made without inputs or gradient (what a
// Python number becomes). Its value, or nothing.
std::optional<double> scalar_operand(const Tensor& t, Dtype compute) {
  if (t.ndim() != 0 || t.dtype() != compute || t.requires_grad() || !t.inputs().empty()) return std::nullopt;
  const auto* f = dynamic_cast<const Full*>(t.primitive());
  if (!f) return std::nullopt;
  return f->value;
}

Tensor unary(UnaryOp op, const Tensor& x) {
  const char* fn = unary_name(op);
  check_defined(x, fn);
  bool int_ok = op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::Relu;
  if (x.dtype() == Dtype::Bool && int_ok) {
    throw ValueError(errmsg(fn, "not supported for bool tensors"));
  }
  // Transcendental ops on integers compute in float32, as in PyTorch.
  Tensor in = (!int_ok && !is_floating(x.dtype())) ? astype(x, Dtype::Float32) : x;
  if (op == UnaryOp::Relu) {
    if (auto folded = fold_gemm_relu(in)) return *folded;
  }
  return Tensor::make(in.shape(), in.dtype(), in.device(), std::make_shared<Unary>(op), {in});
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* fn = binary_name(op);
  check_defined(a, fn);
  check_defined(b, fn);
  check_same_device(a, b, fn);
  Dtype t = promote_types(a.dtype(), b.dtype());
  if (op == BinaryOp::Div && !is_floating(t)) t = Dtype::Float32;
  if (t == Dtype::Bool && (op == BinaryOp::Sub || op == BinaryOp::Pow)) {
    throw ValueError(errmsg(fn, "not supported for bool tensors"));
  }
  if (op == BinaryOp::Pow && is_integral(t) && b.primitive() && b.primitive()->name() == std::string("full") &&
      static_cast<Full*>(b.primitive())->value < 0) {
    // A constant exponent (a Python scalar) is checked here, on every
    // device; the CPU kernel checks computed exponents.
    throw ValueError(errmsg(fn, "integers to negative integer powers are not allowed"));
  }
  if (op == BinaryOp::Add) {
    if (auto folded = fold_gemv_epilogue(a, b)) return *folded;
    if (auto folded = fold_gemm_bias(a, b)) return *folded;
  }
  Shape s = broadcast_shapes(a.shape(), b.shape(), fn);
  Dtype out = is_comparison(op) ? Dtype::Bool : t;
  // A Python number on either side becomes a kernel argument: no buffer,
  // no fill kernel. Promotion happened above, exactly as for a tensor.
  for (int side : {1, 0}) {
    const Tensor& k = side ? b : a;
    const Tensor& x = side ? a : b;
    if (auto v = scalar_operand(k, t); v && x.shape() == s) {
      return Tensor::make(std::move(s), out, a.device(), std::make_shared<Binary>(op, side, *v), {astype(x, t)});
    }
  }
  // Moved, not copied: an op records a handful of allocations, one fewer here.
  std::vector<Tensor> in(2);
  in[0] = broadcast_to(astype(a, t), s);
  in[1] = broadcast_to(astype(b, t), s);
  return Tensor::make(std::move(s), out, a.device(), std::make_shared<Binary>(op), std::move(in));
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Div, a, b); }
Tensor pow(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Pow, a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Minimum, a, b); }
Tensor eq(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Ge, a, b); }

Tensor neg(const Tensor& x) { return unary(UnaryOp::Neg, x); }
Tensor abs(const Tensor& x) { return unary(UnaryOp::Abs, x); }
Tensor sqrt(const Tensor& x) { return unary(UnaryOp::Sqrt, x); }
Tensor exp(const Tensor& x) { return unary(UnaryOp::Exp, x); }
Tensor log(const Tensor& x) { return unary(UnaryOp::Log, x); }
Tensor sin(const Tensor& x) { return unary(UnaryOp::Sin, x); }
Tensor cos(const Tensor& x) { return unary(UnaryOp::Cos, x); }
Tensor tanh(const Tensor& x) { return unary(UnaryOp::Tanh, x); }
Tensor relu(const Tensor& x) { return unary(UnaryOp::Relu, x); }
Tensor sigmoid(const Tensor& x) { return unary(UnaryOp::Sigmoid, x); }
Tensor silu(const Tensor& x) { return unary(UnaryOp::Silu, x); }
Tensor erf(const Tensor& x) { return unary(UnaryOp::Erf, x); }
Tensor gelu(const Tensor& x, bool tanh_approx) {
  return unary(tanh_approx ? UnaryOp::GeluTanh : UnaryOp::Gelu, x);
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_defined(cond, "where");
  check_same_device(cond, a, "where");
  check_same_device(a, b, "where");
  Dtype t = promote_types(a.dtype(), b.dtype());
  Shape s = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor c = cond.dtype() == Dtype::Bool ? cond : ne(cond, zeros({}, cond.dtype(), cond.device()));
  return Tensor::make(s, t, a.device(), std::make_shared<Where>(),
                      {broadcast_to(c, s), broadcast_to(astype(a, t), s), broadcast_to(astype(b, t), s)});
}

Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  check_defined(x, "clamp");
  if (!lo && !hi) throw ValueError(errmsg("clamp", "at least one of min and max must be given"));
  // Bounds that are whole numbers within int64 keep an integer tensor integral.
  auto whole_number = [](double v) { return v == std::floor(v) && std::fabs(v) < 0x1p63; };
  bool whole = (!lo || whole_number(*lo)) && (!hi || whole_number(*hi));
  Dtype t = promote_with_scalar(x.dtype(), whole ? ScalarKind::Int : ScalarKind::Float);
  if (t == Dtype::Bool) throw ValueError(errmsg("clamp", "not supported for bool tensors"));
  // where(), not maximum/minimum: those split the gradient at a tie, while
  // clamp's gradient is 1 wherever min <= x <= max (as in PyTorch). NaN
  // passes through; with min > max every element becomes max.
  if (lo) check_value_fits(*lo, t, "clamp");
  if (hi) check_value_fits(*hi, t, "clamp");
  Tensor y = astype(x, t);
  if (lo) {
    Tensor b = scalar(*lo, t, x.device());
    y = where(lt(y, b), b, y);
  }
  if (hi) {
    Tensor b = scalar(*hi, t, x.device());
    y = where(gt(y, b), b, y);
  }
  return y;
}

Tensor astype(const Tensor& x, Dtype dtype) {
  check_defined(x, "astype");
  if (x.dtype() == dtype) return x;
  return Tensor::make(x.shape(), dtype, x.device(), std::make_shared<AsType>(), {x});
}

Tensor contiguous(const Tensor& x) {
  check_defined(x, "contiguous");
  if (x.is_row_contiguous()) return x;
  return Tensor::make(x.shape(), x.dtype(), x.device(), std::make_shared<AsType>(), {x});
}

Tensor to_device(const Tensor& x, Device device) {
  check_defined(x, "to");
  if (x.device() == device) return x;
  // Transfers move whole row-major buffers: reorder on the source first.
  Tensor src = contiguous(x);
  return Tensor::make(x.shape(), x.dtype(), device, std::make_shared<ToDevice>(), {src});
}

}  // namespace pyflame
