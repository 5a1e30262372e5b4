// Ops of the 'llm' family (see ops.h for the contract): rotary position
// embedding and scaled dot-product attention with KV caches.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "pyflame/ops.h"

namespace pyflame {

// Rotary position embedding over the last axis (head_dim, even) of x, which
// is (..., S, head_dim), in x's floating dtype (computed in float32).
// Frequencies inv_freq[j] = theta^(-2j/head_dim), angles (position + offset)
// * inv_freq[j] in float32 (as the Hugging Face implementations do).
// interleaved == false: the half-split layout of GPT-NeoX / Llama
// (rotate_half: dims j and j + head_dim/2 form a pair); true: interleaved
// pairs (2j, 2j+1) of GPT-J and the original paper.
// positions: none -> arange(S) along axis -2; else a tensor (integer or
// float) broadcastable to x.shape[:-1], e.g. (S,) or (B, 1, S). `offset` is
// added in both cases.
// inv_freq (optional, head_dim/2 positive finite entries) replaces the
// theta-derived frequencies, for scaled variants (Llama 3's rope_scaling).
Tensor rope(const Tensor& x, const std::optional<Tensor>& positions = {}, int64_t offset = 0,
            double theta = 10000.0, bool interleaved = false,
            const std::vector<float>& inv_freq = {});

// Scaled dot-product attention: softmax(q k^T * scale [+ causal mask]) v.
// q (B, H, Sq, D), k (B, Hkv, Sk, D), v (B, Hkv, Sk, Dv) (or the same
// without B); H must be a multiple of Hkv (grouped-query attention: query
// head h uses key/value head h / (H / Hkv)). scale defaults to 1/sqrt(D).
// causal: query i attends to keys j <= i (top-left aligned, as PyTorch).
// attn_mask (optional, broadcastable to (B, H, Sq, Sk)): bool (true =
// attend) or floating (added to the scores); it may be combined with causal.
// dropout_p > 0 drops attention weights as dropout() does (seeded by
// pf.manual_seed). Output (B, H, Sq, Dv) in q's dtype.
// The CPU and GPU compute it fused (online softmax, no score tensor) for
// the plain and causal cases; with a mask, dropout, head dims above 512 or
// (GPU) more than 16 queries it is matmul + softmax + matmul.
// causal_offset (>= 0, with causal): query i attends to keys j <= i +
// causal_offset, as when the queries sit at positions causal_offset.. of a
// fixed-capacity KV cache (keys past the last query's position are never
// read, so the cache's unwritten tail does not matter).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    bool causal = false, std::optional<double> scale = {},
                                    const std::optional<Tensor>& attn_mask = {},
                                    double dropout_p = 0.0, int64_t causal_offset = 0);

// Causal attention whose offset is a 0-d integer tensor read at evaluation
// (query i attends to keys j <= i + causal_offset; a negative value hides
// keys, all of them gives zeros): one recorded graph serves every position
// of a fixed-capacity cache, as a replayed decode step needs.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& causal_offset, std::optional<double> scale = {});

// With a KV cache: keys/values are concat(k_cache, k) and concat(v_cache, v)
// along axis -2 (caches (B, Hkv, S_past, D/Dv)); causal masking is offset by
// S_past (query i attends to keys j <= S_past + i). Returns the output and
// the grown caches, which the caller passes back as k_cache/v_cache next step.
struct AttentionWithCache {
  Tensor out, k_cache, v_cache;
};
// attn_mask, if given, covers the full key range: (..., Sq, S_past + Sk).
AttentionWithCache scaled_dot_product_attention_cached(const Tensor& q, const Tensor& k,
                                                       const Tensor& v, const Tensor& k_cache,
                                                       const Tensor& v_cache, bool causal = false,
                                                       std::optional<double> scale = {},
                                                       const std::optional<Tensor>& attn_mask = {},
                                                       double dropout_p = 0.0);

}  // namespace pyflame
