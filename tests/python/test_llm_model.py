"""pyflame.llm: tiny random checkpoints written here with safetensors (no
downloads), logits against an independent float64 NumPy forward, cached
greedy decoding against re-running the sequence, seeded sampling, errors,
the tokenizer and the command line; and Hugging Face transformers where it
is installed."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import pyflame as pf
import pyflame.llm as llm

safetensors_numpy = pytest.importorskip("safetensors.numpy")

BASE = dict(vocab_size=61, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=4, rms_norm_eps=1e-5, rope_theta=10000.0,
            max_position_embeddings=128, tie_word_embeddings=False, eos_token_id=2, bos_token_id=1)

VARIANTS = {
    "llama2": dict(model_type="llama", architectures=["LlamaForCausalLM"]),
    "llama3": dict(model_type="llama", architectures=["LlamaForCausalLM"], rope_theta=500000.0,
                   hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                   rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                     high_freq_factor=4.0, original_max_position_embeddings=64)),
    "mistral": dict(model_type="mistral", architectures=["MistralForCausalLM"],
                    num_key_value_heads=2, sliding_window=4096),
    "qwen2": dict(model_type="qwen2", architectures=["Qwen2ForCausalLM"], num_key_value_heads=1,
                  tie_word_embeddings=True, rope_theta=1000000.0),
    # Windows shorter than the test sequences: every layer (Mistral), layers
    # from max_window_layers on (Qwen2).
    "mistral_swa": dict(model_type="mistral", num_key_value_heads=2, sliding_window=4),
    "qwen2_swa": dict(model_type="qwen2", num_key_value_heads=2, use_sliding_window=True,
                      sliding_window=3, max_window_layers=1),
    "gqa": dict(model_type="llama", num_attention_heads=8, num_key_value_heads=2, hidden_size=64),
    "tied": dict(model_type="llama", tie_word_embeddings=True),
    "sharded": dict(model_type="llama"),
}


def make_config(variant, **over):
    cfg = dict(BASE)
    cfg.update(VARIANTS[variant])
    cfg.update(over)
    return cfg


def random_weights(cfg, rng):
    """name -> float64 array of a random checkpoint for cfg."""
    D, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    H, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = D // H
    g = lambda *s: rng.standard_normal(s) / np.sqrt(s[-1])  # noqa: E731
    w = {"model.embed_tokens.weight": rng.standard_normal((V, D)),
         "model.norm.weight": 1 + 0.1 * rng.standard_normal(D)}
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = g(V, D)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(D)
        w[p + "post_attention_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(D)
        w[p + "self_attn.q_proj.weight"] = g(H * hd, D)
        w[p + "self_attn.k_proj.weight"] = g(Hkv * hd, D)
        w[p + "self_attn.v_proj.weight"] = g(Hkv * hd, D)
        w[p + "self_attn.o_proj.weight"] = g(D, H * hd)
        if cfg["model_type"] == "qwen2":
            for n, r in (("q", H * hd), ("k", Hkv * hd), ("v", Hkv * hd)):
                w[p + f"self_attn.{n}_proj.bias"] = 0.5 * rng.standard_normal(r)
        w[p + "mlp.gate_proj.weight"] = g(I, D)
        w[p + "mlp.up_proj.weight"] = g(I, D)
        w[p + "mlp.down_proj.weight"] = g(D, I)
    return w


def bf16_bits(x):
    """float64 -> bfloat16 bits (round to nearest even) as uint16, and the
    rounded values as float64."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    vals = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return bits, vals


def write_checkpoint(path, cfg, weights, dtype="float32", shards=1):
    """Writes config.json and safetensors files; returns the weights as stored
    (rounded to dtype), float64."""
    os.makedirs(path, exist_ok=True)
    stored, arrays = {}, {}
    for n, a in weights.items():
        if dtype == "bfloat16":
            bits, vals = bf16_bits(a)
            arrays[n], stored[n] = bits, vals
        else:
            arr = a.astype(np.float32 if dtype == "float32" else np.float16)
            arrays[n], stored[n] = arr, arr.astype(np.float64)
    cfg = dict(cfg, torch_dtype=dtype)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    names = sorted(arrays)
    groups = [names[i::shards] for i in range(shards)]
    weight_map = {}
    for s, group in enumerate(groups):
        fname = "model.safetensors" if shards == 1 else f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        _save(os.path.join(path, fname), {n: arrays[n] for n in group}, dtype)
        weight_map.update({n: fname for n in group})
    if shards > 1:
        with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return stored


