"""A decode step's projections folded into one GPU kernel (FusedGemv): the
rms_norm before a one-row product and the residual add after it.
Values against the unfused kernels (fusion off: the same bits) and a float64
NumPy reference; layouts the fused kernel does not take run unfused."""
import numpy as np
import pytest

import pyflame as pf
from pyflame import _core as C

DTYPES = [pf.float32, pf.float16, pf.bfloat16]
TOL = {pf.float32: 2e-4, pf.float16: 2e-2, pf.bfloat16: 8e-2}


def _f64(t):
    return np.asarray(t.astype(pf.float32).numpy(), dtype=np.float64)


def _rand(shape, dtype, device, scale=1.0):
    return pf.tensor((np.random.randn(*shape) * scale).astype(np.float32), device=device).astype(dtype)


def _both(build):
    """build() evaluated with fusion on (and its plan), then off."""
    pf.set_fusion(True, gpu=True)
    y = build()
    plan = pf.explain(y)
    on = y.astype(pf.float32).numpy()
    pf.set_fusion(False)
    off = build().astype(pf.float32).numpy()
    pf.set_fusion(True, gpu=True)
    return on, off, plan


def _rms64(h, g, eps):
    return h / np.sqrt((h * h).mean(-1, keepdims=True) + eps) * g


@pytest.mark.parametrize("dtype", DTYPES)
# Rows of every wave count per output (4, 2, 1 on a GPU of ~130 units) and
# rows longer than a block holds before its weights (5120).
@pytest.mark.parametrize("K,N", [(256, 48), (2048, 300), (2048, 1000), (5120, 3000)])
@pytest.mark.parametrize("residual", [False, True])
def test_rms_norm_prologue(device, fusion, dtype, K, N, residual):
    h, W, r = _rand((1, K), dtype, device), _rand((N, K), dtype, device, 0.05), _rand((1, N), dtype, device)
    g = _rand((K,), pf.float32, device) + 1.0

    def build():
        y = C.matmul(C.rms_norm(h, g, 1e-5), W.T)
        return r + y if residual else y

    on, off, plan = _both(build)
    assert ("fused_gemv" in plan) == (device != "cpu"), plan
    np.testing.assert_array_equal(on, off)
    ref = _rms64(_f64(h), _f64(g), 1e-5) @ _f64(W).T + (_f64(r) if residual else 0)
    np.testing.assert_allclose(on, ref, rtol=TOL[dtype], atol=TOL[dtype] * np.abs(ref).max())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("residual", [False, True])
def test_silu_gate_then_product(device, fusion, dtype, residual):
    """The gate stays an elementwise region; the residual add folds."""
    K, N = 704, 384
    u, W, r = _rand((1, 2 * K), dtype, device), _rand((N, K), dtype, device, 0.05), _rand((1, N), dtype, device)

    def build():
        y = C.matmul(C.silu(u[:, :K]) * u[:, K:], W.T)
        return y + r if residual else y

    on, off, plan = _both(build)
    assert ("fused_gemv" in plan) == (device != "cpu" and residual), plan
    np.testing.assert_array_equal(on, off)
    a, b = _f64(u)[:, :K], _f64(u)[:, K:]
    ref = (a / (1 + np.exp(-a)) * b) @ _f64(W).T + (_f64(r) if residual else 0)
    np.testing.assert_allclose(on, ref, rtol=TOL[dtype], atol=TOL[dtype] * np.abs(ref).max())


@pytest.mark.parametrize("dtype", DTYPES)
def test_residual_epilogue(device, fusion, dtype):
    K, N = 512, 520
    x, W, r = _rand((1, K), dtype, device), _rand((N, K), dtype, device, 0.05), _rand((1, N), dtype, device)
    on, off, plan = _both(lambda: r + C.matmul(x * 2.0, W.T))
    np.testing.assert_array_equal(on, off)
    ref = 2 * _f64(x) @ _f64(W).T + _f64(r)
    np.testing.assert_allclose(on, ref, rtol=TOL[dtype], atol=TOL[dtype] * np.abs(ref).max())


@pytest.mark.parametrize("layout", ["unaligned_row", "row_major_weight", "strided_residual"])
def test_layouts_the_kernel_does_not_take(device, fusion, layout):
    """Folded, but evaluated through the unfused kernels: same values."""
    K, N, dt = 256, 96, pf.float16
    base, W = _rand((1, K + 8), dt, device), _rand((N, K), dt, device, 0.05)
    g = _rand((K,), pf.float32, device) + 1.0
    wide = _rand((1, 2 * N), dt, device)
    h = base[:, 1:K + 1] if layout == "unaligned_row" else base[:, :K]
    # (K, N) with unit stride along K (a transposed weight), or row-major.
    w = pf.tensor(np.ascontiguousarray(W.numpy().T), device=device) if layout == "row_major_weight" else W.T
    r = wide[:, ::2] if layout == "strided_residual" else wide[:, :N]
    on, off, _ = _both(lambda: r + C.matmul(C.rms_norm(h, g, 1e-6), w))
    np.testing.assert_array_equal(on, off)


def test_no_fold_with_gradient_or_batch(device, fusion):
    K, N = 128, 64
    h = pf.tensor(np.random.randn(1, K).astype(np.float32), device=device, requires_grad=True)
    W, g = _rand((N, K), pf.float32, device), pf.ones(K, device=device)
    y = C.matmul(C.rms_norm(h, g, 1e-6), W.T)
    assert "fused_gemv" not in pf.explain(y)
    y.sum().backward()
    assert h.grad is not None and h.grad.shape == (1, K)
    rows = _rand((3, K), pf.float32, device)  # more than one row: BLAS
    assert "fused_gemv" not in pf.explain(C.matmul(C.rms_norm(rows, g, 1e-6), W.T))
    with pf.no_grad():
        y = C.matmul(C.rms_norm(h, g, 1e-6), W.T)
        assert ("fused_gemv" in pf.explain(y)) == (device != "cpu")


def test_fold_keeps_a_held_intermediate(device, fusion):
    """The norm's output, held and read, still has its own value."""
    K, N = 256, 32
    h, W = _rand((1, K), pf.float16, device), _rand((N, K), pf.float16, device)
    g = pf.ones(K, device=device)
    x = C.rms_norm(h, g, 1e-6)
    y = C.matmul(x, W.T)
    pf.eval(x, y)
    np.testing.assert_allclose(_f64(x), _rms64(_f64(h), 1.0, 1e-6), rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(_f64(y), _f64(x) @ _f64(W).T, rtol=2e-2, atol=2e-2)
