"""Autograd core: the engine, grad mode, leaves, and the vjps of the
elementwise, reduction, softmax, matmul and view primitives, against torch
and finite differences on every device."""
import numpy as np
import pytest

import pyflame as pf
from conftest import random_array
from gradcheck import check_finite_differences, check_vs_torch

torch = pytest.importorskip("torch")
F = torch.nn.functional

UNARY = {
    "neg": (pf.neg, torch.neg), "abs": (pf.abs, torch.abs), "exp": (pf.exp, torch.exp),
    "sin": (pf.sin, torch.sin), "cos": (pf.cos, torch.cos), "tanh": (pf.tanh, torch.tanh),
    "relu": (pf.relu, torch.relu), "sigmoid": (pf.sigmoid, torch.sigmoid),
    "silu": (pf.silu, F.silu), "gelu": (pf.gelu, F.gelu), "erf": (pf.erf, torch.erf),
    "gelu_tanh": (lambda x: pf.gelu(x, approximate="tanh"),
                  lambda x: F.gelu(x, approximate="tanh")),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_grad(device, name):
    f, tf = UNARY[name]
    x = random_array((5, 7))
    check_vs_torch(f, tf, [x], device)
    check_finite_differences(f, [x], device, dtype="float64")


@pytest.mark.parametrize("name,f,tf", [
    ("sqrt", pf.sqrt, torch.sqrt), ("log", pf.log, torch.log)])
def test_positive_domain_unary_grad(device, name, f, tf):
    x = random_array((4, 6), low=0.5, high=3.0)
    check_vs_torch(f, tf, [x], device)
    check_finite_differences(f, [x], device, dtype="float64")


BINARY = {
    "add": (lambda a, b: a + b), "sub": (lambda a, b: a - b), "mul": (lambda a, b: a * b),
    "div": (lambda a, b: a / b),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 5)), ((), (3,))])
def test_binary_grad_broadcasting(device, name, shapes):
    f = BINARY[name]
    a = random_array(shapes[0])
    b = random_array(shapes[1], low=0.5, high=2.0)
    check_vs_torch(f, f, [a, b], device)
    check_finite_differences(f, [a, b], device, dtype="float64")


def test_pow_maximum_minimum_where_grad(device):
    a = random_array((4, 5), low=0.5, high=2.0)
    b = random_array((4, 5), low=-2.0, high=2.0)
    check_vs_torch(pf.pow, torch.pow, [a, b], device)
    check_vs_torch(pf.maximum, torch.maximum, [a, b], device)
    check_vs_torch(pf.minimum, torch.minimum, [a, b], device)
    check_vs_torch(lambda x, y: pf.where(x > 1.0, x, y),
                   lambda x, y: torch.where(x > 1.0, x, y), [a, b], device)
    check_vs_torch(lambda x: pf.clamp(x, -1.0, 1.0), lambda x: torch.clamp(x, -1.0, 1.0),
                   [b * 1.37], device)  # no element lands exactly on a bound


def test_maximum_ties_split_the_gradient(device):
    x = pf.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    y = pf.tensor([1.0, 5.0, 0.0], device=device, requires_grad=True)
    pf.maximum(x, y).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.5, 0.0, 1.0])
    np.testing.assert_array_equal(y.grad.numpy(), [0.5, 1.0, 0.0])


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("axes,keep", [(None, False), ((1,), False), ((0, 2), True), ((-1,), True)])
def test_reduction_grad(device, op, axes, keep):
    x = random_array((3, 4, 5), low=0.5, high=1.5)
    pff = getattr(pf, op)

    def tfn(t):
        if axes is None:
            return getattr(torch, {"max": "amax", "min": "amin"}.get(op, op))(t) if op not in (
                "max", "min") else getattr(torch, "amax" if op == "max" else "amin")(t)
        if op == "prod":
            r = t
            for a in sorted([a % 3 for a in axes], reverse=True):
                r = torch.prod(r, a, keepdim=keep)
            return r
        f = {"max": torch.amax, "min": torch.amin}.get(op, getattr(torch, op))
        return f(t, axes, keepdim=keep)
    check_vs_torch(lambda t: pff(t, axes, keep) if axes is not None else pff(t), tfn, [x], device)


