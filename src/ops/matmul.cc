// Matmul with NumPy semantics: 1-d operands are promoted and the added axis
// removed again; batch axes broadcast.
#include "ops/op_utils.h"
#include "pyflame/amp.h"

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
  Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  Shape batch = broadcast_shapes(ba, bb, "matmul");
  Shape sa = batch, sb = batch, so = batch;
  sa.insert(sa.end(), {M, K});
  sb.insert(sb.end(), {K, N});
  so.insert(so.end(), {M, N});
  a = broadcast_to(astype(a, t), sa);
  b = broadcast_to(astype(b, t), sb);
  Tensor out = Tensor::make(so, t, a.device(), std::make_shared<Matmul>(), {a, b});
  if (a_in.ndim() == 1) out = squeeze(out, Axes{-2});
  if (b_in.ndim() == 1) out = squeeze(out, Axes{-1});
  return out;
}

}  // namespace pyflame
