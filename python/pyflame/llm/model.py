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

Decode can also run compiled (``model.decode``, what ``generate`` uses): the
step takes its position as a 0-d tensor, so one trace (one GPU graph) serves
every token of a cache (docs/design/kv_cache.md).
"""
import functools

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
        self.device, self._step, self._consts = device, None, None

    def write(self, layer, k, v, pos):
        """Writes k, v (batch, kv_heads, S, head_dim) at slot pos (an int), or
        one token per row at the flat positions pos (a tensor, ``index(p)``:
        the compiled decode step); returns the caches. Rebinding the handles
        (``_replace``) leaves the new versions as the only holders of the old
        ones, so evaluation updates the buffers in place; under a compiled
        step the rebinding is the step's side effect, replayed."""
        if isinstance(pos, C.Tensor):
            new_k, new_v = C.put(self.keys[layer], pos, k), C.put(self.values[layer], pos, v)
        else:
            new_k = C.slice_update(self.keys[layer], k, pos, 2)
            new_v = C.slice_update(self.values[layer], v, pos, 2)
        self.keys[layer]._replace(new_k)
        self.values[layer]._replace(new_v)
        return self.keys[layer], self.values[layer]

    def index(self, pos):
        """The flat positions (batch, kv_heads, 1, head_dim) of one token per
        row at slot pos (a 0-d int64 tensor) in each layer's keys and values:
        computed once per step, written by every layer."""
        return self.constants()["slot0"] + pos * self.keys[0].shape[-1]

    def constants(self):
        """Device tensors a compiled decode step reads (made once): slot0, the
        flat positions of one token's entries at slot 0 (B, kv_heads, 1,
        head_dim); slots, arange(max_len); pad, (B, 1, 1, 1)."""
        if self._consts is None:
            B, Hkv, L, hd = self.keys[0].shape
            slot0 = (np.arange(B * Hkv)[:, None] * (L * hd) + np.arange(hd)[None, :]).reshape(B, Hkv, 1, hd)
            self._consts = {
                "slot0": pf.tensor(slot0, dtype=pf.int64, device=self.device),
                "slots": pf.tensor(np.arange(L), dtype=pf.int64, device=self.device),
                "pad": pf.tensor(np.asarray(self.pad).reshape(B, 1, 1, 1), dtype=pf.int64,
                                 device=self.device),
            }
            pf.eval(*self._consts.values())  # device data, not uploads a trace would record
        return self._consts


def _linear(x, w_t, b=None):
    """x (rows, K) @ w_t (K, N), a weight's transposed view made at load: the
    hidden states stay (B * S, D) rows, so each projection is one GEMM (a
    batched matmul against a broadcast weight would read the weight once per
    batch row) and a compiled step records no reshapes or transposes for it."""
    y = C.matmul(x, w_t)
    return y if b is None else y + b


# Projections that read the same input, fused into one weight at load (one
# GEMV per group per decode token instead of three or two): fused name ->
# the parts, concatenated along the output rows in this order.
_FUSED = {"self_attn.qkv_proj": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
          "mlp.gate_up_proj": ("mlp.gate_proj", "mlp.up_proj")}


def _fuse_layer(weights, prefix):
    """Replaces the parts of each fused projection of one layer (weights and
    biases) in `weights` by their concatenation, evaluated now: the parts go
    before the next layer is fused, so at most one layer's projections are
    held twice. (``load`` joins the parts on the host before uploading, so
    its dicts arrive fused; this serves dicts made otherwise.)"""
    for fused, parts in _FUSED.items():
        for kind in ("weight", "bias"):
            names = [f"{prefix}{part}.{kind}" for part in parts]
            if not all(n in weights for n in names):
                continue
            t = C.concat([weights.pop(n) for n in names], 0)
            pf.eval(t)
            weights[f"{prefix}{fused}.{kind}"] = t


def _norm_weight(w):
    """A norm's weight as the float32 vector rms_norm computes with, made
    once (not a cast per call and per token)."""
    if w.dtype == pf.float32:
        return w
    w = w.astype(pf.float32)
    pf.eval(w)
    return w


