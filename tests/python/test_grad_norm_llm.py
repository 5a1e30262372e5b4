"""Gradients of the normalization and LLM ops (layer_norm, rms_norm,
group_norm, rope, scaled_dot_product_attention) against torch and finite
differences, on every device."""
import math

import numpy as np
import pytest

import pyflame as pf
from conftest import random_array
from gradcheck import check_finite_differences, check_vs_torch

torch = pytest.importorskip("torch")
F = torch.nn.functional


@pytest.mark.parametrize("shape,norm", [((4, 6), (6,)), ((2, 3, 8), (8,)), ((2, 3, 4), (3, 4))])
@pytest.mark.parametrize("affine", [(False, False), (True, False), (True, True)])
def test_layer_norm_grad(device, shape, norm, affine):
    arrays = [random_array(shape)]
    if affine[0]:
        arrays.append(random_array(norm))
    if affine[1]:
        arrays.append(random_array(norm))

    def f(x, *p):
        return pf.layer_norm(x, norm, *p, eps=1e-5)

    def tf(x, *p):
        return F.layer_norm(x, norm, *p, eps=1e-5)
    check_vs_torch(f, tf, arrays, device, rtol=1e-4, atol=1e-4)
    check_finite_differences(f, arrays, device)


@pytest.mark.parametrize("weighted", [False, True])
def test_rms_norm_grad(device, weighted):
    arrays = [random_array((3, 5, 8))] + ([random_array((8,))] if weighted else [])

    def f(x, *w):
        return pf.rms_norm(x, *w, eps=1e-6)

    def tf(x, *w):
        y = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6)
        return y * w[0] if w else y
    check_vs_torch(f, tf, arrays, device, rtol=1e-4, atol=1e-4)
    check_finite_differences(f, arrays, device)


@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((2, 4, 3, 3), 2), ((3, 8), 4)])
@pytest.mark.parametrize("affine", [False, True])
def test_group_norm_grad(device, shape, groups, affine):
    C = shape[1]
    arrays = [random_array(shape)] + ([random_array((C,)), random_array((C,))] if affine else [])

    def f(x, *p):
        return pf.group_norm(x, groups, *p, eps=1e-5)

    def tf(x, *p):
        return F.group_norm(x, groups, *p, eps=1e-5)
    check_vs_torch(f, tf, arrays, device, rtol=1e-4, atol=1e-4)
    check_finite_differences(f, arrays, device)


def torch_rope(x, pos, theta, interleaved):
    D = x.shape[-1]
    inv = theta ** (-torch.arange(0, D // 2, dtype=torch.float64) * 2 / D)
    ang = pos[..., None].double() * inv
    c, s = torch.cos(ang), torch.sin(ang)
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * c - b * s, a * s + b * c], -1).flatten(-2)
    a, b = x[..., :D // 2], x[..., D // 2:]
    return torch.cat([a * c - b * s, a * s + b * c], -1)


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("explicit_positions", [False, True])
def test_rope_grad(device, interleaved, explicit_positions):
    x = random_array((2, 3, 5, 8))
    offset = 3
    if explicit_positions:
        pos = np.random.randint(0, 50, size=(5,)).astype(np.int64)

        def f(t):
            return pf.rope(t, pf.tensor(pos, device=device), offset=offset, interleaved=interleaved)
        tpos = torch.tensor(pos) + offset
    else:
        def f(t):
            return pf.rope(t, offset=offset, interleaved=interleaved)
        tpos = torch.arange(5) + offset
    check_vs_torch(f, lambda t: torch_rope(t, tpos, 10000.0, interleaved), [x], device,
                   rtol=1e-4, atol=1e-4)
    check_finite_differences(f, [x], device)


def torch_attention(q, k, v, causal, scale, offset=0, mask=None):
    H, Hkv = q.shape[-3], k.shape[-3]
    k = k.repeat_interleave(H // Hkv, dim=-3)
    v = v.repeat_interleave(H // Hkv, dim=-3)
    s = q @ k.transpose(-1, -2) * scale
    if causal:
        Sq, Sk = s.shape[-2:]
        keep = torch.arange(Sq)[:, None] + offset >= torch.arange(Sk)[None, :]
        s = s.masked_fill(~keep, float("-inf"))
    if mask is not None:
        s = s + mask
    return torch.softmax(s, -1) @ v


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shapes", [
    ((2, 4, 5, 8), (2, 4, 5, 8)),      # self-attention
    ((1, 4, 1, 16), (1, 2, 7, 16)),    # decode step, grouped-query heads
    ((2, 6, 20, 8), (2, 3, 20, 8)),    # longer: the GPU composes it from matmul+softmax
])
def test_attention_grad(device, causal, shapes):
    qs, ks = shapes
    q, k, v = random_array(qs), random_array(ks), random_array(ks)
    scale = 1 / math.sqrt(qs[-1])

    def f(a, b, c):
        return pf.scaled_dot_product_attention(a, b, c, causal=causal)
    check_vs_torch(f, lambda a, b, c: torch_attention(a, b, c, causal, scale),
                   [q, k, v], device, rtol=1e-4, atol=1e-4)
    check_finite_differences(f, [q, k, v], device, samples=6)


def test_attention_grad_with_mask_and_cache(device):
    q, k, v = (random_array((1, 2, 3, 8)) for _ in range(3))
    kc, vc = random_array((1, 2, 4, 8)), random_array((1, 2, 4, 8))
    mask = random_array((3, 7))

    def f(a, b, c, d, e):
        out, _, _ = pf.scaled_dot_product_attention(a, b, c, k_cache=d, v_cache=e, causal=True,
                                                   attn_mask=pf.tensor(mask.astype(np.float32),
                                                                       device=device))
        return out

    def tf(a, b, c, d, e):
        return torch_attention(a, torch.cat([d, b], -2), torch.cat([e, c], -2), True,
                               1 / math.sqrt(8), 4, torch.tensor(mask))
    check_vs_torch(f, tf, [q, k, v, kc, vc], device, rtol=1e-4, atol=1e-4)


def test_norm_grads_in_half_precision(device):
    x = random_array((4, 16))
    w = random_array((16,))
    for dt, tol in (("float16", 3e-2), ("bfloat16", 1e-1)):
        check_vs_torch(lambda a, b: pf.layer_norm(a, (16,), b), lambda a, b: F.layer_norm(a, (16,), b),
                       [x, w], device, rtol=tol, atol=tol, dtype=dt)
        check_vs_torch(lambda a, b: pf.rms_norm(a, b),
                       lambda a, b: a * torch.rsqrt((a * a).mean(-1, keepdim=True) + 1e-6) * b,
                       [x, w], device, rtol=tol, atol=tol, dtype=dt)
