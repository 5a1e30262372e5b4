"""pf.amp: autocast runs matmul, linear, convolutions and attention in the
low dtype and gradients reach float32 parameters; GradScaler skips steps
with inf/NaN gradients, backs off and grows as torch's does."""
import threading

import numpy as np
import pytest

import pyflame as pf
import pyflame.nn as nn
import pyflame.nn.functional as F

LOW = ["float16", "bfloat16"]


@pytest.mark.parametrize("low", LOW)
def test_autocast_dtypes(device, low):
    a, b = pf.randn(4, 8, device=device), pf.randn(8, 3, device=device)
    lin = nn.Linear(8, 5).to(device)
    conv = nn.Conv2d(3, 4, 3, padding=1).to(device)
    img = pf.randn(2, 3, 6, 6, device=device)
    q = pf.randn(1, 2, 4, 8, device=device)
    with pf.amp.autocast(dtype=getattr(pf, low)):
        assert pf.amp.is_autocast_enabled() and str(pf.amp.get_autocast_dtype()) == low
        assert str((a @ b).dtype) == low and str(pf.matmul(a, b).dtype) == low
        assert str(lin(a).dtype) == low  # the bias joins the low-precision output
        assert str(conv(img).dtype) == low
        assert str(pf.scaled_dot_product_attention(q, q, q).dtype) == low
        assert str((a + 1.0).dtype) == "float32"  # other ops run as written
        assert str(pf.softmax(a, -1).dtype) == "float32"
        with pf.amp.autocast(enabled=False):
            assert str((a @ b).dtype) == "float32"
        assert str((a @ b).dtype) == low
    assert not pf.amp.is_autocast_enabled()
    assert str((a @ b).dtype) == "float32"
    rtol = 1e-2 if low == "float16" else 5e-2
    with pf.amp.autocast(dtype=low):
        got = (a @ b).astype("float32").numpy()
    np.testing.assert_allclose(got, a.numpy() @ b.numpy(), rtol=rtol, atol=rtol * 3)


def test_autocast_decorator_threads_and_errors(device):
    a = pf.randn(2, 2, device=device)

    @pf.amp.autocast(dtype=pf.bfloat16)
    def f(x):
        return x @ x
    assert str(f(a).dtype) == "bfloat16" and not pf.amp.is_autocast_enabled()
    seen = []
    with pf.amp.autocast():  # float16 by default; this thread only
        t = threading.Thread(target=lambda: seen.append(str((a @ a).dtype)))
        t.start()
        t.join()
        assert str((a @ a).dtype) == "float16"
    assert seen == ["float32"]
    with pf.amp.autocast("cuda", dtype=pf.bfloat16):  # torch's device_type argument
        assert str((a @ a).dtype) == "bfloat16"
    with pytest.raises(ValueError, match=r"\[autocast\].*float16 or"):
        pf.amp.autocast(dtype=pf.float32)
    with pytest.raises(RuntimeError):
        with pf.amp.autocast():
            raise RuntimeError("inside")
    assert not pf.amp.is_autocast_enabled()  # restored on errors


@pytest.mark.parametrize("low", LOW)
def test_gradients_reach_float32_parameters(device, low):
    pf.manual_seed(5)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to(device)
    x = pf.randn(6, 8, device=device)
    model(x).sum().backward()
    ref = [p.grad.numpy() for p in model.parameters()]
    model.zero_grad()
    with pf.amp.autocast(dtype=low):
        out = model(x)
        loss = out.astype("float32").sum()
        assert str(out.dtype) == low
    loss.backward()
    tol = 2e-2 if low == "float16" else 6e-2
    for p, r in zip(model.parameters(), ref):
        assert str(p.dtype) == "float32" and str(p.grad.dtype) == "float32"
        np.testing.assert_allclose(p.grad.numpy(), r, rtol=tol, atol=tol * np.abs(r).max())


def _linear_with_grad(device, values):
    p = pf.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    p.grad = pf.tensor(values, device=device)
    return p