class LlamaModel:
    """Holds the weights (a dict of name -> tensor, Hugging Face names) and runs
    the forward pass. Built by ``pyflame.llm.load``. The dict is changed in
    place: each layer's q/k/v and gate/up parts become ``self_attn.qkv_proj``
    and ``mlp.gate_up_proj`` (weights and biases, see _fuse_layer)."""

    def __init__(self, config, weights, dtype, device):
        self.config, self.dtype, self.device = config, dtype, device
        self.weights = weights
        self._inv_freq = config.rope_inv_freq()
        cfg = config
        self.layers = []  # per layer: short name -> tensor, plus each projection's ".T" view
        for i in range(cfg.num_hidden_layers):
            p = f"model.layers.{i}."
            _fuse_layer(weights, p)
            w = {k[len(p):]: v for k, v in weights.items() if k.startswith(p)}
            w.update({k[:-len("weight")] + "T": v.T for k, v in w.items() if k.endswith("_proj.weight")})
            for k in ("input_layernorm.weight", "post_attention_layernorm.weight"):
                w[k] = _norm_weight(w[k])
            self.layers.append(w)
        self.embed = weights["model.embed_tokens.weight"]
        self.norm = _norm_weight(weights["model.norm.weight"])
        self.lm_head = self.embed if cfg.tie_word_embeddings else weights["lm_head.weight"]
        self._lm_head_t = self.lm_head.T

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
        ids = self._ids(input_ids)
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
        L = cache.max_len if cache is not None else S
        logits = self._forward(ids, pos, cache, rope_pos,
                               lambda win: self._attend(self._mask(B, S, pos, L, pad, win), pos))
        if cache is not None:
            cache.offset = pos + S
        return logits

    def decode(self, input_ids, cache):
        """Logits (B, 1, vocab) of one token per row (input_ids (B, 1)) at
        position cache.offset, through the cache's compiled decode step: the
        position is a tensor argument, so every token replays one trace (on a
        GPU, one graph). Same values as ``model(input_ids, cache)``."""
        ids = self._ids(input_ids)
        if tuple(ids.shape) != (cache.batch, 1):
            raise ValueError(f"[llm] decode takes one token per row, shape ({cache.batch}, 1), "
                             f"got {tuple(ids.shape)}")
        if cache.offset + 1 > cache.max_len:
            raise ValueError(f"[llm] {cache.offset + 1} positions do not fit the cache's capacity "
                             f"{cache.max_len}")
        if cache._step is None:
            cache.constants()  # made before the trace: a GPU graph reads them in place
            cache._step = pf.compile(functools.partial(self._decode_step, cache))
        logits = cache._step(ids, pf.tensor(cache.offset, dtype=pf.int64, device=self.device))
        cache.offset += 1
        return logits

    def _decode_step(self, cache, ids, pos):
        """The traced decode step: everything position-dependent (rotary
        positions, cache slot, mask) is computed on the device from pos."""
        B, L = cache.batch, cache.max_len
        c = cache.constants()
        padded = any(cache.pad)
        rope_pos = pos - c["pad"].reshape([B, 1, 1]) if padded else pos.reshape([1, 1, 1])
        rope_pos = rope_pos.astype(pf.float32)  # rope's dtype, cast once for every layer
        slots = c["slots"].reshape([1, 1, 1, L])

        def attend(win):
            if not padded and (win is None or L <= win):  # the fused kernel reads pos
                return self._attend(None, pos)
            ok = slots <= pos
            if win is not None:
                ok = ok & ((pos - slots) < win)
            if padded:
                ok = ok & (slots >= c["pad"])
            return self._attend(pf.broadcast_to(ok, [B, 1, 1, L]), pos)
        return self._forward(ids, cache.index(pos), cache, rope_pos, attend)

    @staticmethod
    def _attend(mask, pos):
        """Attention's arguments: the mask, or causal from pos (an int or a
        0-d tensor, read at evaluation)."""
        return {"attn_mask": mask} if mask is not None else {"causal": True, "causal_offset": pos}

    def _ids(self, input_ids):
        """input_ids as a (B, S) int64 tensor on the model's device."""
        if isinstance(input_ids, C.Tensor):
            ids = input_ids if str(input_ids.device) == self.device else input_ids.to(self.device)
        else:
            ids = pf.tensor(input_ids, dtype=pf.int64, device=self.device)
        if ids.ndim == 1:
            ids = ids.reshape([1, ids.shape[0]])
        if ids.ndim != 2:
            raise ValueError(f"[llm] input_ids must be (batch, seq) or (seq,), got shape {tuple(ids.shape)}")
        return ids

    def _forward(self, ids, pos, cache, rope_pos, attend):
        """Logits of ids at slot pos (an int, or the cache's flat write
        positions for a compiled step, which also passes rope_pos);
        attend(window) gives that window's attention arguments."""
        cfg = self.config
        attn = {}  # window -> attention arguments
        B, S = ids.shape
        h = C.embedding(ids.reshape([B * S]), self.embed)  # (B * S, D) rows throughout
        for i, lw in enumerate(self.layers):
            win = cfg.layer_window(i)
            if win not in attn:
                attn[win] = attend(win)
            h = self._layer(h, lw, i, B, S, pos, cache, rope_pos, attn[win])
        h = C.rms_norm(h, self.norm, cfg.rms_norm_eps)
        return _linear(h, self._lm_head_t).reshape([B, S, self.lm_head.shape[0]])

    def _positions(self, pad, pos, S):
        """(B, 1, S) rotary positions of the slots pos.. of each row. Scores
        depend on position differences only, so this keeps a row's rounding
        (float32 angles) what it is when the row runs alone. float32, rope's
        positions dtype (exact for any cache length below 2**24)."""
        p = np.arange(pos, pos + S)[None, :] - np.asarray(pad)[:, None]
        return pf.tensor(np.maximum(p, 0)[:, None, :], dtype=pf.float32, device=self.device)

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

    def _layer(self, h, w, i, B, S, pos, cache, rope_pos, attn):
        """One decoder layer over the hidden rows h (B * S, D)."""
        cfg = self.config
        H, Hkv, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        x = C.rms_norm(h, w["input_layernorm.weight"], cfg.rms_norm_eps)
        # One GEMM for q, k and v (fused at load); the heads are views of its
        # output. Rope turns q's and k's heads in one call (same positions and
        # frequencies): q and k are views of its output.
        qkv = _linear(x, w["self_attn.qkv_proj.T"], w.get("self_attn.qkv_proj.bias"))
        qkv = qkv.reshape([B, S, H + 2 * Hkv, hd])
        qk = C.transpose(qkv[:, :, :H + Hkv], [0, 2, 1, 3])
        v = C.transpose(qkv[:, :, H + Hkv:], [0, 2, 1, 3])
        off = pos if rope_pos is None else 0  # a tensor pos comes with rope_pos
        qk = C.rope(qk, rope_pos, offset=off, theta=cfg.rope_theta, inv_freq=self._inv_freq)
        q, k = qk[:, :H], qk[:, H:]
        if cache is not None:
            k, v = cache.write(i, k, v, pos)
        o = C.scaled_dot_product_attention(q, k, v, **attn)
        o = C.transpose(o, [0, 2, 1, 3]).reshape([B * S, H * hd])
        h = h + _linear(o, w["self_attn.o_proj.T"], w.get("self_attn.o_proj.bias"))
        x = C.rms_norm(h, w["post_attention_layernorm.weight"], cfg.rms_norm_eps)
        # gate and up: one GEMM (fused at load), halves as views.
        I = cfg.intermediate_size
        gu = _linear(x, w["mlp.gate_up_proj.T"], w.get("mlp.gate_up_proj.bias"))
        d = _linear(C.silu(gu[:, :I]) * gu[:, I:], w["mlp.down_proj.T"], w.get("mlp.down_proj.bias"))
        return h + d
