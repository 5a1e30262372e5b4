"""The llm_decode / llm_prefill workloads' model: random weights of a
Llama-shaped checkpoint written once per process to a temporary Hugging Face
directory (config.json, one safetensors shard per layer and an index), loaded
by pyflame.llm on our side and by a plain PyTorch Llama with a preallocated KV
cache and scaled_dot_product_attention on PyTorch's (the same weights)."""
import atexit
import json
import os
import shutil
import tempfile

import numpy as np

_CHECKPOINTS = {}


def checkpoint(p, dtype):
    """(directory, config) for the shape in p, written on first use."""
    key = (p["d"], p["layers"], p["heads"], p["kv_heads"], p["ffn"], p["vocab"], dtype)
    if key in _CHECKPOINTS:
        return _CHECKPOINTS[key]
    from safetensors.numpy import save_file
    d, ffn, V, H, Hkv = p["d"], p["ffn"], p["vocab"], p["heads"], p["kv_heads"]
    hd = d // H
    cfg = dict(model_type="llama", architectures=["LlamaForCausalLM"], vocab_size=V, hidden_size=d,
               intermediate_size=ffn, num_hidden_layers=p["layers"], num_attention_heads=H,
               num_key_value_heads=Hkv, rms_norm_eps=1e-5, rope_theta=10000.0,
               max_position_embeddings=4096, tie_word_embeddings=False, torch_dtype=dtype)
    path = tempfile.mkdtemp(prefix="pyflame_llm_bench_")
    atexit.register(shutil.rmtree, path, True)
    rng = np.random.default_rng(0)
    np_dt = np.float16 if dtype == "float16" else np.float32

    def w(*shape):
        return (rng.standard_normal(shape, dtype=np.float32) * shape[-1] ** -0.5).astype(np_dt)

    def norm():
        return (1 + 0.1 * rng.standard_normal(d, dtype=np.float32)).astype(np_dt)
    n = p["layers"] + 1
    shards = {f"model-{i + 1:05d}-of-{n:05d}.safetensors": None for i in range(n)}
    names = list(shards)
    weight_map = {}
    head = {"model.embed_tokens.weight": w(V, d), "model.norm.weight": norm(), "lm_head.weight": w(V, d)}
    save_file(head, os.path.join(path, names[0]), metadata={"format": "pt"})
    weight_map.update({k: names[0] for k in head})
    for i in range(p["layers"]):
        pre = f"model.layers.{i}."
        layer = {pre + "input_layernorm.weight": norm(), pre + "post_attention_layernorm.weight": norm(),
                 pre + "self_attn.q_proj.weight": w(H * hd, d), pre + "self_attn.k_proj.weight": w(Hkv * hd, d),
                 pre + "self_attn.v_proj.weight": w(Hkv * hd, d), pre + "self_attn.o_proj.weight": w(d, H * hd),
                 pre + "mlp.gate_proj.weight": w(ffn, d), pre + "mlp.up_proj.weight": w(ffn, d),
                 pre + "mlp.down_proj.weight": w(d, ffn)}
        save_file(layer, os.path.join(path, names[i + 1]), metadata={"format": "pt"})
        weight_map.update({k: names[i + 1] for k in layer})
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    _CHECKPOINTS[key] = (path, cfg)
    return path, cfg


class TorchCache:
    def __init__(self, torch, cfg, batch, max_len, dtype, device):
        shape = (batch, cfg["num_key_value_heads"], max_len,
                 cfg["hidden_size"] // cfg["num_attention_heads"])
        n = cfg["num_hidden_layers"]
        self.keys = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(n)]
        self.values = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(n)]
        self.offset = 0


class TorchLlama:
    """The same forward in PyTorch: rotate-half RoPE from cos/sin tables, a
    static KV cache written by slice assignment, SDPA over the valid prefix."""

    def __init__(self, torch, path, cfg, dtype, device):
        from safetensors.torch import load_file
        self.torch, self.cfg, self.device = torch, cfg, device
        self.dtype = getattr(torch, dtype)
        self.W = {}
        for f in sorted(set(json.load(open(os.path.join(path, "model.safetensors.index.json")))
                            ["weight_map"].values())):
            self.W.update({k: v.to(device) for k, v in load_file(os.path.join(path, f)).items()})
        hd = cfg["hidden_size"] // cfg["num_attention_heads"]
        inv = cfg["rope_theta"] ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
        ang = torch.outer(torch.arange(cfg["max_position_embeddings"], dtype=torch.float64), inv)
        ang = torch.cat([ang, ang], -1)
        self.cos = ang.cos().to(self.dtype).to(device)
        self.sin = ang.sin().to(self.dtype).to(device)

    def make_cache(self, batch, max_len):
        return TorchCache(self.torch, self.cfg, batch, max_len, self.dtype, self.device)

    def _attend(self, q, k, v, causal):
        F = self.torch.nn.functional
        rep = q.shape[1] // k.shape[1]
        if rep > 1:
            k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        if hasattr(F, "scaled_dot_product_attention"):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        s = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
        if causal:
            s = s.masked_fill(self.torch.ones(s.shape[-2:], dtype=self.torch.bool, device=s.device)
                              .triu(1), float("-inf"))
        return self.torch.softmax(s.float(), -1).to(q.dtype) @ v

    def __call__(self, ids, cache):
        torch, cfg, W = self.torch, self.cfg, self.W
        with torch.no_grad():
            ids = torch.as_tensor(ids, device=self.device)
            B, S = ids.shape
            H, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
            hd, eps = cfg["hidden_size"] // H, cfg["rms_norm_eps"]
            pos = cache.offset
            cos, sin = self.cos[pos:pos + S], self.sin[pos:pos + S]

            def norm(x, w):
                return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype) * w

            def rope(x):
                return x * cos + torch.cat([-x[..., hd // 2:], x[..., :hd // 2]], -1) * sin

            x = W["model.embed_tokens.weight"][ids]
            for i in range(cfg["num_hidden_layers"]):
                p = f"model.layers.{i}."
                h = norm(x, W[p + "input_layernorm.weight"])
                q = (h @ W[p + "self_attn.q_proj.weight"].T).view(B, S, H, hd).transpose(1, 2)
                k = (h @ W[p + "self_attn.k_proj.weight"].T).view(B, S, Hkv, hd).transpose(1, 2)
                v = (h @ W[p + "self_attn.v_proj.weight"].T).view(B, S, Hkv, hd).transpose(1, 2)
                q, k = rope(q), rope(k)
                cache.keys[i][:, :, pos:pos + S] = k
                cache.values[i][:, :, pos:pos + S] = v
                o = self._attend(q, cache.keys[i][:, :, :pos + S], cache.values[i][:, :, :pos + S], S > 1)
                x = x + o.transpose(1, 2).reshape(B, S, H * hd) @ W[p + "self_attn.o_proj.weight"].T
                h = norm(x, W[p + "post_attention_layernorm.weight"])
                g = h @ W[p + "mlp.gate_proj.weight"].T
                u = h @ W[p + "mlp.up_proj.weight"].T
                x = x + (torch.nn.functional.silu(g) * u) @ W[p + "mlp.down_proj.weight"].T
            cache.offset = pos + S
            return norm(x, W["model.norm.weight"]) @ W["lm_head.weight"].T


def load(F, p, dtype):
    """The model for adapter F (PyFlame or PyTorch) on its device."""
    path, cfg = checkpoint(p, dtype)
    if F.is_torch:
        return TorchLlama(F.torch, path, cfg, dtype, F.device)
    model, _ = F.llm.load(path, device=F.device)
    return model