def test_grad_scaler_skips_inf_and_backs_off(device):
    scaler = pf.amp.GradScaler(init_scale=1024.0, growth_interval=3)
    assert scaler.get_scale() == 1024.0
    loss = pf.tensor(2.0, device=device)
    assert scaler.scale(loss).item() == 2048.0
    for bad in (np.inf, -np.inf, np.nan):
        p = _linear_with_grad(device, [1.0, bad, 1.0])
        opt = pf.optim.SGD([p], lr=1.0)
        before = scaler.get_scale()
        assert scaler.step(opt) is None
        np.testing.assert_array_equal(p.numpy(), [1.0, 2.0, 3.0])  # skipped
        scaler.update()
        assert scaler.get_scale() == before * 0.5
    # finite gradients: unscaled, stepped; the scale doubles after 3 in a row
    scale = scaler.get_scale()
    for i in range(3):
        p = _linear_with_grad(device, [scale * 1.0, scale * 2.0, 0.0])
        opt = pf.optim.SGD([p], lr=1.0)
        scaler.step(opt)
        np.testing.assert_allclose(p.grad.numpy(), [1.0, 2.0, 0.0])
        np.testing.assert_allclose(p.numpy(), [0.0, 0.0, 3.0])
        scaler.update()
        assert scaler.get_scale() == (scale * 2 if i == 2 else scale)
    assert scaler.state_dict()["_growth_tracker"] == 0


def test_grad_scaler_protocol(device):
    scaler = pf.amp.GradScaler(init_scale=8.0, growth_factor=3.0, backoff_factor=0.25)
    p = _linear_with_grad(device, [8.0, 16.0, 24.0])
    opt = pf.optim.SGD([p], lr=0.5)
    scaler.unscale_(opt)  # e.g. before clipping
    np.testing.assert_allclose(p.grad.numpy(), [1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)  # does not unscale twice
    np.testing.assert_allclose(p.numpy(), [0.5, 1.0, 1.5])
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        scaler.unscale_(opt)
    scaler.update()
    with pytest.raises(AssertionError, match="No inf checks"):
        scaler.update()
    scaler.update(new_scale=5.0)
    assert scaler.get_scale() == 5.0
    with pytest.raises(RuntimeError, match="Closure"):
        scaler.step(opt, closure=lambda: None)
    half = pf.zeros(2, dtype="float16", device=device, requires_grad=True)
    half.grad = pf.ones(2, dtype="float16", device=device)
    with pytest.raises(ValueError, match="FP16 gradients"):
        scaler.unscale_(pf.optim.SGD([half], lr=1.0))
    sd = scaler.state_dict()
    other = pf.amp.GradScaler()
    other.load_state_dict(sd)
    assert other.state_dict() == sd and other.get_growth_factor() == 3.0
    off = pf.amp.GradScaler(enabled=False)
    assert off.scale(p) is p and off.get_scale() == 1.0 and off.state_dict() == {}
    with pytest.raises(RuntimeError, match="empty"):
        other.load_state_dict({})
    with pytest.raises(ValueError):
        pf.amp.GradScaler(growth_factor=0.9)


def test_mixed_precision_training_loop(device):
    """autocast + GradScaler train float32 master weights; the scale grows
    every growth_interval finite steps until float16 gradients overflow, and
    each overflow costs one skipped step."""
    pf.manual_seed(1)
    rng = np.random.default_rng(0)
    x = pf.tensor(rng.standard_normal((64, 8)).astype(np.float32), device=device)
    y = pf.tensor((rng.standard_normal((64, 1)) > 0).astype(np.float32), device=device)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    opt = pf.optim.Adam(model.parameters(), lr=1e-2)
    scaler = pf.amp.GradScaler(growth_interval=5)
    losses, skipped = [], 0
    for _ in range(60):
        opt.zero_grad()
        with pf.amp.autocast(dtype=pf.float16):
            loss = F.mse_loss(model(x).astype("float32"), y)
        scaler.scale(loss).backward()
        scale = scaler.get_scale()
        scaler.step(opt)
        scaler.update()
        skipped += scaler.get_scale() < scale
        losses.append(loss.item())
    assert all(str(p.dtype) == "float32" and p.is_leaf for p in model.parameters())
    assert losses[-1] < 0.5 * losses[0]
    assert skipped <= 10 and scaler.get_scale() > 2.0 ** 16
