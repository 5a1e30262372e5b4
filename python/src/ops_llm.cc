// Bindings of the 'llm' op family.
#include "common.h"
#include "pyflame/errors.h"
#include "pyflame/ops_llm.h"

namespace pyflame::py {

void init_ops_llm(nb::module_& m) {
  auto none = nb::none();
  m.def("rope", [](nb::handle x, nb::handle positions, int64_t offset, double theta, bool interleaved,
                   std::optional<std::vector<float>> inv_freq) {
    Tensor tx = as_tensor(x, nullptr, "rope");
    std::optional<Tensor> pos;
    if (!positions.is_none()) pos = as_tensor(positions, &tx, "rope");
    return rope(tx, pos, offset, theta, interleaved, inv_freq.value_or(std::vector<float>{}));
  }, nb::arg("x").none(), nb::arg("positions") = none, nb::arg("offset") = 0,
     nb::arg("theta") = 10000.0, nb::arg("interleaved") = false, nb::arg("inv_freq") = none,
     "Rotary position embedding over the last axis of x (..., seq, head_dim).\n\n"
     "interleaved=False: half-split pairs (j, j + head_dim/2) as GPT-NeoX/Llama (rotate_half);\n"
     "True: adjacent pairs (2j, 2j+1) as GPT-J. positions: None (arange(seq) along axis -2) or\n"
     "a tensor broadcastable to x.shape[:-1]; offset is added to the positions.\n"
     "inv_freq: a sequence of head_dim/2 frequencies replacing theta^(-2j/head_dim) (scaled\n"
     "variants such as Llama 3's rope_scaling).");
  m.def("scaled_dot_product_attention",
        [](nb::handle q, nb::handle k, nb::handle v, bool causal, std::optional<double> scale,
           nb::handle k_cache, nb::handle v_cache, nb::handle attn_mask, double dropout_p, bool is_causal,
           bool enable_gqa, nb::handle causal_offset) -> nb::object {
    (void)enable_gqa;
    const char* fn = "scaled_dot_product_attention";
    Tensor tq = as_tensor(q, nullptr, fn);
    Tensor tk = as_tensor(k, &tq, fn), tv = as_tensor(v, &tq, fn);
    std::optional<Tensor> mask;
    if (!attn_mask.is_none()) mask = as_tensor(attn_mask, &tq, fn);
    if (k_cache.is_none() != v_cache.is_none()) {
      throw ValueError(errmsg(fn, "k_cache and v_cache must be given together"));
    }
    causal = causal || is_causal;
    if (nb::isinstance<Tensor>(causal_offset)) {  // read at evaluation: one graph for every position
      if (!causal || mask || dropout_p > 0.0 || !k_cache.is_none()) {
        throw ValueError(errmsg(fn, "a tensor causal_offset needs causal=True and no attn_mask, "
                                    "dropout_p or k_cache"));
      }
      return nb::cast(scaled_dot_product_attention(tq, tk, tv, nb::cast<Tensor>(causal_offset), scale));
    }
    const int64_t offset = to_int64(causal_offset, fn, "causal_offset");
    if (k_cache.is_none()) {
      return nb::cast(scaled_dot_product_attention(tq, tk, tv, causal, scale, mask, dropout_p, offset));
    }
    if (offset != 0) {
      throw ValueError(errmsg(fn, "causal_offset is implied by k_cache's length; do not pass both"));
    }
    AttentionWithCache r = scaled_dot_product_attention_cached(
        tq, tk, tv, as_tensor(k_cache, &tq, fn), as_tensor(v_cache, &tq, fn), causal, scale, mask, dropout_p);
    return nb::make_tuple(r.out, r.k_cache, r.v_cache);
  }, nb::arg("q").none(), nb::arg("k").none(), nb::arg("v").none(), nb::arg("causal") = false,
     nb::arg("scale") = none, nb::arg("k_cache") = none, nb::arg("v_cache") = none,
     nb::arg("attn_mask") = none, nb::arg("dropout_p") = 0.0, nb::arg("is_causal") = false,
     nb::arg("enable_gqa") = false, nb::arg("causal_offset") = nb::int_(0),
     "softmax(q k^T * scale [+ mask]) v for q (B, H, Sq, D), k (B, Hkv, Sk, D), v (B, Hkv, Sk, Dv)\n"
     "(or 3-d without B).\n\n"
     "H must be a multiple of Hkv (grouped-query attention: head h uses kv head h // (H // Hkv)).\n"
     "scale defaults to 1/sqrt(D). causal (alias is_causal): query i attends to keys j <= i.\n"
     "attn_mask: bool (True = attend) or float (added), broadcastable to (B, H, Sq, Sk).\n"
     "dropout_p: dropout on the attention weights (pf.manual_seed). enable_gqa is accepted for\n"
     "PyTorch compatibility (grouped heads are always allowed).\n"
     "With k_cache/v_cache (B, Hkv, S_past, .), keys and values are concat(cache, new) along the\n"
     "sequence axis, causal masking is offset by S_past (query i attends to keys j <= S_past + i),\n"
     "and the call returns (out, new_k_cache, new_v_cache): pass those back on the next step.\n"
     "causal_offset (with causal, no k_cache): query i attends to keys j <= i + causal_offset, for\n"
     "queries at positions causal_offset.. of a fixed-capacity cache written with slice_update.\n"
     "causal_offset may be a 0-d integer tensor (with causal, no mask, dropout or k_cache): read\n"
     "at evaluation, so a compiled decode step replays one graph for every position.");
}

}  // namespace pyflame::py
