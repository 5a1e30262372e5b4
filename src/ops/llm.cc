// LLM ops: rotary position embedding and scaled dot-product attention.
#include <cmath>
#include <sstream>

#include "ops/op_utils.h"
#include "pyflame/amp.h"
#include "pyflame/autograd.h"
#include "pyflame/fusion.h"
#include "runtime/allocator.h"

namespace pyflame {

namespace {

// The fused GPU attention kernel keeps a head of up to this many elements
// per row in registers; longer heads take the composed path there.
constexpr int64_t kFusedMaxHeadDim = 512;
// On the GPU, query blocks longer than this go through BLAS (scores
// materialized) unless the score tensor would exceed kMaxScoreBytes.
constexpr int64_t kFusedMaxQueries = 16;
constexpr double kMaxScoreBytes = 1024.0 * 1024.0 * 1024.0;

std::string num_str(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

// ---------------------------------------------------------------- rope

Tensor rope(const Tensor& x_in, const std::optional<Tensor>& positions, int64_t offset, double theta,
            bool interleaved, const std::vector<float>& inv_freq) {
  const char* fn = "rope";
  check_defined(x_in, fn);
  if (!is_floating(x_in.dtype())) {
    throw ValueError(errmsg(fn, std::string("needs a floating-point tensor, got ") + dtype_name(x_in.dtype())));
  }
  const int min_nd = positions ? 1 : 2;
  if (x_in.ndim() < min_nd) {
    throw ValueError(errmsg(fn, "x must be (..., seq, head_dim), got shape " + shape_str(x_in.shape())));
  }
  const int64_t D = x_in.shape().back();
  if (D % 2 != 0) {
    throw ValueError(errmsg(fn, "the last dimension (head_dim) must be even, got " + std::to_string(D)));
  }
  if (!(theta > 0.0) || !std::isfinite(theta)) {
    throw ValueError(errmsg(fn, "theta must be a positive finite number, got " + num_str(theta)));
  }
  if (!inv_freq.empty()) {
    if (static_cast<int64_t>(inv_freq.size()) != D / 2) {
      throw ValueError(errmsg(fn, "inv_freq has " + std::to_string(inv_freq.size()) +
                                      " entries, expected head_dim / 2 = " + std::to_string(D / 2)));
    }
    for (float f : inv_freq) {
      if (!(f > 0.0f) || !std::isfinite(f)) {
        throw ValueError(errmsg(fn, "inv_freq entries must be positive and finite, got " + num_str(f)));
      }
    }
  }
  Tensor x = contiguous(x_in);
  std::vector<Tensor> ins{x};
  if (positions) {
    const Tensor& p = *positions;
    check_defined(p, fn);
    check_same_device(x, p, fn);
    if (p.dtype() == Dtype::Bool) throw ValueError(errmsg(fn, "positions must be numbers, not bool"));
    Shape rows(x.shape().begin(), x.shape().end() - 1);
    bool ok = p.ndim() <= static_cast<int>(rows.size());
    for (int i = 0; ok && i < p.ndim(); ++i) {
      int64_t d = p.shape()[p.ndim() - 1 - i], r = rows[rows.size() - 1 - i];
      ok = d == r || d == 1;
    }
    if (!ok) {
      throw ValueError(errmsg(fn, "positions of shape " + shape_str(p.shape()) +
                                      " do not broadcast to x.shape[:-1] = " + shape_str(rows)));
    }
    ins.push_back(broadcast_to(astype(p, Dtype::Float32), rows));
  }
  return Tensor::make(x.shape(), x.dtype(), x.device(),
                      std::make_shared<Rope>(static_cast<float>(theta), static_cast<double>(offset),
                                             interleaved, positions.has_value(), inv_freq),
                      std::move(ins));
}

// ---------------------------------------------------------------- attention

namespace {
const char* kSdpa = "scaled_dot_product_attention";
}  // namespace

// softmax(q k^T * scale + mask) v from matmul and softmax, with the key/value
// heads broadcast over each group of query heads. mask: none, bool (true =
// attend) or additive, already broadcast to (B, H, Sq, Sk) in q's dtype.
Tensor attention_composed(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, float scale,
                          int64_t offset, const std::optional<Tensor>& mask, double dropout_p,
                          const std::optional<Tensor>& offset_t) {
  const int64_t B = q.shape()[0], H = q.shape()[1], Sq = q.shape()[2], D = q.shape()[3];
  const int64_t Hkv = k.shape()[1], Sk = k.shape()[2], Dv = v.shape()[3];
  const int64_t G = H / Hkv;
  Tensor q5 = reshape(q, {B, Hkv, G, Sq, D});
  Tensor kt = swapaxes(unsqueeze(k, 2), -1, -2);  // (B, Hkv, 1, D, Sk)
  Tensor s = mul(matmul(q5, kt), scalar(scale, q.dtype(), q.device()));
  const Tensor neg_inf = scalar(-INFINITY, s.dtype(), q.device());
  if (causal) {
    Tensor i = reshape(arange(static_cast<double>(offset), static_cast<double>(offset + Sq), 1.0,
                              Dtype::Int64, q.device()),
                       {Sq, 1});
    if (offset_t) i = add(i, *offset_t);
    Tensor j = reshape(arange(0, static_cast<double>(Sk), 1.0, Dtype::Int64, q.device()), {1, Sk});
    s = where(ge(i, j), s, neg_inf);
  }
  if (mask) {
    Tensor m5 = reshape(*mask, {B, Hkv, G, Sq, Sk});
    s = mask->dtype() == Dtype::Bool ? where(m5, s, neg_inf) : add(s, m5);
  }
  Tensor p = softmax(s, -1);
  if (dropout_p > 0.0) p = dropout(p, dropout_p, true);
  Tensor o = matmul(p, unsqueeze(v, 2));  // (B, Hkv, G, Sq, Dv)
  return reshape(o, {B, H, Sq, Dv});
}

namespace {

Tensor attention_impl(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, bool causal,
                      std::optional<double> scale, int64_t offset, const std::optional<Tensor>& mask_in,
                      double dropout_p, const std::optional<Tensor>& offset_t = std::nullopt) {
  if (auto low = autocast_dtype()) {  // mixed precision: run in the autocast dtype
    AutocastGuard off(std::nullopt);
    return attention_impl(autocast_cast(q_in, *low), autocast_cast(k_in, *low), autocast_cast(v_in, *low),
                          causal, scale, offset, mask_in, dropout_p, offset_t);
  }
  const char* fn = kSdpa;
  for (const Tensor* t : {&q_in, &k_in, &v_in}) check_defined(*t, fn);
  check_same_device(q_in, k_in, fn);
  check_same_device(q_in, v_in, fn);
  const int nd = q_in.ndim();
  if ((nd != 3 && nd != 4) || k_in.ndim() != nd || v_in.ndim() != nd) {
    throw ValueError(errmsg(fn, "q, k and v must all be 4-d (B, H, S, D) or 3-d (H, S, D), got shapes " +
                                    shape_str(q_in.shape()) + ", " + shape_str(k_in.shape()) + ", " +
                                    shape_str(v_in.shape())));
  }
  Dtype t = promote_types(promote_types(q_in.dtype(), k_in.dtype()), v_in.dtype());
  if (!is_floating(t)) {
    throw ValueError(errmsg(fn, std::string("needs floating-point tensors, got ") + dtype_name(t)));
  }
  if (!(dropout_p >= 0.0 && dropout_p < 1.0)) {
    throw ValueError(errmsg(fn, "dropout_p must be in [0, 1), got " + num_str(dropout_p)));
  }
  Tensor q = astype(q_in, t), k = astype(k_in, t), v = astype(v_in, t);
  if (nd == 3) {
    q = unsqueeze(q, 0);
    k = unsqueeze(k, 0);
    v = unsqueeze(v, 0);
  }
  const int64_t B = q.shape()[0], H = q.shape()[1], Sq = q.shape()[2], D = q.shape()[3];
  const int64_t Hkv = k.shape()[1], Sk = k.shape()[2], Dv = v.shape()[3];
  auto shapes = [&] {
    return shape_str(q_in.shape()) + ", " + shape_str(k_in.shape()) + ", " + shape_str(v_in.shape());
  };
  if (k.shape()[0] != B || v.shape()[0] != B) {
    throw ValueError(errmsg(fn, "batch sizes of q, k and v differ: " + shapes()));
  }
  if (v.shape()[1] != Hkv || v.shape()[2] != Sk) {
    throw ValueError(errmsg(fn, "k and v must have the same heads and length: " + shapes()));
  }
  if (k.shape()[3] != D) {
    throw ValueError(errmsg(fn, "q and k must have the same head dimension: " + shapes()));
  }
  if (Hkv == 0 ? H != 0 : H % Hkv != 0) {
    throw ValueError(errmsg(fn, "the number of query heads (" + std::to_string(H) +
                                    ") must be a multiple of the number of key/value heads (" +
                                    std::to_string(Hkv) + ")"));
  }
  if (scale && !std::isfinite(*scale)) throw ValueError(errmsg(fn, "scale must be finite"));
  const Shape score_shape{B, H, Sq, Sk};
  std::optional<Tensor> mask;
  if (mask_in) {
    const Tensor& m = *mask_in;
    check_defined(m, fn);
    check_same_device(q_in, m, fn);
    if (m.dtype() != Dtype::Bool && !is_floating(m.dtype())) {
      throw ValueError(errmsg(fn, std::string("attn_mask must be bool or floating-point, got ") +
                                      dtype_name(m.dtype())));
    }
    // Broadcastable to (B, H, Sq, Sk) (or to (H, Sq, Sk) for 3-d inputs).
    const Shape target = nd == 3 ? Shape{H, Sq, Sk} : score_shape;
    bool ok = m.ndim() <= static_cast<int>(target.size());
    for (int i = 0; ok && i < m.ndim(); ++i) {
      const int64_t d = m.shape()[m.ndim() - 1 - i], want = target[target.size() - 1 - i];
      ok = d == want || d == 1;
    }
    if (!ok) {
      throw ValueError(errmsg(fn, "attn_mask of shape " + shape_str(m.shape()) +
                                      " does not broadcast to the scores' shape " + shape_str(target)));
    }
    Tensor mm = m.dtype() == Dtype::Bool ? m : astype(m, t);
    mask = broadcast_to(nd == 3 ? reshape(broadcast_to(mm, target), score_shape) : mm, score_shape);
  }
  const float sc = static_cast<float>(scale ? *scale : 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(D, 1))));
  Shape out_shape{B, H, Sq, Dv};
  Tensor out;
  const bool gpu = !q.device().is_cpu();
  const double score_bytes = double(B) * H * Sq * Sk * itemsize(t);
  const bool composed = H > 0 && (mask || dropout_p > 0.0 ||
                                  (gpu && (D > kFusedMaxHeadDim || Dv > kFusedMaxHeadDim ||
                                           (Sq > kFusedMaxQueries && score_bytes <= kMaxScoreBytes))));
  if (composed) {
    out = attention_composed(q, k, v, causal, sc, offset, mask, dropout_p, offset_t);
  } else {
    std::vector<Tensor> ins{q, k, v};
    if (offset_t) ins.push_back(*offset_t);
    out = Tensor::make(out_shape, t, q.device(), std::make_shared<Attention>(sc, causal, offset), std::move(ins));
  }
  return nd == 3 ? squeeze(out, Axes{0}) : out;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                    std::optional<double> scale, const std::optional<Tensor>& attn_mask,
                                    double dropout_p, int64_t causal_offset) {
  if (causal_offset < 0) {
    throw ValueError(errmsg(kSdpa, "causal_offset must be >= 0, got " + std::to_string(causal_offset)));
  }
  return attention_impl(q, k, v, causal, scale, causal_offset, attn_mask, dropout_p);
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& causal_offset, std::optional<double> scale) {
  check_defined(causal_offset, kSdpa);
  check_same_device(q, causal_offset, kSdpa);
  if (causal_offset.ndim() != 0 || !is_integral(causal_offset.dtype())) {
    throw ValueError(errmsg(kSdpa, "a tensor causal_offset must be a 0-d integer tensor, got " +
                                       std::string(dtype_name(causal_offset.dtype())) + " of shape " +
                                       shape_str(causal_offset.shape())));
  }
  Tensor off = astype(causal_offset, Dtype::Int64);
  return attention_impl(q, k, v, true, scale, 0, std::nullopt, 0.0, off);
}

AttentionWithCache scaled_dot_product_attention_cached(const Tensor& q, const Tensor& k, const Tensor& v,
                                                       const Tensor& k_cache, const Tensor& v_cache,
                                                       bool causal, std::optional<double> scale,
                                                       const std::optional<Tensor>& attn_mask,
                                                       double dropout_p) {
  const char* fn = kSdpa;
  for (const Tensor* t : {&q, &k, &v, &k_cache, &v_cache}) check_defined(*t, fn);
  check_same_device(k, k_cache, fn);
  check_same_device(v, v_cache, fn);
  auto check_cache = [&](const Tensor& c, const Tensor& x, const char* what) {
    bool ok = c.ndim() == x.ndim() && x.ndim() >= 2;
    for (int d = 0; ok && d < x.ndim(); ++d) ok = d == x.ndim() - 2 || c.shape()[d] == x.shape()[d];
    if (!ok) {
      throw ValueError(errmsg(fn, std::string(what) + " of shape " + shape_str(c.shape()) +
                                      " does not match " + shape_str(x.shape()) +
                                      " outside the sequence axis"));
    }
  };
  check_cache(k_cache, k, "k_cache");
  check_cache(v_cache, v, "v_cache");
  if (k_cache.shape(-2) != v_cache.shape(-2)) {
    throw ValueError(errmsg(fn, "k_cache and v_cache hold different lengths (" +
                                    std::to_string(k_cache.shape(-2)) + " and " +
                                    std::to_string(v_cache.shape(-2)) + ")"));
  }
  Tensor kf = concat({k_cache, k}, -2), vf = concat({v_cache, v}, -2);
  Tensor out = attention_impl(q, kf, vf, causal, scale, k_cache.shape(-2), attn_mask, dropout_p);
  return {out, kf, vf};
}

// ---------------------------------------------------------------- GEMV folds

namespace {

// The fused kernel stages the input row in shared memory (48 KiB) and
// computes a norm's sum with at most one block's threads.
constexpr int64_t kFoldMaxRowBytes = 48 * 1024;

// A pending node of the GPU, made without gradient, that nothing has
// evaluated yet: what a fold may replace (its inputs are still attached).
bool foldable(const Tensor& t) {
  const Node* n = t.node();
  return n && !n->buffer && n->prim && !n->device.is_cpu() && !t.requires_grad() &&
         n->state.load(std::memory_order_acquire) == NodeState::Pending;
}

bool fold_enabled(const Tensor& a, const Tensor& b) {
  if (!get_fusion() || !get_fusion_gpu() || a.device().is_cpu()) return false;
  return !(is_grad_enabled() && (a.requires_grad() || b.requires_grad()));
}

template <class P>
const P* pending(const Tensor& t) {
  return foldable(t) ? dynamic_cast<const P*>(t.primitive()) : nullptr;
}

// x (1, K) in a float dtype and w (K, N) of that dtype: a one-row product the
// fused kernel takes.
bool gemv_shaped(const Tensor& x, const Tensor& w) {
  const Dtype t = x.dtype();
  if (!(t == Dtype::Float32 || t == Dtype::Float16 || t == Dtype::BFloat16) || w.dtype() != t) return false;
  if (x.ndim() != 2 || w.ndim() != 2 || x.shape(0) != 1 || x.shape(1) != w.shape(0) || w.shape(1) == 0) return false;
  const int64_t K = x.shape(1);
  return K > 0 && K * int64_t(itemsize(t)) <= kFoldMaxRowBytes && K % (16 / int64_t(itemsize(t))) == 0;
}

}  // namespace

std::optional<Tensor> fold_gemv_prologue(const Tensor& a, const Tensor& b) {
  if (!fold_enabled(a, b) || !gemv_shaped(a, b)) return std::nullopt;
  const auto* norm = pending<RMSNorm>(a);
  if (!norm || !norm->has_weight) return std::nullopt;
  return Tensor::make({1, b.shape(1)}, a.dtype(), a.device(),
                      std::make_shared<FusedGemv>(FusedGemv::Prologue::Rms, norm->eps, false),
                      {a.inputs()[0], a.inputs()[1], b});
}

std::optional<Tensor> fold_gemv_epilogue(const Tensor& a, const Tensor& b) {
  if (!fold_enabled(a, b) || a.shape() != b.shape() || a.dtype() != b.dtype()) return std::nullopt;
  for (int side : {1, 0}) {
    const Tensor& p = side ? b : a;  // the product
    const Tensor& r = side ? a : b;  // the residual
    if (!foldable(p) || r.ndim() != 2 || r.strides()[1] != 1) continue;
    if (const auto* f = pending<FusedGemv>(p); f && !f->add) {
      std::vector<Tensor> in = p.inputs();
      in.push_back(r);
      return Tensor::make(p.shape(), p.dtype(), p.device(), std::make_shared<FusedGemv>(f->prologue, f->eps, true),
                          std::move(in));
    }
    if (pending<Matmul>(p) && gemv_shaped(p.inputs()[0], p.inputs()[1])) {
      return Tensor::make(p.shape(), p.dtype(), p.device(),
                          std::make_shared<FusedGemv>(FusedGemv::Prologue::None, 0.0, true),
                          {p.inputs()[0], p.inputs()[1], r});
    }
  }
  return std::nullopt;
}

// Allocates an evaluated row-major tensor like `like` with another shape.
Tensor scratch(const Shape& shape, const Tensor& like) {
  auto n = std::make_shared<Node>();
  n->shape = shape;
  n->strides = row_major_strides(shape);
  n->dtype = like.dtype();
  n->device = like.device();
  n->buffer = allocate(like.device(), size_t(shape_size(shape)) * like.itemsize());
  n->state.store(NodeState::Done, std::memory_order_release);
  return Tensor(std::move(n));
}

void FusedGemv::eval_unfused(const std::vector<Tensor>& in, Tensor& out) const {
  const bool cpu = out.device().is_cpu();
  auto run = [cpu](Primitive& p, const std::vector<Tensor>& i, Tensor& o) {
    if (cpu) p.eval_cpu(i, o);
    else p.eval_gpu(i, o);
  };
  Tensor x = in[0];
  if (prologue == Prologue::Rms) {
    x = scratch(in[0].shape(), out);
    RMSNorm norm(eps, true);
    run(norm, {in[0], in[1]}, x);
  }
  const size_t w = prologue_inputs();
  Matmul mm;
  if (!add) {
    run(mm, {x, in[w]}, out);
    return;
  }
  Tensor y = scratch(out.shape(), out);
  run(mm, {x, in[w]}, y);
  Binary sum(BinaryOp::Add);
  run(sum, {y, in[w + 1]}, out);
}

}  // namespace pyflame