def _save(file, arrays, dtype):
    if dtype != "bfloat16":
        safetensors_numpy.save_file(arrays, file, metadata={"format": "pt"})  # transformers wants it
        return
    # The safetensors layout by hand (NumPy cannot name bfloat16): an 8-byte
    # header length, a JSON header, then the raw data.
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for n, a in arrays.items():
        b = a.tobytes()
        header[n] = {"dtype": "BF16", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(file, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


# ------------------------------------------------------------- NumPy reference

def ref_inv_freq(cfg):
    hd = cfg["hidden_size"] // cfg["num_attention_heads"]
    inv = 1.0 / cfg["rope_theta"] ** (np.arange(0, hd, 2) / hd)
    rs = cfg.get("rope_scaling")
    if rs and rs["rope_type"] == "llama3":
        factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        wavelen = 2 * np.pi / inv
        scaled = np.where(wavelen > old / lo, inv / factor, inv)
        smooth = (old / wavelen - lo) / (hi - lo)
        medium = (wavelen >= old / hi) & (wavelen <= old / lo)
        inv = np.where(medium, (1 - smooth) * scaled / factor + smooth * scaled, scaled)
    return inv.astype(np.float32).astype(np.float64)


def ref_window(cfg, layer):
    """The attention window of a layer, as Hugging Face's Mistral and Qwen2."""
    if cfg["model_type"] == "mistral" or cfg.get("use_sliding_window"):
        if layer >= cfg.get("max_window_layers", 0):
            return cfg.get("sliding_window")
    return None


def ref_forward(cfg, W, ids):
    """float64 logits (B, S, V) of the Llama-family forward."""
    ids = np.asarray(ids)
    B, S = ids.shape
    D, H, Hkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd, eps = D // H, cfg["rms_norm_eps"]
    norm = lambda x, w: x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w  # noqa: E731
    ang = np.arange(S)[:, None] * ref_inv_freq(cfg)[None, :]
    cos, sin = np.cos(ang), np.sin(ang)

    def rope(x):
        a, b = x[..., :hd // 2], x[..., hd // 2:]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin], -1)

    x = W["model.embed_tokens.weight"][ids]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        causal = np.tril(np.ones((S, S), bool))
        if ref_window(cfg, i):  # key j within the last `window` positions of query i
            causal &= np.triu(np.ones((S, S), bool), 1 - ref_window(cfg, i))
        lin = lambda h, n: h @ W[p + n + ".weight"].T + W.get(p + n + ".bias", 0.0)  # noqa: E731
        h = norm(x, W[p + "input_layernorm.weight"])
        q = lin(h, "self_attn.q_proj").reshape(B, S, H, hd).transpose(0, 2, 1, 3)
        k = lin(h, "self_attn.k_proj").reshape(B, S, Hkv, hd).transpose(0, 2, 1, 3)
        v = lin(h, "self_attn.v_proj").reshape(B, S, Hkv, hd).transpose(0, 2, 1, 3)
        q, k = rope(q), rope(k)
        k, v = np.repeat(k, H // Hkv, 1), np.repeat(v, H // Hkv, 1)
        s = np.where(causal, q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd), -np.inf)
        pr = np.exp(s - s.max(-1, keepdims=True))
        o = (pr / pr.sum(-1, keepdims=True)) @ v
        x = x + lin(o.transpose(0, 2, 1, 3).reshape(B, S, H * hd), "self_attn.o_proj")
        h = norm(x, W[p + "post_attention_layernorm.weight"])
        g = lin(h, "mlp.gate_proj")
        x = x + lin(g / (1 + np.exp(-g)) * lin(h, "mlp.up_proj"), "mlp.down_proj")
    head = W["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else W["lm_head.weight"]
    return norm(x, W["model.norm.weight"]) @ head.T


@pytest.fixture
def ckpt(tmp_path, rng):
    """ckpt(variant, dtype='float32', **config) -> (dir, config, stored weights)."""
    def make(variant, dtype="float32", **over):
        cfg = make_config(variant, **over)
        path = str(tmp_path / f"{variant}-{dtype}")
        W = write_checkpoint(path, cfg, random_weights(cfg, rng), dtype,
                             shards=3 if variant == "sharded" else 1)
        return path, cfg, W
    return make


# ------------------------------------------------------------------- logits

@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_logits_match_numpy_reference(device, ckpt, variant, rng):
    path, cfg, W = ckpt(variant)
    model, tok = llm.load(path)
    assert tok is None and model.dtype == pf.float32
    ids = rng.integers(0, cfg["vocab_size"], size=(2, 11))
    logits = model(pf.tensor(ids, device=device))
    assert logits.shape == (2, 11, cfg["vocab_size"]) and logits.device.startswith(device.split(":")[0])
    np.testing.assert_allclose(logits.numpy(), ref_forward(cfg, W, ids), rtol=2e-4, atol=2e-4)


def test_llama3_frequencies_fall_in_every_band():
    cfg = llm.ModelConfig.from_dict(make_config("llama3"))
    inv = np.array(cfg.rope_inv_freq())
    base = 1.0 / 500000.0 ** (np.arange(0, 16, 2) / 16)
    assert inv[0] == pytest.approx(base[0])           # high frequency: kept
    assert inv[-1] == pytest.approx(base[-1] / 8)      # low frequency: scaled by the factor
    mid = ~np.isclose(inv, base) & ~np.isclose(inv, base / 8)
    assert mid.any()                                   # a smoothed one in between


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_checkpoints(device, ckpt, dtype, rng):
    path, cfg, W = ckpt("gqa", dtype)
    ids = rng.integers(0, cfg["vocab_size"], size=(1, 9))
    ref = ref_forward(cfg, W, ids)
    # Loaded as stored (16-bit compute) and widened to float32 (exact weights).
    model, _ = llm.load(path, device=device)
    assert str(model.dtype) == dtype
    assert str(model.weights["model.norm.weight"].dtype) == dtype
    tol = 0.05 if dtype == "float16" else 0.3
    np.testing.assert_allclose(model(ids).numpy(), ref, rtol=tol, atol=tol)
    model32, _ = llm.load(path, dtype=pf.float32, device=device)
    np.testing.assert_allclose(model32(ids).numpy(), ref, rtol=2e-4, atol=2e-4)
    # bfloat16 bits arrive unchanged: the weight equals the stored values exactly.
    got = model32.weights["model.embed_tokens.weight"].numpy().astype(np.float64)
    assert np.array_equal(got, W["model.embed_tokens.weight"])


# ------------------------------------------------------------------- the cache

@pytest.mark.parametrize("variant", ["llama3", "qwen2", "mistral", "mistral_swa", "qwen2_swa"])
def test_cached_decode_equals_full_sequence(device, ckpt, variant, rng):
    path, cfg, W = ckpt(variant)
    model, _ = llm.load(path, device=device)
    prompt = rng.integers(0, cfg["vocab_size"], size=7).tolist()
    out = llm.generate(model, prompt, 10, stop=[])
    assert len(out) == 10
    seq = list(prompt)
    for t in out:  # each token is the argmax of a fresh full-sequence forward
        full = model([seq]).numpy()[0, -1]
        assert t == int(np.argmax(full))
        seq.append(t)
    # Cached prefill + decode logits against the uncached and reference logits.
    cache = model.make_cache(1, 32)
    a = model([seq[:12]], cache).numpy()
    b = model([seq[12:13]], cache).numpy()
    c = model([seq[13:16]], cache).numpy()
    assert cache.offset == 16
    ref = ref_forward(cfg, W, np.array([seq[:16]]))
    np.testing.assert_allclose(np.concatenate([a, b, c], 1), ref, rtol=2e-4, atol=2e-4)


def test_decode_writes_the_cache_in_place(device, ckpt):
    from test_sort import _Memory
    path, cfg, _ = ckpt("llama2")
    model, _ = llm.load(path, device=device)
    cache = model.make_cache(1, 4096)    # 512 KiB per layer's keys
    per_tensor = 4 * cfg["num_key_value_heads"] * 4096 * (cfg["hidden_size"] // cfg["num_attention_heads"])
    model([[1, 2, 3]], cache).numpy()
    # Warm-up decode steps: the trace, and on a GPU the graph capture, whose
    # private pool is allocated once.
    for tok in (4, 5, 6):
        model([[tok]], cache).numpy()
    mem = _Memory(device)
    for tok in (7, 8, 9):
        pf.synchronize()
        mem.reset()
        before = mem.used()
        model([[tok]], cache).numpy()
        # No step needs a second cache-sized buffer: the writes reuse the old ones.
        assert mem.peak() - before < per_tensor // 2


def _data_ptrs(tensors):
    """Where each CPU tensor's data lives (the NumPy view is dropped at once:
    holding it would keep the buffer from being written in place)."""
    return [np.from_dlpack(t).__array_interface__["data"][0] for t in tensors]


def test_compiled_decode_writes_the_cache_in_place(device, ckpt):
    # A replay's put takes the buffer of the handle's old version (it dies
    # with the step): no cache-sized buffer per token, and on the CPU each
    # layer's keys and values stay in the same memory from token to token.
    from test_sort import _Memory
    path, cfg, _ = ckpt("llama2")
    model, _ = llm.load(path, device=device)
    cache = model.make_cache(1, 4096)
    per_tensor = 4 * cfg["num_key_value_heads"] * 4096 * (cfg["hidden_size"] // cfg["num_attention_heads"])
    model([[1, 2, 3]], cache).numpy()
    for tok in (4, 5, 6):  # the trace, and on a GPU the capture
        model.decode([[tok]], cache).numpy()
    caches = cache.keys + cache.values
    ptrs = _data_ptrs(caches) if device == "cpu" else None  # NumPy views: CPU only
    mem = _Memory(device)
    for tok in (7, 8, 9):
        pf.synchronize()
        mem.reset()
        before = mem.used()
        model.decode([[tok]], cache).numpy()
        assert mem.peak() - before < per_tensor // 2
    if device == "cpu":
        assert _data_ptrs(caches) == ptrs
        # A version someone still holds is not written: the step copies. (A
        # GPU graph writes the memory it baked in, which a detach() shares.)
        old = cache.keys[0] * 1
        held = cache.keys[0].detach()
        model.decode([[10]], cache).numpy()
        np.testing.assert_array_equal(held.numpy(), old.numpy())
        assert not np.array_equal(cache.keys[0].numpy(), old.numpy())


def test_decode_step_ops(ckpt):
    # What a compiled decode step records per layer: one GEMM for q, k and v
    # and one for gate and up (fused at load), one rope for q and k, and the
    # rotary positions cast once for every layer.
    import collections
    path, cfg, _ = ckpt("qwen2")
    model, _ = llm.load(path, device="cpu")
    L = cfg["num_hidden_layers"]
    cache = model.make_cache(1, 8)
    model([[1, 2]], cache)
    model.decode([[3]], cache)
    (names,) = cache._step.steps
    count = collections.Counter(names)
    assert count["matmul"] == 4 * L + 1
    assert count["rope"] == L and count["put"] == 2 * L
    assert count["scaled_dot_product_attention"] == L and count["rms_norm"] == 2 * L + 1
    assert count["astype"] == 1 and count["transpose"] == 3 * L


def test_projections_fused_at_load(device, ckpt, rng):
    # q/k/v (and Qwen2's biases) and gate/up are each one weight, joined on
    # the host: loading never holds more than one layer's projections twice.
    from test_sort import _Memory
    path, cfg, W = ckpt("qwen2")
    import gc
    mem = _Memory(device)
    gc.collect()
    pf.synchronize()
    mem.reset()
    model, _ = llm.load(path, device=device)
    pf.synchronize()
    extra = mem.peak() - mem.used()
    D, I = cfg["hidden_size"], cfg["intermediate_size"]
    H, Hkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], D // cfg["num_attention_heads"]
    layer = 4 * ((H + 2 * Hkv) * hd * (D + 1) + 2 * I * D)
    assert extra <= layer + 4096
    p = "model.layers.1."
    parts = [f"self_attn.{n}_proj.{kind}" for n in "qkv" for kind in ("weight", "bias")]
    assert not any(p + n in model.weights for n in parts + ["mlp.gate_proj.weight", "mlp.up_proj.weight"])
    qkv = model.weights[p + "self_attn.qkv_proj.weight"].numpy()
    np.testing.assert_array_equal(qkv, np.concatenate([W[p + f"self_attn.{n}_proj.weight"]
                                                       for n in "qkv"]).astype(np.float32))
    bias = model.weights[p + "self_attn.qkv_proj.bias"].numpy()
    np.testing.assert_array_equal(bias, np.concatenate([W[p + f"self_attn.{n}_proj.bias"]
                                                        for n in "qkv"]).astype(np.float32))
    assert model.weights[p + "mlp.gate_up_proj.weight"].shape == (2 * I, D)
    # A model made from a dict of the parts fuses them itself (on the device).
    given = {k: pf.tensor(v.astype(np.float32), device=device) for k, v in W.items()}
    direct = llm.LlamaModel(model.config, given, model.dtype, model.device)
    assert p + "self_attn.qkv_proj.bias" in given and p + "self_attn.q_proj.weight" not in given
    ids = rng.integers(0, cfg["vocab_size"], size=(2, 5))
    np.testing.assert_array_equal(direct(ids).numpy(), model(ids).numpy())


def test_cache_batch_and_capacity_errors(device, ckpt):
    path, cfg, W = ckpt("llama2")
    model, _ = llm.load(path, device=device)
    cache = model.make_cache(2, 8)
    ids = np.arange(10).reshape(2, 5) % cfg["vocab_size"]
    out = model(ids, cache)
    np.testing.assert_allclose(out.numpy(), ref_forward(cfg, W, ids), rtol=2e-4, atol=2e-4)
    with pytest.raises(ValueError, match="capacity"):
        model(ids, cache)
    with pytest.raises(ValueError, match="batch"):
        model([[1]], cache)
    with pytest.raises(ValueError, match="make_cache"):
        model.make_cache(0, 8)


# ------------------------------------------------------------------- compiled decode

def _count_traces(model):
    """Counts runs of the decode step's Python code (traces; replays skip it)."""
    calls = []
    step = model._decode_step

    def counted(*args):
        calls.append(1)
        return step(*args)
    model._decode_step = counted
    return calls


@pytest.mark.parametrize("variant", ["llama3", "qwen2", "mistral_swa", "qwen2_swa"])
def test_compiled_decode_replays_the_eager_step(device, ckpt, variant, rng):
    path, cfg, W = ckpt(variant)
    model, _ = llm.load(path, device=device)
    traces = _count_traces(model)
    seq = rng.integers(0, cfg["vocab_size"], size=14).tolist()
    eager, comp = model.make_cache(1, 20), model.make_cache(1, 20)
    a = [model([seq[:6]], eager).numpy()[:, -1]]
    b = [model([seq[:6]], comp).numpy()[:, -1]]
    for t in seq[6:]:  # past the windows (4, 3): the mask slides under replay too
        a.append(model([[t]], eager).numpy()[:, -1])
        b.append(model.decode([[t]], comp).numpy()[:, -1])
    assert comp.offset == eager.offset == 14 and len(traces) == 1   # one trace, 7 replays
    # Eager writes between replays (a second prompt chunk) are read by the next replay.
    more = rng.integers(0, cfg["vocab_size"], size=3).tolist()
    model([more[:2]], eager), model([more[:2]], comp)
    a.append(model([more[2:]], eager).numpy()[:, -1])
    b.append(model.decode([more[2:]], comp).numpy()[:, -1])
    assert len(traces) == 1
    np.testing.assert_allclose(np.concatenate(b), np.concatenate(a), rtol=1e-5, atol=1e-5)
    ref = ref_forward(cfg, W, np.array([seq + more]))[0, [*range(5, 14), 16]]
    np.testing.assert_allclose(np.concatenate(b), ref, rtol=2e-4, atol=2e-4)
    # The cache holds what the eager steps wrote: the writes stayed in place.
    for layer in range(cfg["num_hidden_layers"]):
        np.testing.assert_allclose(comp.keys[layer].numpy(), eager.keys[layer].numpy(), atol=1e-6)
        np.testing.assert_allclose(comp.values[layer].numpy(), eager.values[layer].numpy(), atol=1e-6)


@pytest.mark.parametrize("variant", ["llama2", "gqa", "mistral_swa"])
def test_compiled_generate_equals_eager(device, ckpt, variant, rng):
    path, cfg, _ = ckpt(variant)
    model, _ = llm.load(path, device=device)
    rows = [rng.integers(0, cfg["vocab_size"], size=n).tolist() for n in (5, 2, 8)]
    for prompt in (rows[0], rows):      # one prompt, a left-padded batch
        want = llm.generate(model, prompt, 9, stop=[], compile=False)
        assert llm.generate(model, prompt, 9, stop=[]) == want
    kw = dict(temperature=0.8, top_k=12, top_p=0.9, seed=3, stop=[])
    assert llm.generate(model, rows, 6, **kw) == llm.generate(model, rows, 6, compile=False, **kw)


def test_compiled_decode_errors(device, ckpt):
    path, cfg, _ = ckpt("llama2")
    model, _ = llm.load(path, device=device)
    cache = model.make_cache(2, 4)
    model([[1, 2, 3], [4, 5, 6]], cache)
    with pytest.raises(ValueError, match=r"\[llm\] decode takes one token per row"):
        model.decode([[1, 2], [3, 4]], cache)
    model.decode([[1], [2]], cache)
    with pytest.raises(ValueError, match="capacity"):
        model.decode([[1], [2]], cache)
    assert cache.offset == 4


# ------------------------------------------------------------------- batches

@pytest.mark.parametrize("variant", ["llama3", "mistral_swa"])
def test_padded_batch_prefill_matches_each_prompt(device, ckpt, variant, rng):
    path, cfg, W = ckpt(variant)
    model, _ = llm.load(path, device=device)
    rows = [rng.integers(0, cfg["vocab_size"], size=n).tolist() for n in (3, 9, 6)]
    pad = [9 - len(r) for r in rows]
    cache = model.make_cache(3, 12, pad)
    got = model([[0] * p + r for p, r in zip(pad, rows)], cache).numpy()
    nxt = rng.integers(0, cfg["vocab_size"], size=3).tolist()
    step = model([[t] for t in nxt], cache).numpy()
    for b, (p, r) in enumerate(zip(pad, rows)):  # each row as if it ran alone, at positions 0..
        ref = ref_forward(cfg, W, np.array([r + [nxt[b]]]))[0]
        np.testing.assert_allclose(got[b, p:], ref[:-1], rtol=2e-4, atol=2e-4)
        np.testing.assert_allclose(step[b, 0], ref[-1], rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("variant", ["llama3", "mistral_swa"])
def test_batched_greedy_equals_each_prompt_alone(device, ckpt, variant, rng):
    path, cfg, _ = ckpt(variant)
    model, _ = llm.load(path, device=device)
    rows = [rng.integers(0, cfg["vocab_size"], size=n).tolist() for n in (5, 2, 8)]
    alone = [llm.generate(model, r, 7, stop=[]) for r in rows]
    assert llm.generate(model, rows, 7, stop=[]) == alone
    # A stop token ends its row only: row 0 stops at its third token.
    stop = alone[0][2]
    alone = [llm.generate(model, r, 7, stop=stop) for r in rows]
    assert len(alone[0]) <= 3 and any(len(a) > len(alone[0]) for a in alone)
    assert llm.generate(model, rows, 7, stop=stop) == alone
    steps = list(llm.stream_generate(model, rows, 7, stop=stop))
    assert [[t for t in col if t is not None] for col in zip(*steps)] == alone
    assert steps[-1][0] is None   # a finished row is padded with None
    # A 2-d tensor is a batch of equal-length prompts.
    eq = np.array([rows[0][:2], rows[1]])
    assert llm.generate(model, pf.tensor(eq), 4, stop=[]) == [llm.generate(model, r, 4, stop=[])
                                                             for r in eq.tolist()]


def test_batched_sampling_seeded(device, ckpt):
    path, cfg, _ = ckpt("gqa")
    model, _ = llm.load(path, device=device)
    rows = [[3, 5, 7], [9], [4, 4, 4, 4, 4]]
    kw = dict(temperature=1.0, top_k=10, top_p=0.95, stop=[])
    a = llm.generate(model, rows, 8, seed=7, **kw)
    assert [len(r) for r in a] == [8, 8, 8]
    assert llm.generate(model, rows, 8, seed=7, **kw) == a
    assert any(llm.generate(model, rows, 8, seed=s, **kw) != a for s in range(3))


def test_batch_errors(device, ckpt):
    path, cfg, _ = ckpt("llama2")
    model, _ = llm.load(path, device=device)
    with pytest.raises(ValueError, match=r"\[generate\] prompt 1 is empty"):
        llm.generate(model, [[1, 2], []], 3)
    with pytest.raises(ValueError, match=r"\[make_cache\] pad"):
        model.make_cache(2, 8, [1])
    with pytest.raises(ValueError, match=r"\[make_cache\] pad"):
        model.make_cache(2, 8, [0, 8])


# ------------------------------------------------------------------- sampling

def test_sampling_seeded_and_restricted(device, ckpt, rng):
    path, cfg, _ = ckpt("llama2")
    model, _ = llm.load(path, device=device)
    prompt = [3, 5, 7]
    kw = dict(temperature=1.0, top_k=8, top_p=0.9, stop=[])
    a = llm.generate(model, prompt, 12, seed=123, **kw)
    b = llm.generate(model, prompt, 12, seed=123, **kw)
    assert a == b
    assert any(llm.generate(model, prompt, 12, seed=s, temperature=1.5, stop=[]) != a for s in range(4))
    greedy = llm.generate(model, prompt, 6, stop=[])
    assert llm.generate(model, prompt, 6, temperature=0.7, top_k=1, seed=1, stop=[]) == greedy
    assert llm.generate(model, prompt, 6, temperature=0.7, top_p=1e-6, seed=1, stop=[]) == greedy
    # stop ends generation after yielding the stop token
    first = greedy[0]
    assert llm.generate(model, prompt, 6, stop=first) == [first]


@pytest.mark.parametrize("top_k,top_p", [(5, None), (None, 0.6), (12, 0.5)])
def test_sample_logits_respects_top_k_top_p(device, top_k, top_p, rng):
    V, N = 40, 3000
    row = rng.standard_normal(V) * 2
    logits = pf.tensor(np.tile(row, (N, 1)).astype(np.float32), device=device)
    got = llm.sample_logits(logits, 0.8, top_k, top_p).numpy()
    z = row / 0.8
    order = np.argsort(-z, kind="stable")
    keep = order[:top_k] if top_k else order
    p = np.exp(z[keep] - z[keep].max())
    p /= p.sum()
    if top_p:
        before = np.cumsum(p) - p
        keep, p = keep[before < top_p], p[before < top_p]
        p /= p.sum()
    assert set(got.tolist()) <= set(keep.tolist())
    freq = np.array([(got == k).mean() for k in keep])
    np.testing.assert_allclose(freq, p, atol=0.04)


def test_sample_logits_errors(device):
    x = pf.zeros(1, 5, device=device)
    with pytest.raises(ValueError, match="top_p"):
        llm.sample_logits(x, 1.0, top_p=1.5)
    with pytest.raises(ValueError, match="top_k"):
        llm.sample_logits(x, 1.0, top_k=0)
    with pytest.raises(ValueError, match="empty"):
        llm.generate(None, [], 3)


# ------------------------------------------------------------------- errors

def _err(path, match):
    with pytest.raises(ValueError, match=match) as info:
        llm.load(path)
    assert str(info.value).startswith("[llm.load]")


def test_bad_directories(tmp_path, ckpt):
    _err(str(tmp_path / "nope"), "is not a directory")
    _err(str(tmp_path), "no config.json")
    path, cfg, _ = ckpt("llama2")
    os.remove(os.path.join(path, "model.safetensors"))
    _err(path, "no model.safetensors")
    path, cfg, _ = ckpt("sharded")
    os.remove(os.path.join(path, "model-00002-of-00003.safetensors"))
    _err(path, "shard model-00002-of-00003.safetensors")


def test_bad_configs_and_weights(tmp_path, rng):
    def write(cfg, weights=None, **kw):
        path = str(tmp_path / f"m{len(os.listdir(tmp_path))}")
        write_checkpoint(path, cfg, weights if weights is not None else random_weights(cfg, rng), **kw)
        return path
    cfg = make_config("llama2")
    _err(write(dict(cfg, model_type="gpt2")), "model_type 'gpt2' is not supported")
    no_type = dict(cfg)
    del no_type["model_type"]
    _err(write(no_type, random_weights(cfg, rng)), "no model_type")
    no_vocab = dict(cfg)
    del no_vocab["vocab_size"]
    _err(write(no_vocab, random_weights(cfg, rng)), "lacks vocab_size")
    _err(write(dict(cfg, num_key_value_heads=3)), "multiple of num_key_value_heads")
    _err(write(dict(cfg, model_type="mistral", sliding_window=-2)), "sliding_window must be positive")
    _err(write(dict(cfg, rope_scaling={"rope_type": "yarn", "factor": 2.0})), "'yarn' is not supported")
    _err(write(dict(cfg, rope_scaling={"rope_type": "llama3", "factor": 2.0})), "lacks low_freq_factor")
    w = random_weights(cfg, rng)
    del w["model.layers.1.mlp.up_proj.weight"]
    _err(write(cfg, w), "lacks model.layers.1.mlp.up_proj.weight")
    w = random_weights(cfg, rng)
    w["model.norm.weight"] = np.ones(7)
    _err(write(cfg, w), r"model.norm.weight has shape \(7,\)")
    path = write(cfg)
    with open(os.path.join(path, "config.json"), "w") as f:
        f.write("{not json")
    _err(path, "not valid JSON")


# ------------------------------------------------------------------- tokenizer and CLI

def _write_tokenizer(path, vocab_size):
    tokenizers = pytest.importorskip("tokenizers")
    words = ["<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(vocab_size - 3)]
    model = tokenizers.models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>")
    tok = tokenizers.Tokenizer(model)
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.decoder = tokenizers.decoders.WordPiece()   # joins tokens with spaces
    tok.save(os.path.join(path, "tokenizer.json"))


def test_tokenizer_and_cli(ckpt):
    path, cfg, _ = ckpt("llama2")
    _write_tokenizer(path, cfg["vocab_size"])
    model, tok = llm.load(path)
    ids = tok.encode("w4 w9 w1").ids
    assert ids == [7, 12, 4]
    out = llm.generate(model, ids, 5, stop=[])
    expected = tok.decode(out)
    shown = []
    for flags in ([], ["--no-compile"]):  # compiled decode (default) and eager: the same text
        r = subprocess.run([sys.executable, "-m", "pyflame.llm", "--model", path, "--prompt", "w4 w9 w1",
                            "--max-tokens", "5", "--device", "cpu", *flags],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert expected.split()[0] in r.stdout
        assert "prefill" in r.stderr and "decode" in r.stderr and "tok/s" in r.stderr
        shown.append(r.stdout)
    assert shown[0] == shown[1]
    r = subprocess.run([sys.executable, "-m", "pyflame.llm", "--model", str(path) + "x", "--prompt", "a"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "is not a directory" in r.stderr


# ------------------------------------------------------------------- transformers

@pytest.mark.parametrize("variant", ["llama2", "llama3", "mistral", "mistral_swa", "qwen2", "tied"])
def test_against_transformers(device, ckpt, variant, rng):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    path, cfg, _ = ckpt(variant)
    hf = transformers.AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32).eval()
    model, _ = llm.load(path, device=device)
    ids = rng.integers(0, cfg["vocab_size"], size=(2, 10))
    with torch.no_grad():
        ref = hf(torch.from_numpy(ids)).logits.double().numpy()
    np.testing.assert_allclose(model(ids).numpy(), ref, rtol=2e-4, atol=2e-4)
    prompt = ids[0, :5]
    with torch.no_grad():
        g = hf.generate(torch.from_numpy(prompt[None]), max_new_tokens=8, do_sample=False,
                        eos_token_id=None, pad_token_id=0)
    assert llm.generate(model, prompt.tolist(), 8, stop=[]) == g[0, 5:].tolist()
