"""The Llama-family decoder (Llama 2/3, Mistral, Qwen2) over PyFlame ops.

Prefill and decode run the same code: ``model(input_ids, cache)`` writes the
new keys and values into a fixed-capacity cache at its current position
(``pf.slice_update``, in place when the old version is not held elsewhere)
and attends over the whole cache with a causal offset, so every decode step
has the same shapes (what graph replay needs).
"""
import pyflame as pf
from .. import _core as C


class KVCache:
    """Keys and values of every layer, (batch, kv_heads, max_len, head_dim)
    each, and the number of positions written so far (``offset``)."""

    def __init__(self, config, batch, max_len, dtype, device):
        shape = (batch, config.num_key_value_heads, max_len, config.head_dim)
        self.keys = [pf.zeros(*shape, dtype=dtype, device=device) for _ in range(config.num_hidden_layers)]
        self.values = [pf.zeros(*shape, dtype=dtype, device=device) for _ in range(config.num_hidden_layers)]
        self.batch, self.max_len, self.offset = batch, max_len, 0

    def write(self, layer, k, v, pos):
        """Writes k, v (batch, kv_heads, S, head_dim) at pos; returns the caches.
        Rebinding the list entries leaves the new versions as the only holders
        of the old ones, so evaluation updates the buffers in place."""
        self.keys[layer] = C.slice_update(self.keys[layer], k, pos, 2)
        self.values[layer] = C.slice_update(self.values[layer], v, pos, 2)
        return self.keys[layer], self.values[layer]


def _linear(x, w, b=None):
    y = C.matmul(x, w.T)
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

    def make_cache(self, batch=1, max_len=None):
        """A fixed-capacity KV cache for `batch` sequences of up to `max_len`
        tokens (default: max_position_embeddings)."""
        max_len = int(max_len or self.config.max_position_embeddings)
        if batch <= 0 or max_len <= 0:
            raise ValueError(f"[make_cache] batch and max_len must be positive, got {batch}, {max_len}")
        return KVCache(self.config, batch, max_len, self.dtype, self.device)

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
        if cfg.sliding_window and pos + S > cfg.sliding_window:
            raise ValueError(f"[llm] sequences longer than sliding_window ({cfg.sliding_window}) "
                             "are not supported")
        h = C.embedding(ids, self.embed)
        for i, lw in enumerate(self.layers):
            h = self._layer(h, lw, i, pos, cache)
        h = C.rms_norm(h, self.norm, cfg.rms_norm_eps)
        logits = C.matmul(h, self.lm_head.T)
        if cache is not None:
            cache.offset = pos + S
        return logits

    def _layer(self, h, w, i, pos, cache):
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
        q = C.rope(q, offset=pos, theta=cfg.rope_theta, inv_freq=self._inv_freq)
        k = C.rope(k, offset=pos, theta=cfg.rope_theta, inv_freq=self._inv_freq)
        if cache is not None:
            k, v = cache.write(i, k, v, pos)
            o = C.scaled_dot_product_attention(q, k, v, causal=True, causal_offset=pos)
        else:
            o = C.scaled_dot_product_attention(q, k, v, causal=True)
        o = C.transpose(o, [0, 2, 1, 3]).reshape([B, S, H * hd])
        h = h + _linear(o, w["self_attn.o_proj.weight"], w.get("self_attn.o_proj.bias"))
        x = C.rms_norm(h, w["post_attention_layernorm.weight"], cfg.rms_norm_eps)
        g = _linear(x, w["mlp.gate_proj.weight"], w.get("mlp.gate_proj.bias"))
        u = _linear(x, w["mlp.up_proj.weight"], w.get("mlp.up_proj.bias"))
        d = _linear(C.silu(g) * u, w["mlp.down_proj.weight"], w.get("mlp.down_proj.bias"))
        return h + d
