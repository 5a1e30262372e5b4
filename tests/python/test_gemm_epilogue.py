"""A 2-D GEMM's bias and relu folded into the BLAS library's epilogue
(FusedGemm): relu(x @ w + b) as one cuBLASLt/hipBLASLt call on a GPU, with
gradients.
Values against fusion off (the unfused kernels: the same bits, NaN and -0
included) and a float64 NumPy reference, on every device; on the GPU, the
library ran the epilogue (fusion_stats)."""
import numpy as np
import pytest

import pyflame as pf
from pyflame import _core as C

TOL = {pf.float32: 2e-4, pf.float16: 2e-2, pf.bfloat16: 8e-2}


def _rand(shape, dtype, device, scale=1.0):
    return pf.tensor((np.random.randn(*shape) * scale).astype(np.float32), device=device).astype(dtype)


def _np(t):
    return np.asarray(t.astype(pf.float32).numpy(), dtype=np.float64)


def _both(build):
    """build() evaluated with fusion on (its result and the epilogue count),
    then with fusion off."""
    pf.set_fusion(True, gpu=True)
    C.reset_fusion_stats()
    y = build()
    on = y.numpy()
    ran = C.fusion_stats()["gemm_epilogues"]
    assert C.fusion_stats()["fallbacks"] == 0, C.fusion_stats()
    pf.set_fusion(False)
    off = build().numpy()
    pf.set_fusion(True, gpu=True)
    return on, off, ran


def _nvidia():
    """cuBLASLt takes every epilogue here; hipBLASLt's kernels vary by
    architecture (and its relu is not used: it turns NaN into 0)."""
    return pf._core.gpu_platform() == "nvidia"


def _same_bits(a, b):
    """Equal values, NaN where NaN, and the same sign of zero."""
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)
    assert np.array_equal(np.signbit(a), np.signbit(b))


# The MLP benchmark's layers, a tiny one, a wide fp16 one (multi_stream's).
SHAPES = [(32, 784, 256), (32, 256, 128), (32, 128, 10), (2, 3, 2), (64, 1024, 1024)]