def test_prod_grad_with_zeros(device):
    x = random_array((4, 5), low=0.5, high=1.5)
    x[0, 1] = 0.0             # one zero in row 0
    x[1, 0] = x[1, 3] = 0.0   # two zeros in row 1
    x[2, 2] = 0.0             # one zero in column 2 (with row 0's in column 1)
    for axes, tf in [((1,), lambda t: torch.prod(t, 1)), ((0,), lambda t: torch.prod(t, 0)),
                     (None, torch.prod)]:
        check_vs_torch(lambda t: pf.prod(t, axes) if axes else pf.prod(t), tf, [x], device)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_grad(device, axis):
    x = random_array((4, 6, 5))
    check_vs_torch(lambda t: pf.softmax(t, axis), lambda t: torch.softmax(t, axis), [x], device)
    check_vs_torch(lambda t: pf.log_softmax(t, axis), lambda t: torch.log_softmax(t, axis),
                   [x], device)
    check_finite_differences(lambda t: pf.log_softmax(t, axis), [x], device, dtype="float64")


@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((4,), (4, 3)),
                                   ((3, 4), (4,)), ((2, 1, 3, 4), (5, 4, 2))])
def test_matmul_grad(device, sa, sb):
    a, b = random_array(sa), random_array(sb)
    check_vs_torch(pf.matmul, torch.matmul, [a, b], device, rtol=1e-4, atol=1e-4)
    check_finite_differences(pf.matmul, [a, b], device, dtype="float64")


def test_view_grads(device):
    x = random_array((4, 6, 5))
    cases = [
        (lambda t: t.reshape(6, 20), lambda t: t.reshape(6, 20)),
        (lambda t: t.T, lambda t: t.permute(2, 1, 0)),
        (lambda t: pf.transpose(t, (1, 0, 2)), lambda t: t.permute(1, 0, 2)),
        (lambda t: t[1:3, ::2, -1], lambda t: t[1:3, ::2, -1]),
        (lambda t: t[::-1, 5:0:-2, 1:4], lambda t: torch.flip(t, [0])[:, [5, 3, 1]][:, :, 1:4]),
        (lambda t: t[2], lambda t: t[2]),
        (lambda t: pf.unsqueeze(t, 1).squeeze(1), lambda t: t),
        (lambda t: pf.broadcast_to(t[:, :1, :], (4, 3, 5)),
         lambda t: t[:, :1, :].expand(4, 3, 5)),
        (lambda t: t.flatten(), lambda t: t.flatten()),
        (lambda t: t.T.reshape(-1), lambda t: t.permute(2, 1, 0).reshape(-1)),
    ]
    for f, tf in cases:
        check_vs_torch(f, tf, [x], device)


def test_astype_and_to_device_grads(device):
    x = random_array((3, 4))
    check_vs_torch(lambda t: (t.astype("float16") * 2.0).astype("float32"),
                   lambda t: t * 2.0, [x], device, rtol=2e-3, atol=2e-3)
    check_vs_torch(lambda t: (t.to("cpu") * 3.0).to(device), lambda t: t * 3.0, [x], device)


# ------------------------------------------------------------ the engine

def test_leaf_accumulates_and_graph_is_released(device):
    x = pf.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    assert x.is_leaf and x.requires_grad and x.grad is None
    y = (x * x).sum()
    assert y.requires_grad and not y.is_leaf
    y.backward(retain_graph=True)
    np.testing.assert_allclose(x.grad.numpy(), [2, 4, 6])
    y.backward()  # accumulates
    np.testing.assert_allclose(x.grad.numpy(), [4, 8, 12])
    with pytest.raises(RuntimeError, match="backward"):
        y.backward()
    x.grad = None
    assert x.grad is None


def test_shared_subexpression_and_reuse(device):
    x = random_array((3, 3))
    check_vs_torch(lambda t: (t * t + t).sum(axis=0) * t[0],
                   lambda t: (t * t + t).sum(0) * t[0], [x], device)


