// Helpers shared by the op functions (argument checks, device resolution).
#pragma once
#include <string>

#include "ir/primitives.h"
#include "pyflame/checked.h"
#include "pyflame/ops.h"

namespace pyflame {

inline Device resolve_device(const OptDevice& d) { return d ? *d : default_device(); }

inline void check_same_device(const Tensor& a, const Tensor& b, const char* fn) {
  if (a.device() != b.device()) {
    throw ValueError(errmsg(fn, "tensors are on different devices (" + a.device().str() +
                                    " and " + b.device().str() +
                                    "); move one with .to(device)"));
  }
}

inline void check_defined(const Tensor& t, const char* fn) {
  if (!t.defined()) throw ValueError(errmsg(fn, "got an undefined tensor"));
}

// Extents >= 0 and a size that fits 64 bits (Tensor::make checks the bytes).
inline void check_shape(const Shape& s, const char* fn) { checked_shape_size(s, fn); }

// Attention from matmul and softmax on 4-d (B, H, S, D) inputs (the fused
// kernel's reference and its gradient path); mask already (B, H, Sq, Sk).
// offset_t: a 0-d int64 tensor added to the causal offset.
Tensor attention_composed(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, float scale,
                          int64_t offset, const std::optional<Tensor>& mask, double dropout_p,
                          const std::optional<Tensor>& offset_t = std::nullopt);

// Decode-step projections folded into one GPU kernel (ops/llm.cc,
// docs/design/fusion.md): matmul(a, b) with a pending rms_norm as a, and
// add(a, b) with a pending one-row product as either
// operand. The folded node, or nothing when the pattern does not apply.
std::optional<Tensor> fold_gemv_prologue(const Tensor& a, const Tensor& b);
std::optional<Tensor> fold_gemv_epilogue(const Tensor& a, const Tensor& b);

// An evaluated row-major tensor like `like` with another shape (a folded
// node's unfused steps write their intermediates there).
Tensor scratch(const Shape& shape, const Tensor& like);

// A 2-D GEMM's bias and relu folded into the library's epilogue
// (ops/matmul.cc, FusedGemm): add(a, b) with a pending product on one side
// and a float32 bias of its last axis on the other, and relu(x) of a
// pending product. The folded node, or nothing when the pattern does not apply.
std::optional<Tensor> fold_gemm_bias(const Tensor& a, const Tensor& b);
std::optional<Tensor> fold_gemm_relu(const Tensor& x);

}  // namespace pyflame
