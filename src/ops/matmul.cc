// Matmul with NumPy semantics: 1-d operands are promoted and the added axis
// removed again; batch axes broadcast.
#include "ops/op_utils.h"
#include "pyflame/amp.h"
#include "pyflame/fusion.h"

namespace pyflame {

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  if (auto low = autocast_dtype()) {  // mixed precision: run in the autocast dtype
    AutocastGuard off(std::nullopt);
    return matmul(autocast_cast(a_in, *low), autocast_cast(b_in, *low));
  }
  check_defined(a_in, "matmul");
  check_defined(b_in, "matmul");
  check_same_device(a_in, b_in, "matmul");
  if (a_in.ndim() == 0 || b_in.ndim() == 0) {
    throw ValueError(errmsg("matmul", "both operands must be at least 1-d, got shapes " +
                                          shape_str(a_in.shape()) + " and " + shape_str(b_in.shape())));
  }
  if (auto folded = fold_gemv_prologue(a_in, b_in)) return *folded;
  Dtype t = promote_types(a_in.dtype(), b_in.dtype());
  if (t == Dtype::Bool) throw ValueError(errmsg("matmul", "not supported for bool tensors"));
  Tensor a = a_in.ndim() == 1 ? unsqueeze(a_in, 0) : a_in;
  Tensor b = b_in.ndim() == 1 ? unsqueeze(b_in, 1) : b_in;
  const int64_t M = a.shape(-2), K = a.shape(-1), K2 = b.shape(-2), N = b.shape(-1);
  if (K != K2) {
    throw ValueError(errmsg("matmul", "shapes " + shape_str(a_in.shape()) + " and " +
                                          shape_str(b_in.shape()) + " do not align"));
  }
  a = astype(a, t);
  b = astype(b, t);
  Shape so;
  if (a.ndim() == 2 && b.ndim() == 2) {  // no batch axes: nothing to broadcast (eager layers' case)
    so = {M, N};
  } else {
    Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
    Shape batch = broadcast_shapes(ba, bb, "matmul");
    Shape sa = batch, sb = batch;
    so = std::move(batch);
    sa.insert(sa.end(), {M, K});
    sb.insert(sb.end(), {K, N});
    so.insert(so.end(), {M, N});
    a = broadcast_to(a, sa);
    b = broadcast_to(b, sb);
  }
  const Device d = a.device();
  Tensor out = Tensor::make(std::move(so), t, d, std::make_shared<Matmul>(), {std::move(a), std::move(b)});
  if (a_in.ndim() == 1) out = squeeze(out, Axes{-2});
  if (b_in.ndim() == 1) out = squeeze(out, Axes{-1});
  return out;
}

// ---------------------------------------------------------------- GEMM epilogue folds

namespace {
// A pending 2-D product of the GPU the library runs as a GEMM (not the
// one-row or one-column GEMV kernel) in a float dtype, or such a product
// already folded with a bias and no relu. Gradients may be recorded through
// it: FusedGemm's vjp is the unfused ops' (autograd/reduce.cc).
bool gemm_product(const Tensor& p) {
  if (!get_fusion() || !get_fusion_gpu()) return false;
  // The device never changes and the state is atomic: both are read before
  // anything an evaluation on another thread writes (a leaf has no prim).
  const Node* n = p.node();
  if (!n || n->device.is_cpu() || n->state.load(std::memory_order_acquire) != NodeState::Pending || !n->prim) {
    return false;
  }
  if (p.ndim() != 2 || p.shape(0) < 2 || p.shape(1) < 2) return false;
  const Dtype t = p.dtype();
  if (!(t == Dtype::Float32 || t == Dtype::Float16 || t == Dtype::BFloat16)) return false;
  if (dynamic_cast<const Matmul*>(p.primitive())) return p.inputs()[0].shape(1) > 0;
  const auto* f = dynamic_cast<const FusedGemm*>(p.primitive());
  return f && !f->relu;
}
}  // namespace

std::optional<Tensor> fold_gemm_bias(const Tensor& a, const Tensor& b) {
  for (int side : {0, 1}) {
    const Tensor& p = side ? b : a;  // the product
    const Tensor& c = side ? a : b;  // the bias
    if (!gemm_product(p) || !dynamic_cast<const Matmul*>(p.primitive())) continue;
    if (p.dtype() != Dtype::Float32 || c.dtype() != Dtype::Float32 || c.device() != p.device()) continue;
    if (c.ndim() != 1 || c.shape(0) != p.shape(1)) continue;
    std::vector<Tensor> in = p.inputs();
    in.push_back(c);
    return Tensor::make(p.shape(), p.dtype(), p.device(), std::make_shared<FusedGemm>(true, false), std::move(in));
  }
  return std::nullopt;
}

std::optional<Tensor> fold_gemm_relu(const Tensor& x) {
  if (!gemm_product(x)) return std::nullopt;
  const auto* f = dynamic_cast<const FusedGemm*>(x.primitive());
  return Tensor::make(x.shape(), x.dtype(), x.device(), std::make_shared<FusedGemm>(f && f->bias, true),
                      x.inputs());
}

void FusedGemm::eval_unfused(const std::vector<Tensor>& in, Tensor& out) const {
  const bool cpu = out.device().is_cpu();
  auto run = [cpu](Primitive& p, const std::vector<Tensor>& i, Tensor& o) {
    if (cpu) p.eval_cpu(i, o);
    else p.eval_gpu(i, o);
  };
  Tensor y = relu || bias ? scratch(out.shape(), out) : out;
  Matmul mm;
  run(mm, {in[0], in[1]}, y);
  if (bias) {
    // The bias seen with the product's shape, as add's broadcast records it.
    auto n = std::make_shared<Node>();
    const Node& b = *in[2].node();
    n->shape = out.shape();
    n->strides = {0, b.strides[0]};
    n->offset = b.offset;
    n->dtype = b.dtype;
    n->device = b.device;
    n->buffer = b.buffer;
    n->state.store(NodeState::Done, std::memory_order_release);
    Tensor z = relu ? scratch(out.shape(), out) : out;
    Binary sum(BinaryOp::Add);
    run(sum, {y, Tensor(std::move(n))}, z);
    y = z;
  }
  if (relu) {
    Unary r(UnaryOp::Relu);
    run(r, {y}, out);
  }
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_defined(x, "linear");
  check_defined(weight, "linear");
  if (weight.ndim() != 2) {
    throw ValueError(errmsg("linear", "weight must be a 2-D tensor (out_features, in_features), got shape " +
                                          shape_str(weight.shape())));
  }
  if (x.ndim() == 0 || x.shape(-1) != weight.shape(1)) {
    throw ValueError(errmsg("linear", "input of shape " + shape_str(x.shape()) + " does not end in in_features=" +
                                          std::to_string(weight.shape(1)) + " (weight " +
                                          shape_str(weight.shape()) + ")"));
  }
  Tensor out = matmul(x, transpose(weight, {}));
  if (!bias.defined()) return out;
  // Under autocast the bias joins the low-precision output.
  return add(out, out.dtype() != bias.dtype() && autocast_dtype() ? astype(bias, out.dtype()) : bias);
}

}  // namespace pyflame
