"""pf.autograd.Function (custom backward) and pf.utils.checkpoint: the same
gradients as without checkpointing, fewer live intermediates after the
forward pass, random draws replayed, and the pf.grad rules."""
import numpy as np
import pytest

import pyflame as pf
import pyflame.nn as nn
from pyflame.utils import checkpoint, checkpoint_sequential


class Square(pf.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return x * x * scale

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x * (2 * ctx.scale), None


class SplitSum(pf.autograd.Function):
    """Two outputs from two inputs: (a + b, a * b)."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a + b, a * b

    @staticmethod
    def backward(ctx, g_sum, g_prod):
        a, b = ctx.saved_tensors
        return g_sum + g_prod * b, g_sum + g_prod * a


def test_function_custom_backward(device):
    x = pf.tensor([1.0, -2.0, 3.0], device=device, requires_grad=True)
    y = Square.apply(x, 3.0)
    assert y.requires_grad and not y.is_leaf
    np.testing.assert_allclose(y.numpy(), [3.0, 12.0, 27.0])
    (y * pf.tensor([1.0, 2.0, 3.0], device=device)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, -24.0, 54.0])
    # no argument requires grad, or no_grad: a plain value
    assert not Square.apply(pf.ones(2, device=device), 1.0).requires_grad
    with pf.no_grad():
        assert not Square.apply(x, 1.0).requires_grad
    # through pf.grad as well
    (gx,) = pf.grad(Square.apply(x, 0.5).sum(), [x])
    np.testing.assert_allclose(gx.numpy(), x.numpy())


def test_function_several_outputs(device):
    a = pf.tensor([1.0, 2.0], device=device, requires_grad=True)
    b = pf.tensor([3.0, 5.0], device=device, requires_grad=True)
    s, p = SplitSum.apply(a, b)
    (s * 2 + p * 3).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 2 + 3 * b.numpy())
    np.testing.assert_allclose(b.grad.numpy(), 2 + 3 * a.numpy())
    a.grad = None
    b.grad = None
    SplitSum.apply(a, b)[1].sum().backward()  # one output used: zeros for the other
    np.testing.assert_allclose(a.grad.numpy(), b.numpy())


def test_function_errors(device):
    class WrongCount(pf.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g, g

    class WrongShape(WrongCount):
        @staticmethod
        def backward(ctx, g):
            return g.sum()

    x = pf.ones(3, device=device, requires_grad=True)
    with pytest.raises(ValueError, match=r"\[WrongCount.backward\] returned 2 gradients"):
        WrongCount.apply(x).sum().backward()
    with pytest.raises(ValueError, match=r"\[backward\].*custom backward returned"):
        WrongShape.apply(x).sum().backward()

    class Boom(WrongCount):
        @staticmethod
        def backward(ctx, g):
            raise KeyError("from backward")
    with pytest.raises(KeyError, match="from backward"):
        Boom.apply(x).sum().backward()
    (x * 2).sum().backward()  # still usable
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0, 2.0])


# -------------------------------------------------------------- checkpoint

def block(width, depth, device):
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.Tanh()]
    return nn.Sequential(*layers).to(device)


def _grads(model, x):
    return [x.grad.numpy()] + [p.grad.numpy() for p in model.parameters()]


def test_checkpoint_gradients_match(device):
    model = block(16, 3, device)
    x = pf.randn(8, 16, device=device, requires_grad=True)
    w = pf.randn(16, device=device)
    (model(x) * w).sum().backward()
    plain = _grads(model, x)
    model.zero_grad()
    x.grad = None
    out = checkpoint(model, x)
    assert out.requires_grad
    (out * w).sum().backward()
    for a, b in zip(plain, _grads(model, x)):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    # the input need not require grad: the parameters still get theirs
    model.zero_grad()
    (checkpoint(model, x.detach()) * w).sum().backward()
    for a, p in zip(plain[1:], model.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), a, rtol=1e-5, atol=1e-6)


def test_checkpoint_sequential_and_nesting(device):
    model = block(12, 4, device)
    x = pf.randn(5, 12, device=device, requires_grad=True)
    model(x).sum().backward()
    plain = _grads(model, x)
    for run in (lambda: checkpoint_sequential(model, 3, x),
                lambda: checkpoint(lambda t: model[4:](checkpoint(model[:4], t)), x)):
        model.zero_grad()
        x.grad = None
        run().sum().backward()
        for a, b in zip(plain, _grads(model, x)):
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_checkpoint_with_pf_grad(device):
    w1 = pf.randn(6, 6, device=device, requires_grad=True)
    x = pf.randn(3, 6, device=device, requires_grad=True)

    def f(t, w):
        return pf.tanh(t @ w) @ w

    gx, gw = pf.grad(f(x, w1).sum(), [x, w1])
    cx, cw = pf.grad(checkpoint(f, x, w1).sum(), [x, w1])
    np.testing.assert_allclose(cx.numpy(), gx.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cw.numpy(), gw.numpy(), rtol=1e-5, atol=1e-6)
    assert x.grad is None and w1.grad is None  # pf.grad accumulates nowhere
    val, g = pf.value_and_grad(lambda t, w: checkpoint(f, t, w).sum(), argnums=(0, 1))(x, w1)
    np.testing.assert_allclose(g[1].numpy(), gw.numpy(), rtol=1e-5, atol=1e-6)
    # w1 used inside without being an argument: pf.grad cannot route it
    with pytest.raises(RuntimeError, match=r"\[checkpoint\].*argument"):
        pf.grad(checkpoint(lambda t: f(t, w1), x).sum(), [x, w1])
    # ... but differentiating only the argument is fine, with nothing accumulated
    (cx2,) = pf.grad(checkpoint(lambda t: f(t, w1), x).sum(), [x])
    np.testing.assert_allclose(cx2.numpy(), gx.numpy(), rtol=1e-5, atol=1e-6)
    assert w1.grad is None


def test_checkpoint_replays_random_draws(device):
    x = pf.randn(4, 5, device=device, requires_grad=True)

    def noisy(t):
        return t * pf.rand(4, 5, device=device)

    out = checkpoint(noisy, x)
    state = pf.get_rng_state()
    out.sum().backward()
    # the gradient is the mask drawn in the forward pass...
    np.testing.assert_allclose(x.grad.numpy(), out.numpy() / x.numpy(), rtol=1e-5, atol=1e-6)
    # ...and replaying it left the generator where the forward pass did
    assert pf.get_rng_state() == state


def test_checkpoint_recomputes_under_the_forward_autocast(device):
    lin = nn.Linear(8, 8).to(device)
    x = pf.randn(4, 8, device=device, requires_grad=True)
    with pf.amp.autocast(dtype=pf.bfloat16):
        out = lin(x)
    out.astype("float32").sum().backward()
    plain = lin.weight.grad.numpy()
    lin.zero_grad()
    seen = []

    def fn(t):
        seen.append(pf.amp.get_autocast_dtype())
        return lin(t)
    with pf.amp.autocast(dtype=pf.bfloat16):
        out = checkpoint(fn, x)
    assert str(out.dtype) == "bfloat16"
    out.astype("float32").sum().backward()  # backward outside autocast
    assert [str(d) for d in seen] == ["bfloat16", "bfloat16"]
    assert not pf.amp.is_autocast_enabled()
    assert str(lin.weight.grad.dtype) == "float32"
    np.testing.assert_allclose(lin.weight.grad.numpy(), plain, rtol=1e-2, atol=1e-2)


def test_checkpoint_keeps_fewer_intermediates():
    """Host memory held after the forward pass: without checkpointing every
    layer's output is kept for backward; with it only the segment inputs."""
    width, depth, batch = 256, 8, 256
    model = block(width, depth, "cpu")
    x = pf.randn(batch, width, requires_grad=True)
    pf.eval(x, *model.parameters())
    mem = pf.backend.cpu.memory_allocated

    def held_after_forward(run):
        before = mem()
        out = run()
        pf.eval(out)
        held = mem() - before
        out.sum().backward()
        return held

    activation = batch * width * 4
    plain = held_after_forward(lambda: model(x))
    assert plain >= 2 * depth * activation  # at least the linear and tanh outputs per layer
    whole = held_after_forward(lambda: checkpoint(model, x))
    assert whole <= activation, (whole, plain)  # the output alone
    # 3 checkpointed segments of 2 layers keep their outputs; the last runs plainly
    seq = held_after_forward(lambda: checkpoint_sequential(model, 4, x))
    assert seq <= plain / 2, (seq, plain)

    def peak(run):  # over forward and backward, the parameter gradients included
        model.zero_grad()
        base = mem()
        pf.backend.cpu.reset_peak_memory_stats()
        run().sum().backward()
        return pf.backend.cpu.max_memory_allocated() - base

    # recomputing a segment at a time lowers the peak too
    assert peak(lambda: checkpoint_sequential(model, 4, x)) <= \
        peak(lambda: model(x)) - 4 * activation


def test_checkpoint_argument_checks():
    with pytest.raises(TypeError, match=r"\[checkpoint\] function must be callable"):
        checkpoint(3, pf.ones(2))
    with pytest.raises(ValueError, match="segments"):
        checkpoint_sequential(nn.Sequential(nn.ReLU()), 2, pf.ones(2))
    with pf.no_grad():  # nothing to record: a plain call
        assert not checkpoint(lambda t: t * 2, pf.ones(2, requires_grad=True)).requires_grad