@pytest.mark.parametrize("M,K,N", SHAPES)
@pytest.mark.parametrize("bias,relu", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("transposed", [False, True])
def test_float32(device, fusion, M, K, N, bias, relu, transposed):
    x = _rand((M, K), pf.float32, device)
    w = _rand((N, K), pf.float32, device, K**-0.5).T if transposed else _rand((K, N), pf.float32, device, K**-0.5)
    b = _rand((N,), pf.float32, device)

    def build():
        y = C.matmul(x, w)
        y = y + b if bias else y
        return C.relu(y) if relu else y

    on, off, ran = _both(build)
    _same_bits(on, off)
    ref = _np(x) @ _np(w) + (_np(b) if bias else 0)
    ref = np.maximum(ref, 0) if relu else ref
    np.testing.assert_allclose(on, ref, rtol=TOL[pf.float32], atol=TOL[pf.float32])
    if device != "cpu" and _nvidia():
        assert ran == 1  # one GEMM did all of it


@pytest.mark.parametrize("dtype", [pf.float16, pf.bfloat16])
@pytest.mark.parametrize("M,K,N", [(64, 1024, 1024), (32, 784, 256), (2, 3, 2)])
def test_half_relu(device, fusion, dtype, M, K, N):
    x, w = _rand((M, K), dtype, device), _rand((K, N), dtype, device, K**-0.5)
    on, off, ran = _both(lambda: C.relu(C.matmul(x, w)))
    _same_bits(on.astype(np.float32), off.astype(np.float32))
    ref = np.maximum(_np(x) @ _np(w), 0)
    np.testing.assert_allclose(on.astype(np.float32), ref, rtol=TOL[dtype], atol=TOL[dtype])
    if device != "cpu" and _nvidia():
        assert ran == 1


@pytest.mark.parametrize("dtype", [pf.float16, pf.bfloat16])
def test_half_bias_stays_unfolded(device, fusion, dtype):
    """A 16-bit bias is added after the product is rounded, as the unfused
    add does; the library adds it before: no fold, same bits."""
    x, w, b = _rand((16, 64), dtype, device), _rand((64, 32), dtype, device), _rand((32,), dtype, device)
    on, off, ran = _both(lambda: C.relu(C.matmul(x, w) + b))
    _same_bits(on.astype(np.float32), off.astype(np.float32))
    assert ran == 0


def test_nan_inf_and_signed_zero(device, fusion):
    """NaN stays NaN through relu (as the relu kernel keeps it), inf and
    -inf pass the bias and relu as in the unfused ops."""
    x = np.random.randn(8, 16).astype(np.float32)
    x[0, 3] = np.nan
    x[1, :] = 0.0
    x[2, 5] = np.inf
    x[3, 7] = -np.inf
    w = np.random.randn(16, 8).astype(np.float32)
    w[:, 2] = -np.abs(w[:, 2])  # row 1: zeros times negatives
    b = np.random.randn(8).astype(np.float32)
    b[4] = -0.0
    xt, wt, bt = (pf.tensor(a, device=device) for a in (x, w, b))
    for bias in (True, False):
        on, off, _ = _both(lambda: C.relu(C.matmul(xt, wt) + bt if bias else C.matmul(xt, wt)))
        _same_bits(on, off)
        assert np.isnan(on[0]).all()


def test_product_also_read(device, fusion):
    """The product is held and read too: both values are right (the fold
    leaves the product's own node to be evaluated on its own)."""
    x, w, b = _rand((16, 32), pf.float32, device), _rand((32, 24), pf.float32, device), _rand((24,), pf.float32, device)
    pf.set_fusion(True, gpu=True)
    h = C.matmul(x, w)
    y = C.relu(h + b)
    pf.eval(h, y)
    ref = _np(x) @ _np(w)
    np.testing.assert_allclose(h.numpy(), ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(y.numpy(), np.maximum(ref + _np(b), 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("relu", [True, False])
def test_gradients(device, fusion, relu):
    """Gradients through the folded node equal the unfused ops' bit for bit
    (relu's mask taken from the output), and NumPy's."""
    xn = np.random.randn(8, 16).astype(np.float32)
    xn[1] = 0.0  # row 1's pre-activation is the bias: exactly 0 where the bias is
    wn = np.random.randn(16, 4).astype(np.float32)
    bn = np.random.randn(4).astype(np.float32)
    bn[2] = 0.0

    def grads():
        x, w, b = (pf.tensor(a, device=device, requires_grad=True) for a in (xn, wn, bn))
        y = C.matmul(x, w) + b
        y = C.relu(y) if relu else y
        (y * y).sum().backward()
        return [t.grad.numpy() for t in (x, w, b)]

    pf.set_fusion(True, gpu=True)
    C.reset_fusion_stats()
    on = grads()
    ran = C.fusion_stats()["gemm_epilogues"]
    pf.set_fusion(False)
    off = grads()
    for a, b in zip(on, off):
        _same_bits(a, b)
    if device != "cpu" and _nvidia():
        assert ran == 1
    pre = xn.astype(np.float64) @ wn + bn
    post = np.maximum(pre, 0) if relu else pre
    g = 2 * post * (pre > 0) if relu else 2 * post
    for got, want in zip(on, [g @ wn.T, xn.T.astype(np.float64) @ g, g.sum(0)]):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_training_matches_unfused(device, fusion):
    """A few SGD steps of Linear-ReLU-Linear: fused and unfused losses and
    weights stay equal bit for bit."""
    def train():
        pf.manual_seed(1)
        net = pf.nn.Sequential(pf.nn.Linear(32, 16), pf.nn.ReLU(), pf.nn.Linear(16, 4)).to(device)
        opt = pf.optim.SGD(net.parameters(), lr=0.1)
        rng = np.random.default_rng(0)
        losses = []
        for _ in range(3):
            x = pf.tensor(rng.standard_normal((8, 32), dtype=np.float32), device=device)
            loss = (net(x) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, [p.numpy() for p in net.parameters()]

    pf.set_fusion(True, gpu=True)
    on = train()
    pf.set_fusion(False)
    off = train()
    assert on[0] == off[0]
    for a, b in zip(on[1], off[1]):
        _same_bits(a, b)


def test_linear_relu_module_and_compile(device, fusion):
    """nn.Linear + ReLU in no_grad, eager and under pf.compile, equal fusion off."""
    pf.manual_seed(0)
    net = pf.nn.Sequential(pf.nn.Linear(64, 32), pf.nn.ReLU(), pf.nn.Linear(32, 8)).to(device)
    x = _rand((16, 64), pf.float32, device)
    with pf.no_grad():
        on, off, _ = _both(lambda: net(x))
        _same_bits(on, off)
        f = pf.compile(lambda t: net(t))
        for _ in range(3):
            x2 = _rand((16, 64), pf.float32, device)
            _same_bits(f(x2).numpy(), net(x2).numpy())