def test_no_grad_detach_and_grad_mode(device):
    x = pf.randn(3, device=device, requires_grad=True)
    with pf.no_grad():
        assert not pf.is_grad_enabled()
        y = x * 2
        with pf.enable_grad():
            z = x * 2
    assert pf.is_grad_enabled()
    assert not y.requires_grad and z.requires_grad
    assert not x.detach().requires_grad
    d = (x * 3).detach()
    assert not d.requires_grad and d.is_leaf

    @pf.no_grad()
    def infer(t):
        return t * 2
    assert not infer(x).requires_grad
    pf.set_grad_enabled(False)
    try:
        assert not (x * 2).requires_grad
    finally:
        pf.set_grad_enabled(True)


def test_repr_shows_requires_grad(device):
    x = pf.tensor([1.0, 2.0], device=device, requires_grad=True)
    assert repr(x).endswith("requires_grad=True)")
    assert "requires_grad" not in repr(x.detach())


def test_detach_blocks_gradient(device):
    x = pf.tensor([1.0, 2.0], device=device, requires_grad=True)
    (x * x.detach()).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 2.0])


def test_functional_grad_and_value_and_grad(device):
    w = pf.randn(4, 3, device=device)
    b = pf.randn(3, device=device)
    x = pf.randn(5, 4, device=device)

    def loss(params, inputs):
        return ((inputs @ params["w"] + params["b"]) ** 2).mean()
    val, g = pf.value_and_grad(loss)({"w": w, "b": b}, x)
    assert not w.requires_grad and w.grad is None  # the caller's tensors are untouched
    tw = torch.tensor(w.numpy(), requires_grad=True)
    tb = torch.tensor(b.numpy(), requires_grad=True)
    tl = ((torch.tensor(x.numpy()) @ tw + tb) ** 2).mean()
    tl.backward()
    np.testing.assert_allclose(val.item(), tl.item(), rtol=1e-5)
    np.testing.assert_allclose(g["w"].numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(g["b"].numpy(), tb.grad.numpy(), rtol=1e-4, atol=1e-5)
    gx = pf.grad(lambda a, c: (a * c).sum(), argnums=(0, 1))(x, x)
    np.testing.assert_allclose(gx[0].numpy(), x.numpy(), rtol=1e-6)
    # the torch.autograd.grad form
    t = pf.randn(3, device=device, requires_grad=True)
    (gt,) = pf.grad((t * t).sum(), [t])
    np.testing.assert_allclose(gt.numpy(), 2 * t.numpy(), rtol=1e-6)
    assert t.grad is None


def test_unused_input_gets_zeros(device):
    a = pf.randn(3, device=device, requires_grad=True)
    b = pf.randn(2, device=device, requires_grad=True)
    ga, gb = pf.grad((a * 2).sum(), [a, b])
    np.testing.assert_array_equal(gb.numpy(), np.zeros(2, np.float32))


def test_long_chain_backward(device):
    x = pf.tensor([1.0], device=device, requires_grad=True)
    y = x
    for _ in range(20000):
        y = y * 1.0001
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0001 ** 20000], rtol=1e-2)


def test_gradients_stay_on_the_device(device):
    x = pf.randn(8, 8, device=device, requires_grad=True)
    (pf.softmax(x @ x.T, -1).sum(axis=0) * pf.arange(8, device=device)).sum().backward()
    assert x.grad.device == x.device


def test_errors(device):
    x = pf.randn(3, device=device, requires_grad=True)
    with pytest.raises(ValueError, match=r"\[backward\].*gradient must be given"):
        (x * 2).backward()
    with pytest.raises(ValueError, match=r"\[backward\].*does not require grad"):
        pf.randn(3, device=device).sum().backward()
    with pytest.raises(ValueError, match=r"\[requires_grad\].*floating-point"):
        pf.arange(3, dtype="int64", device=device).requires_grad = True
    with pytest.raises(ValueError, match=r"\[requires_grad\].*leaf"):
        (x * 2).requires_grad = False
    with pytest.raises(ValueError, match=r"\[backward\].*shape"):
        (x * 2).backward(pf.ones(4, device=device))
    with pytest.raises(ValueError, match=r"\[grad\].*single-element"):
        pf.grad(lambda t: t * 2)(x)
    with pytest.raises(ValueError, match="floating-point"):
        pf.grad(lambda t: t.sum())(pf.arange(3, dtype="int64"))
    # the process stays usable
    (x * 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2, 2, 2])
