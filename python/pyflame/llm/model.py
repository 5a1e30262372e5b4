"""The Llama-family decoder (Llama 2/3, Mistral, Qwen2) over PyFlame ops.

Prefill and decode run the same code: ``model(input_ids, cache)`` writes the
new keys and values into a fixed-capacity cache at its current position
(``pf.slice_update``, in place when the old version is not held elsewhere)
and attends over the whole cache with a causal offset, so every decode step
has the same shapes (what graph replay needs).

Batches of prompts of different lengths are left-padded: the cache records
how many leading slots of each row are padding, and a mask keeps them out of
attention while each row's rotary positions start at its first real token.
Sliding-window attention (Mistral) is the same mask restricted to the last W
positions.
"""
import numpy as np

import pyflame as pf
from .. import _core as C


class KVCache:
    """Keys and values of every layer, (batch, kv_heads, max_len, head_dim)
    each, the number of slots written so far (``offset``) and the number of
    leading padding slots of each row (``pad``, all 0 unless left-padded)."""

    def __init__(self, config, batch, max_len, dtype, device, pad=None):
        shape = (batch, config.num_key_value_heads, max_len, config.head_dim)
        self.keys = [pf.zeros(*shape, dtype=dtype, device=device) for _ in range(config.num_hidden_layers)]
        self.values = [pf.zeros(*shape, dtype=dtype, device=device) for _ in range(config.num_hidden_layers)]
        self.batch, self.max_len, self.offset = batch, max_len, 0
        self.pad = [0] * batch if pad is None else [int(p) for p in pad]

    def write(self, layer, k, v, pos):
        """Writes k, v (batch, kv_heads, S, head_dim) at pos; returns the caches.
        Rebinding the list entries leaves the new versions as the only holders
        of the old ones, so evaluation updates the buffers in place."""
        self.keys[layer] = C.slice_update(self.keys[layer], k, pos, 2)
        self.values[layer] = C.slice_update(self.values[layer], v, pos, 2)
        return self.keys[layer], self.values[layer]


def _linear(x, w, b=None):
    """x (..., K) @ w.T as one (rows, K) GEMM: a batched matmul against the
    broadcast weight would read the weight once per batch row."""
    lead = list(x.shape[:-1])
    y = C.matmul(x.reshape([-1, x.shape[-1]]), w.T).reshape(lead + [w.shape[0]])
    return y if b is None else y + b


