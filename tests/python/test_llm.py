"""LLM ops (rope, scaled_dot_product_attention with KV caches and grouped
heads, batch-1 matmul / GEMV) against float64 NumPy references, and PyTorch
where it has the op."""
import numpy as np
import pytest

import pyflame as pf
from conftest import FLOAT_DTYPES, assert_close, make_tensor, random_array, rounded

try:
    import torch
except ImportError:  # the NumPy references cover everything
    torch = None

TOL = {"float32": (1e-4, 1e-5), "float16": (5e-3, 5e-3), "bfloat16": (3e-2, 3e-2)}


def _raises(exc, fn, call, *args, **kwargs):
    with pytest.raises(exc) as info:
        out = call(*args, **kwargs)
        if isinstance(out, pf.Tensor):
            out.numpy()
    msg = str(info.value)
    assert msg.startswith(f"[{fn}]"), msg
    return msg


# ---------------------------------------------------------------- rope

def rope_ref(x, pos, theta=10000.0, interleaved=False):
    """Rotary embedding in float64; pos broadcastable to x.shape[:-1]."""
    x = np.asarray(x, np.float64)
    D = x.shape[-1]
    inv = theta ** (-(2.0 * np.arange(D // 2)) / D)
    ang = np.asarray(pos, np.float64)[..., None] * inv
    c, s = np.cos(ang), np.sin(ang)
    out = np.empty(np.broadcast_shapes(x.shape, c.shape[:-1] + (D,)))
    if interleaved:
        x1, x2 = x[..., 0::2], x[..., 1::2]
        out[..., 0::2] = x1 * c - x2 * s
        out[..., 1::2] = x2 * c + x1 * s
    else:
        x1, x2 = x[..., :D // 2], x[..., D // 2:]
        out[..., :D // 2] = x1 * c - x2 * s
        out[..., D // 2:] = x2 * c + x1 * s
    return out


def _rope_tol(dtype, max_pos):
    r, a = TOL[dtype]
    # float32 angles: pos * inv_freq carries ~1e-7 relative error.
    return r, a + 3e-7 * max_pos * 3.0


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("offset", [0, 5, 700])
def test_rope_layouts_and_offsets(device, interleaved, offset):
    B, H, S, D = 2, 3, 7, 16
    x = random_array((B, H, S, D), "float32")
    want = rope_ref(x, np.arange(S) + offset, 10000.0, interleaved)
    r, a = _rope_tol("float32", S + offset)
    out = pf.rope(make_tensor(x), offset=offset, interleaved=interleaved)
    assert_close(out, want, "float32", rtol=r, atol=a, device=device)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_positions_and_theta(device, interleaved):
    B, H, S, D = 2, 2, 5, 8
    x = random_array((B, H, S, D), "float32")
    pos = np.random.randint(0, 50, size=(B, 1, S))  # per-batch positions
    want = rope_ref(x, pos + 3, 500.0, interleaved)
    r, a = _rope_tol("float32", 60)
    out = pf.rope(make_tensor(x), positions=make_tensor(pos), offset=3, theta=500.0,
                  interleaved=interleaved)
    assert_close(out, want, "float32", rtol=r, atol=a)
    pos1 = np.array([4, 0, 9, 9, 1])
    assert_close(pf.rope(make_tensor(x), positions=pos1.tolist(), interleaved=interleaved),
                 rope_ref(x, pos1, 10000.0, interleaved), "float32", rtol=r, atol=a)
    posf = np.array([0.5, 1.5, 2.0, 3.25, 7.0], np.float32)
    assert_close(pf.rope(make_tensor(x), positions=make_tensor(posf), interleaved=interleaved),
                 rope_ref(x, posf, 10000.0, interleaved), "float32", rtol=r, atol=a)
    # 1-d x with explicit positions: one vector at one position
    v = random_array((D,), "float32")
    assert_close(pf.rope(make_tensor(v), positions=pf.tensor(np.int64(6)), interleaved=interleaved),
                 rope_ref(v, 6, 10000.0, interleaved), "float32", rtol=r, atol=a)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_dtypes_and_non_contiguous(device, dtype, interleaved):
    B, S, H, D = 2, 6, 4, 32
    x = random_array((B, S, H, D), dtype)
    t = make_tensor(x, dtype).transpose(0, 2, 1, 3)  # (B, H, S, D) view, as from a projection
    want = rope_ref(x.transpose(0, 2, 1, 3), np.arange(S) + 2, 10000.0, interleaved)
    r, a = _rope_tol(dtype, S + 2)
    assert_close(pf.rope(t, offset=2, interleaved=interleaved), want, dtype, rtol=r, atol=a)


def test_rope_matches_hf_rotate_half(device):
    if torch is None:
        pytest.skip("torch not importable")
    B, H, S, D = 1, 2, 9, 64
    x = random_array((B, H, S, D), "float32")
    xt = torch.tensor(x, dtype=torch.float32)
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, D, 2).float() / D))
    freqs = torch.outer(torch.arange(S).float() + 4, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)

    def rotate_half(y):
        return torch.cat((-y[..., D // 2:], y[..., :D // 2]), dim=-1)

    want = (xt * emb.cos() + rotate_half(xt) * emb.sin()).numpy()
    assert_close(pf.rope(make_tensor(x), offset=4), want, "float32", rtol=1e-5, atol=2e-5)
    # GPT-J: rotate_every_two with interleaved sin/cos
    sin, cos = torch.repeat_interleave(freqs.sin(), 2, -1), torch.repeat_interleave(freqs.cos(), 2, -1)
    rot = torch.stack((-xt[..., 1::2], xt[..., ::2]), dim=-1).flatten(-2)
    want_j = (xt * cos + rot * sin).numpy()
    assert_close(pf.rope(make_tensor(x), offset=4, interleaved=True), want_j, "float32", rtol=1e-5,
                 atol=2e-5)


def test_rope_frequency_tables(device):
    # Each (head_dim, theta, inv_freq) has its own table (on a GPU uploaded
    # once and kept): tables of the same head_dim stay apart, calls after the
    # first read the kept one.
    x = random_array((2, 3, 5, 8), "float32")
    pos = np.arange(5) + 3
    inv_a = [1.0, 0.5, 0.25, 0.125]
    inv_b = [0.9, 0.3, 0.01, 0.001]
    cases = [(dict(), 10000.0 ** (-np.arange(0, 8, 2) / 8)),
             (dict(theta=500000.0), 500000.0 ** (-np.arange(0, 8, 2) / 8)),
             (dict(inv_freq=inv_a), np.array(inv_a)), (dict(inv_freq=inv_b), np.array(inv_b))]
    for _ in range(2):
        for kw, inv in cases:
            ang = pos[:, None] * np.asarray(inv, np.float64)[None, :]
            c, s_ = np.cos(ang), np.sin(ang)
            want = np.concatenate([x[..., :4] * c - x[..., 4:] * s_, x[..., 4:] * c + x[..., :4] * s_], -1)
            assert_close(pf.rope(make_tensor(x), offset=3, **kw), want, "float32", rtol=1e-5, atol=1e-5)


def test_rope_properties(device):
    x = random_array((3, 4, 10), "float32")
    out = pf.rope(make_tensor(x)).numpy()
    np.testing.assert_allclose(out[:, 0], x[:, 0], rtol=1e-6)  # position 0: identity
    # rotations keep each pair's norm
    n_in = x[..., :5] ** 2 + x[..., 5:] ** 2
    n_out = out[..., :5].astype(np.float64) ** 2 + out[..., 5:] ** 2
    np.testing.assert_allclose(n_out, n_in, rtol=1e-5, atol=1e-5)
    assert_close(pf.rope(pf.zeros((2, 3, 0))), np.zeros((2, 3, 0)), "float32")


def test_rope_errors(device):
    x = pf.zeros((2, 3, 4))
    _raises(ValueError, "rope", pf.rope, pf.zeros((2, 3, 5)))
    _raises(ValueError, "rope", pf.rope, pf.zeros((2, 3, 4), dtype="int32"))
    _raises(ValueError, "rope", pf.rope, pf.zeros((4,)))
    _raises(ValueError, "rope", pf.rope, x, positions=pf.zeros((4,)))
    _raises(ValueError, "rope", pf.rope, x, positions=pf.zeros((3, 3, 3)))
    _raises(ValueError, "rope", pf.rope, x, positions=pf.zeros((3,), dtype="bool"))
    _raises(ValueError, "rope", pf.rope, x, theta=0.0)
    _raises(ValueError, "rope", pf.rope, x, theta=float("inf"))


# ---------------------------------------------------------------- attention

def sdpa_ref(q, k, v, causal=False, scale=None, offset=0, mask=None, drop=None):
    """Attention in float64 with explicit softmax; k/v heads repeated per group.
    mask: bool (True = attend) or additive; drop: weights multiplier after softmax."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    G = q.shape[-3] // k.shape[-3]
    k, v = np.repeat(k, G, axis=-3), np.repeat(v, G, axis=-3)
    Sq, Sk, D = q.shape[-2], k.shape[-2], q.shape[-1]
    if Sk == 0:
        return np.zeros(q.shape[:-1] + (v.shape[-1],))
    s = q @ np.swapaxes(k, -1, -2) * (1.0 / np.sqrt(D) if scale is None else scale)
    if causal:
        cm = np.arange(Sk)[None, :] <= np.arange(Sq)[:, None] + offset
        s = np.where(cm, s, -np.inf)
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(-1, keepdims=True)
    if drop is not None:
        p = p * drop
    return p @ v


ATTN_SHAPES = [  # B, H, Hkv, Sq, Sk, D, Dv
    (2, 4, 4, 5, 7, 16, 16),
    (1, 8, 2, 1, 300, 64, 64),     # decode step, grouped heads
    (2, 4, 1, 40, 40, 32, 24),     # prefill, one kv head, Dv != D
    (1, 6, 3, 17, 33, 128, 128),
    (1, 2, 1, 3, 9, 520, 8),       # head dim beyond the fused GPU kernel
    (1, 2, 2, 9, 4, 8, 8),         # more queries than keys
    (1, 2, 2, 8, 400, 32, 32),     # few rows, many keys (split over key chunks on the GPU)
]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", ATTN_SHAPES, ids=str)
def test_sdpa(device, shape, causal):
    B, H, Hkv, Sq, Sk, D, Dv = shape
    q = random_array((B, H, Sq, D), "float32", -1, 1)
    k = random_array((B, Hkv, Sk, D), "float32", -1, 1)
    v = random_array((B, Hkv, Sk, Dv), "float32", -1, 1)
    want = sdpa_ref(q, k, v, causal)
    out = pf.scaled_dot_product_attention(make_tensor(q), make_tensor(k), make_tensor(v), causal=causal)
    assert_close(out, want, "float32", rtol=1e-4, atol=1e-5, device=device)


def test_sdpa_matches_torch(device):
    if torch is None or not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        pytest.skip("torch.nn.functional.scaled_dot_product_attention not available")
    F = torch.nn.functional
    for (B, H, Hkv, Sq, Sk, D, Dv), causal in [((2, 4, 2, 6, 6, 32, 32), True),
                                              ((1, 4, 4, 3, 11, 16, 8), False),
                                              ((1, 4, 1, 24, 24, 64, 64), True)]:
        q = random_array((B, H, Sq, D), "float32", -1, 1)
        k = random_array((B, Hkv, Sk, D), "float32", -1, 1)
        v = random_array((B, Hkv, Sk, Dv), "float32", -1, 1)
        G = H // Hkv
        tq, tk, tv = (torch.tensor(a, dtype=torch.float32) for a in (q, k, v))
        want = F.scaled_dot_product_attention(tq, tk.repeat_interleave(G, 1), tv.repeat_interleave(G, 1),
                                              is_causal=causal).numpy()
        out = pf.scaled_dot_product_attention(make_tensor(q), make_tensor(k), make_tensor(v), causal=causal)
        assert_close(out, want, "float32", rtol=1e-4, atol=1e-5)


def test_sdpa_scale_3d_and_non_contiguous(device):
    B, S, H, D = 2, 6, 4, 16
    q = random_array((B, S, H, D), "float32", -1, 1)
    k = random_array((B, S, H, D), "float32", -1, 1)
    v = random_array((B, S, H, D), "float32", -1, 1)
    tq, tk, tv = (make_tensor(a).transpose(0, 2, 1, 3) for a in (q, k, v))
    nq, nk, nv = (a.transpose(0, 2, 1, 3) for a in (q, k, v))
    for causal in (False, True):
        assert_close(pf.scaled_dot_product_attention(tq, tk, tv, causal=causal, scale=0.3),
                     sdpa_ref(nq, nk, nv, causal, 0.3), "float32", rtol=1e-4, atol=1e-5)
    # 3-d (H, S, D) inputs; k given transposed in memory
    q3, k3, v3 = nq[0], nk[0], nv[0]
    tk3 = make_tensor(np.ascontiguousarray(np.swapaxes(k3, -1, -2))).transpose(0, 2, 1)
    assert_close(pf.scaled_dot_product_attention(make_tensor(q3), tk3, make_tensor(v3), causal=True),
                 sdpa_ref(q3, k3, v3, True), "float32", rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("Sq", [1, 4, 24])
def test_sdpa_dtypes(device, dtype, Sq):
    B, H, Hkv, Sk, D = 2, 4, 2, 24, 64
    q = random_array((B, H, Sq, D), dtype, -1, 1)
    k = random_array((B, Hkv, Sk, D), dtype, -1, 1)
    v = random_array((B, Hkv, Sk, D), dtype, -1, 1)
    r, a = TOL[dtype]
    out = pf.scaled_dot_product_attention(make_tensor(q, dtype), make_tensor(k, dtype), make_tensor(v, dtype),
                                          causal=True)
    assert_close(out, sdpa_ref(q, k, v, True, offset=0), dtype, rtol=r, atol=a)
    # mixed dtypes promote
    out = pf.scaled_dot_product_attention(make_tensor(q, dtype), make_tensor(k, "float32"),
                                          make_tensor(v, "float32"))
    assert_close(out, sdpa_ref(q, k, v), "float32", rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("Hkv,S0", [(4, 5), (2, 5), (1, 5), (2, 200)])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_sdpa_kv_cache_decode(device, Hkv, S0, dtype):
    """Prefill then token-by-token decode with caches equals full causal attention."""
    B, H, D, steps = 2, 4, 32, 4
    S = S0 + steps
    q = random_array((B, H, S, D), dtype, -1, 1)
    k = random_array((B, Hkv, S, D), dtype, -1, 1)
    v = random_array((B, Hkv, S, D), dtype, -1, 1)
    full = sdpa_ref(q, k, v, causal=True)
    r, a = TOL[dtype]
    tq, tk, tv = (make_tensor(x, dtype) for x in (q, k, v))
    kc = pf.zeros((B, Hkv, 0, D), dtype=dtype)
    vc = pf.zeros((B, Hkv, 0, D), dtype=dtype)
    out, kc, vc = pf.scaled_dot_product_attention(tq[:, :, :S0], tk[:, :, :S0], tv[:, :, :S0], causal=True,
                                                  k_cache=kc, v_cache=vc)
    assert_close(out, full[:, :, :S0], dtype, rtol=r, atol=a, device=device)
    for t in range(S0, S):
        sl = slice(t, t + 1)
        out, kc, vc = pf.scaled_dot_product_attention(tq[:, :, sl], tk[:, :, sl], tv[:, :, sl], causal=True,
                                                      k_cache=kc, v_cache=vc)
        assert tuple(kc.shape) == (B, Hkv, t + 1, D) and tuple(vc.shape) == (B, Hkv, t + 1, D)
        assert_close(out, full[:, :, sl], dtype, rtol=r, atol=a)
    assert_close(kc, k, dtype)
    assert_close(vc, v, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("D,Hkv", [(128, 16), (128, 4), (64, 2), (96, 3)])
@pytest.mark.parametrize("L,pos", [(300, 256), (1100, 1000)])  # the GPU merges 10, 35 chunks
def test_sdpa_decode_over_fixed_cache(device, dtype, D, Hkv, L, pos):
    """One query row per head over a fixed-capacity cache with a tensor
    causal_offset (the compiled decode step's form; on the GPU the split
    lane-group kernel), also through misaligned views of the cache."""
    B, H = 1, 16 if Hkv != 3 else 6
    q = random_array((B, H, 1, D), dtype, -1, 1)
    k = random_array((B, Hkv, L + 1, D), dtype, -1, 1)
    v = random_array((B, Hkv, L + 1, D), dtype, -1, 1)
    want = sdpa_ref(q, k[:, :, :L], v[:, :, :L], causal=True, offset=pos)
    r, a = TOL[dtype]
    tq, tk, tv = (make_tensor(x, dtype) for x in (q, k, v))
    off = pf.tensor(pos, dtype=pf.int64)
    out = pf.scaled_dot_product_attention(tq, tk[:, :, :L], tv[:, :, :L], causal=True, causal_offset=off)
    assert_close(out, want, dtype, rtol=r, atol=a, device=device)
    # Rows padded by one element: strides no longer 16-byte multiples.
    kp = random_array((B, Hkv, L, D + 1), dtype, -1, 1)
    want = sdpa_ref(q, kp[..., :D], v[:, :, :L], causal=True, offset=pos)
    out = pf.scaled_dot_product_attention(tq, make_tensor(kp, dtype)[..., :D], tv[:, :, :L], causal=True,
                                          causal_offset=off)
    assert_close(out, want, dtype, rtol=r, atol=a, device=device)


@pytest.mark.parametrize("C", [3, 20])
def test_sdpa_cache_chunk_offset(device, C):
    """A chunk of several new queries after a cache: query i sees past + keys <= i."""
    B, H, D, P = 1, 2, 16, 6
    q = random_array((B, H, C, D), "float32", -1, 1)
    kp, vp = random_array((B, H, P, D), "float32"), random_array((B, H, P, D), "float32")
    kn, vn = random_array((B, H, C, D), "float32"), random_array((B, H, C, D), "float32")
    kk, vv = np.concatenate([kp, kn], 2), np.concatenate([vp, vn], 2)
    for causal in (False, True):
        out, kc, vc = pf.scaled_dot_product_attention(
            make_tensor(q), make_tensor(kn), make_tensor(vn), causal=causal,
            k_cache=make_tensor(kp), v_cache=make_tensor(vp))
        assert_close(out, sdpa_ref(q, kk, vv, causal, offset=P), "float32", rtol=1e-4, atol=1e-5)
        assert_close(kc, kk, "float32")
        assert_close(vc, vv, "float32")


@pytest.mark.parametrize("kind", ["bool", "float"])
@pytest.mark.parametrize("mshape", [(1, 1, 1, 12), (2, 1, 5, 12), (2, 4, 5, 12), (5, 12)], ids=str)
def test_sdpa_attn_mask(device, kind, mshape):
    B, H, Hkv, Sq, Sk, D = 2, 4, 2, 5, 12, 16
    q = random_array((B, H, Sq, D), "float32", -1, 1)
    k = random_array((B, Hkv, Sk, D), "float32", -1, 1)
    v = random_array((B, Hkv, Sk, D), "float32", -1, 1)
    if kind == "bool":
        mask = np.random.rand(*mshape) < 0.7
        mask[..., 0] = True  # every row keeps a key
    else:
        mask = random_array(mshape, "float32", -2, 2)
    for causal in (False, True):
        out = pf.scaled_dot_product_attention(make_tensor(q), make_tensor(k), make_tensor(v), causal=causal,
                                              attn_mask=make_tensor(mask))
        assert_close(out, sdpa_ref(q, k, v, causal, mask=mask), "float32", rtol=1e-4, atol=1e-5, device=device)
    if torch is not None and hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        tq, tk, tv = (torch.tensor(a, dtype=torch.float32) for a in (q, k, v))
        want = torch.nn.functional.scaled_dot_product_attention(
            tq, tk.repeat_interleave(2, 1), tv.repeat_interleave(2, 1),
            attn_mask=torch.tensor(mask if kind == "bool" else mask.astype(np.float32))).numpy()
        assert_close(pf.scaled_dot_product_attention(make_tensor(q), make_tensor(k), make_tensor(v),
                                                     attn_mask=make_tensor(mask)), want, "float32",
                     rtol=1e-4, atol=1e-5)


def test_sdpa_mask_3d_cache_and_half(device):
    H, Sq, P, D = 2, 3, 4, 8
    q = random_array((H, Sq, D), "float16", -1, 1)
    kp, kn = random_array((H, P, D), "float16"), random_array((H, Sq, D), "float16")
    vp, vn = random_array((H, P, D), "float16"), random_array((H, Sq, D), "float16")
    mask = random_array((Sq, P + Sq), "float32", -1, 1)
    out, kc, vc = pf.scaled_dot_product_attention(
        make_tensor(q, "float16"), make_tensor(kn, "float16"), make_tensor(vn, "float16"), is_causal=True,
        k_cache=make_tensor(kp, "float16"), v_cache=make_tensor(vp, "float16"), attn_mask=make_tensor(mask))
    want = sdpa_ref(q, np.concatenate([kp, kn], 1), np.concatenate([vp, vn], 1), True, offset=P,
                    mask=rounded(mask, "float16"))
    assert_close(out, want, "float16", rtol=5e-3, atol=5e-3)


def test_sdpa_dropout(device):
    B, H, Hkv, Sq, Sk, D, p = 1, 4, 2, 3, 10, 8, 0.25
    q = random_array((B, H, Sq, D), "float32", -1, 1)
    k = random_array((B, Hkv, Sk, D), "float32", -1, 1)
    v = random_array((B, Hkv, Sk, D), "float32", -1, 1)
    pf.manual_seed(5)
    out = pf.scaled_dot_product_attention(make_tensor(q), make_tensor(k), make_tensor(v), dropout_p=p)
    # The weights (B, Hkv, H // Hkv, Sq, Sk) are dropped as pf.dropout drops them.
    pf.manual_seed(5)
    u = pf.rand(B, Hkv, H // Hkv, Sq, Sk).numpy().astype(np.float64).reshape(B, H, Sq, Sk)
    drop = np.where(u >= p, 1.0 / (1.0 - p), 0.0)
    assert_close(out, sdpa_ref(q, k, v, drop=drop), "float32", rtol=1e-4, atol=1e-5, device=device)
    same = pf.scaled_dot_product_attention(make_tensor(q), make_tensor(k), make_tensor(v), dropout_p=0.0)
    assert_close(same, sdpa_ref(q, k, v), "float32", rtol=1e-4, atol=1e-5)


def test_sdpa_empty_keys(device):
    q = pf.ones((1, 2, 3, 4))
    e = pf.zeros((1, 2, 0, 4))
    assert_close(pf.scaled_dot_product_attention(q, e, e), np.zeros((1, 2, 3, 4)), "float32")
    assert_close(pf.scaled_dot_product_attention(pf.zeros((1, 2, 0, 4)), q, q), np.zeros((1, 2, 0, 4)),
                 "float32")


def test_sdpa_errors(device):
    fn = "scaled_dot_product_attention"
    sdpa = pf.scaled_dot_product_attention
    q, k = pf.zeros((1, 4, 3, 8)), pf.zeros((1, 4, 5, 8))
    _raises(ValueError, fn, sdpa, pf.zeros((4, 8)), pf.zeros((4, 8)), pf.zeros((4, 8)))
    _raises(ValueError, fn, sdpa, q, pf.zeros((4, 5, 8)), pf.zeros((4, 5, 8)))
    _raises(ValueError, fn, sdpa, q, pf.zeros((1, 3, 5, 8)), pf.zeros((1, 3, 5, 8)))  # 4 % 3
    _raises(ValueError, fn, sdpa, q, pf.zeros((1, 4, 5, 7)), pf.zeros((1, 4, 5, 8)))
    _raises(ValueError, fn, sdpa, q, k, pf.zeros((1, 4, 6, 8)))
    _raises(ValueError, fn, sdpa, q, k, pf.zeros((2, 4, 5, 8)))
    _raises(ValueError, fn, sdpa, q.astype("int32"), k.astype("int32"), k.astype("int32"))
    _raises(ValueError, fn, sdpa, q, k, k, scale=float("inf"))
    _raises(ValueError, fn, sdpa, q, k, k, k_cache=k)
    _raises(ValueError, fn, sdpa, q, k, k, v_cache=k)
    _raises(ValueError, fn, sdpa, q, k, k, k_cache=pf.zeros((1, 2, 5, 8)), v_cache=k)
    _raises(ValueError, fn, sdpa, q, k, k, k_cache=k, v_cache=pf.zeros((1, 4, 2, 8)))
    _raises(ValueError, fn, sdpa, q, k, k, attn_mask=pf.zeros((3, 4)))
    _raises(ValueError, fn, sdpa, q, k, k, attn_mask=pf.zeros((2, 4, 3, 5)))
    _raises(ValueError, fn, sdpa, q, k, k, attn_mask=pf.zeros((3, 5), dtype="int32"))
    _raises(ValueError, fn, sdpa, q, k, k, dropout_p=1.0)
    _raises(ValueError, fn, sdpa, q, k, k, dropout_p=-0.5)
    out = sdpa(q, k, k)  # still usable
    assert_close(out, np.zeros((1, 4, 3, 8)), "float32")


# ---------------------------------------------------------------- GEMV (batch-1 matmul)

GEMV_CASES = ["vec_mat", "row_mat", "row_matT", "mat_vec", "matT_vec", "batch1", "strided_vec",
              "offset_view", "dot"]


@pytest.mark.parametrize("K", [1, 7, 1000, 1024, 3000])
@pytest.mark.parametrize("case", GEMV_CASES)
def test_gemv_layouts(device, case, K):
    N = 300
    x = random_array((K,), "float32", -1, 1)
    W = random_array((K, N), "float32", -1, 1)
    tx, tW = make_tensor(x), make_tensor(W)
    if case == "vec_mat":
        got, want = pf.matmul(tx, tW), x @ W
    elif case == "row_mat":
        got, want = pf.matmul(tx.reshape(1, K), tW), x[None] @ W
    elif case == "row_matT":  # x @ weight.T with weight (N, K): the Linear layout
        got, want = pf.matmul(tx.reshape(1, K), make_tensor(W.T.copy()).T), x[None] @ W
    elif case == "mat_vec":
        got, want = pf.matmul(make_tensor(W.T.copy()), tx), W.T @ x
    elif case == "matT_vec":
        got, want = pf.matmul(tW.T, tx), W.T @ x
    elif case == "batch1":
        got, want = pf.matmul(tx.reshape(1, 1, K), tW), (x[None] @ W)[None]
    elif case == "strided_vec":
        x2 = random_array((2 * K,), "float32", -1, 1)
        got, want = pf.matmul(make_tensor(x2)[::2], tW), x2[::2] @ W
    elif case == "offset_view":
        Wb = random_array((K, N + 1), "float32", -1, 1)
        got = pf.matmul(tx.reshape(1, K), make_tensor(Wb.T.copy())[1:].T)
        want = x[None] @ Wb[:, 1:]
    else:
        got, want = pf.matmul(tx, tx), np.dot(x, x)
    assert_close(got, want, "float32", rtol=1e-4, atol=1e-4, device=device)


@pytest.mark.parametrize("K,N", [(520, 96), (4104, 40), (3000, 2500)])  # split over waves, tails, many rows
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_gemv_dtypes(device, dtype, K, N):
    x = random_array((K,), dtype, -1, 1)
    W = random_array((N, K), dtype, -1, 1)
    tol = {"float32": 1e-4, "float16": 2e-2, "bfloat16": 1e-1}[dtype]
    tW = make_tensor(W, dtype)
    assert_close(pf.matmul(make_tensor(x, dtype).reshape(1, K), tW.T), (x @ W.T)[None], dtype,
                 rtol=tol, atol=tol)
    assert_close(pf.matmul(tW, make_tensor(x, dtype)), W @ x, dtype, rtol=tol, atol=tol)
    assert_close(pf.matmul(make_tensor(x[:N], dtype), tW), x[:N] @ W, dtype, rtol=tol, atol=tol)