class LlamaModel:
    """Holds the weights (a dict of name -> tensor, Hugging Face names) and runs
    the forward pass. Built by ``pyflame.llm.load``."""

    def __init__(self, config, weights, dtype, device):
        self.config, self.dtype, self.device = config, dtype, device
        self.weights = weights
        self._inv_freq = config.rope_inv_freq()
        cfg = config
        self.layers = []
        for i in range(cfg.num_hidden_layers):
            p = f"model.layers.{i}."
            w = {k[len(p):]: v for k, v in weights.items() if k.startswith(p)}
            self.layers.append(w)
        self.embed = weights["model.embed_tokens.weight"]
        self.norm = weights["model.norm.weight"]
        self.lm_head = self.embed if cfg.tie_word_embeddings else weights["lm_head.weight"]

    def make_cache(self, batch=1, max_len=None, pad=None):
        """A fixed-capacity KV cache for `batch` sequences of up to `max_len`
        tokens (default: max_position_embeddings). pad: for left-padded
        batches, the number of leading padding tokens of each row (they are
        masked out of attention; a row's positions start after them)."""
        max_len = int(max_len or self.config.max_position_embeddings)
        if batch <= 0 or max_len <= 0:
            raise ValueError(f"[make_cache] batch and max_len must be positive, got {batch}, {max_len}")
        if pad is not None and (len(pad) != batch or any(not 0 <= int(p) < max_len for p in pad)):
            raise ValueError(f"[make_cache] pad must hold {batch} counts in [0, {max_len}), got {list(pad)}")
        return KVCache(self.config, batch, max_len, self.dtype, self.device, pad)

    def __call__(self, input_ids, cache=None):
        """Logits (B, S, vocab) for input_ids (B, S) (or (S,), taken as B = 1).
        With a cache, the tokens sit at positions cache.offset.. and the cache
        advances by S."""
        cfg = self.config
        if isinstance(input_ids, C.Tensor):
            ids = input_ids if str(input_ids.device) == self.device else input_ids.to(self.device)
        else:
            ids = pf.tensor(input_ids, dtype=pf.int64, device=self.device)
        if ids.ndim == 1:
            ids = ids.reshape([1, ids.shape[0]])
        if ids.ndim != 2:
            raise ValueError(f"[llm] input_ids must be (batch, seq) or (seq,), got shape {tuple(ids.shape)}")
        B, S = ids.shape
        pos = 0
        if cache is not None:
            pos = cache.offset
            if B != cache.batch:
                raise ValueError(f"[llm] input batch {B} does not match the cache's batch {cache.batch}")
            if pos + S > cache.max_len:
                raise ValueError(f"[llm] {pos + S} positions do not fit the cache's capacity "
                                 f"{cache.max_len}")
        pad = cache.pad if cache is not None and any(cache.pad) else None
        # Per-row rotary positions only for padded rows; else the offset.
        rope_pos = None if pad is None else self._positions(pad, pos, S)
        masks = {}  # window -> attention mask (None: plain causal attention)
        h = C.embedding(ids, self.embed)
        for i, lw in enumerate(self.layers):
            win = cfg.layer_window(i)
            if win not in masks:
                masks[win] = self._mask(B, S, pos, cache.max_len if cache is not None else S, pad, win)
            h = self._layer(h, lw, i, pos, cache, rope_pos, masks[win])
        h = C.rms_norm(h, self.norm, cfg.rms_norm_eps)
        logits = _linear(h, self.lm_head)
        if cache is not None:
            cache.offset = pos + S
        return logits

    def _positions(self, pad, pos, S):
        """(B, 1, S) rotary positions of the slots pos.. of each row. Scores
        depend on position differences only, so this keeps a row's rounding
        (float32 angles) what it is when the row runs alone."""
        p = np.arange(pos, pos + S)[None, :] - np.asarray(pad)[:, None]
        return pf.tensor(np.maximum(p, 0)[:, None, :], dtype=pf.int64, device=self.device)

    def _mask(self, B, S, pos, L, pad, window):
        """The bool (B, 1, S, L) mask of queries at slots pos..pos+S-1 over key
        slots 0..L-1: causal, past each row's padding, within the window; or
        None when that is plain causal attention."""
        if pad is None and (window is None or pos + S <= window):
            return None
        q = np.arange(pos, pos + S)[:, None]
        k = np.arange(L)[None, :]
        ok = np.broadcast_to(k <= q, (B, S, L))
        if window is not None:
            ok = ok & (q - k < window)
        if pad is not None:
            ok = ok & (k >= np.asarray(pad)[:, None, None])
        ok = ok | (k == q)  # a padding query sees itself: no empty softmax
        return pf.tensor(np.ascontiguousarray(ok[:, None]), dtype=pf.bool_, device=self.device)

    def _layer(self, h, w, i, pos, cache, rope_pos, mask):
        cfg = self.config
        B, S = h.shape[0], h.shape[1]
        H, Hkv, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        x = C.rms_norm(h, w["input_layernorm.weight"], cfg.rms_norm_eps)
        q = _linear(x, w["self_attn.q_proj.weight"], w.get("self_attn.q_proj.bias"))
        k = _linear(x, w["self_attn.k_proj.weight"], w.get("self_attn.k_proj.bias"))
        v = _linear(x, w["self_attn.v_proj.weight"], w.get("self_attn.v_proj.bias"))
        q = C.transpose(q.reshape([B, S, H, hd]), [0, 2, 1, 3])
        k = C.transpose(k.reshape([B, S, Hkv, hd]), [0, 2, 1, 3])
        v = C.transpose(v.reshape([B, S, Hkv, hd]), [0, 2, 1, 3])
        off = pos if rope_pos is None else 0
        q = C.rope(q, rope_pos, offset=off, theta=cfg.rope_theta, inv_freq=self._inv_freq)
        k = C.rope(k, rope_pos, offset=off, theta=cfg.rope_theta, inv_freq=self._inv_freq)
        if cache is not None:
            k, v = cache.write(i, k, v, pos)
        if mask is not None:
            o = C.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        else:
            o = C.scaled_dot_product_attention(q, k, v, causal=True, causal_offset=pos)
        o = C.transpose(o, [0, 2, 1, 3]).reshape([B, S, H * hd])
        h = h + _linear(o, w["self_attn.o_proj.weight"], w.get("self_attn.o_proj.bias"))
        x = C.rms_norm(h, w["post_attention_layernorm.weight"], cfg.rms_norm_eps)
        g = _linear(x, w["mlp.gate_proj.weight"], w.get("mlp.gate_proj.bias"))
        u = _linear(x, w["mlp.up_proj.weight"], w.get("mlp.up_proj.bias"))
        d = _linear(C.silu(g) * u, w["mlp.down_proj.weight"], w.get("mlp.down_proj.bias"))
        return h + d
