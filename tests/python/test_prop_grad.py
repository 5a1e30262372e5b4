"""Property tests: gradients of the differentiable op families against
PyTorch's autograd in float64 on random small cases (broadcasting, axes,
shapes drawn by hypothesis). Each case differentiates sum(f(inputs) * c)
for a random cotangent c, so the whole vector-Jacobian product is checked.
Inputs are float32 values drawn away from the ops' kinks and ties, and
non-empty (zero-size inputs: the xfail tests below, issue 16)."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import pyflame as pf
from prop_common import axis_of, broadcastable_pair, shapes

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _values(data, shape, low=-2.0, high=2.0, name="x"):
    """float32 values, pairwise distinct (no ties for max/min), away from 0
    (relu/abs kinks) when low < 0 < high."""
    seed = data.draw(st.integers(0, 2**32 - 1), f"{name}_seed")
    rng = np.random.default_rng(seed)
    x = rng.uniform(low, high, size=shape)
    if low < 0 < high:
        x = np.where(np.abs(x) < 0.05, x + 0.1 * np.sign(x + 1e-9), x)
    x = x + np.arange(x.size).reshape(shape) * 1e-4 if x.size else x  # no exact ties
    return np.asarray(x, dtype=np.float32).astype(np.float64)


def _compare(pf_fn, torch_fn, inputs, data, atol=2e-4, rtol=2e-4):
    """Gradients of sum(f(*inputs) * c) with respect to every input."""
    tins = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in inputs]
    tout = torch_fn(*tins)
    c = _values(data, tuple(tout.shape), -1.0, 1.0, "cotangent")
    (tout * torch.from_numpy(c)).sum().backward()
    want = [t.grad.numpy() if t.grad is not None else np.zeros(t.shape) for t in tins]

    def loss(*xs):
        out = pf_fn(*xs)
        assert tuple(out.shape) == tuple(tout.shape), (tuple(out.shape), tuple(tout.shape))
        return (out * pf.tensor(c.astype(np.float32))).sum()

    grads = pf.grad(loss, argnums=tuple(range(len(inputs))))(
        *[pf.tensor(x.astype(np.float32)) for x in inputs])
    for i, (g, w) in enumerate(zip(grads, want)):
        assert tuple(g.shape) == w.shape, f"grad {i}: shape {tuple(g.shape)} vs {w.shape}"
        np.testing.assert_allclose(g.numpy().astype(np.float64), w, rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {i}")


# ----------------------------------------------------------------- elementwise

_UNARY = {"exp": (torch.exp, -2, 2), "log": (torch.log, 0.1, 4), "sqrt": (torch.sqrt, 0.1, 4),
          "sin": (torch.sin, -3, 3), "cos": (torch.cos, -3, 3), "tanh": (torch.tanh, -3, 3),
          "relu": (torch.relu, -2, 2), "sigmoid": (torch.sigmoid, -4, 4),
          "silu": (TF.silu, -4, 4), "gelu": (TF.gelu, -4, 4), "abs": (torch.abs, -2, 2),
          "neg": (torch.neg, -2, 2), "erf": (torch.erf, -2, 2)}


@pytest.mark.parametrize("op", sorted(_UNARY))
@given(data=st.data())
def test_unary_grad(device, op, data):
    tfn, lo, hi = _UNARY[op]
    x = _values(data, data.draw(shapes(max_dims=3, min_side=1), "shape"), lo, hi)
    _compare(getattr(pf, op), tfn, [x], data)


_BINARY = {"add": (lambda a, b: a + b, -2, 2), "sub": (lambda a, b: a - b, -2, 2),
           "mul": (lambda a, b: a * b, -2, 2), "div": (lambda a, b: a / b, 0.5, 3),
           "pow": (lambda a, b: a ** b, 0.5, 2),
           "maximum": (torch.maximum, -2, 2), "minimum": (torch.minimum, -2, 2)}


@pytest.mark.parametrize("op", sorted(_BINARY))
@given(data=st.data())
def test_binary_grad_broadcasting(device, op, data):
    tfn, lo, hi = _BINARY[op]
    sa, sb = data.draw(broadcastable_pair(max_dims=3, min_side=1), "shapes")
    a, b = _values(data, sa, lo, hi, "a"), _values(data, sb, lo, hi, "b") + 0.01
    _compare(getattr(pf, op), tfn, [a, b], data)


@given(data=st.data())
def test_where_clamp_grad(device, data):
    sa, sb = data.draw(broadcastable_pair(max_dims=3, min_side=1), "shapes")
    a, b = _values(data, sa, name="a"), _values(data, sb, name="b")
    cond = data.draw(hnp.arrays(np.bool_, np.broadcast_shapes(sa, sb)), "cond")
    _compare(lambda x, y: pf.where(pf.tensor(cond), x, y),
             lambda x, y: torch.where(torch.from_numpy(cond), x, y), [a, b], data)
    lo, hi = -1.0, 1.0  # values are never exactly on a bound here
    _compare(lambda x: pf.clamp(x, lo, hi), lambda x: torch.clamp(x, lo, hi), [a], data)


def test_clamp_grad_at_bound(device):
    g = pf.grad(lambda x: pf.clamp(x, 0.0, 1.0).sum())(pf.tensor([0.0, 1.0, 0.5]))
    np.testing.assert_array_equal(g.numpy(), [1.0, 1.0, 1.0])


# ------------------------------------------------------------------ reductions

@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "prod"])
@given(data=st.data())
def test_reduction_grad(device, op, data):
    shape = data.draw(shapes(min_dims=1, max_dims=3, min_side=1, max_side=3), "shape")
    axis = data.draw(st.one_of(st.none(), axis_of(len(shape))), "axis")
    keep = data.draw(st.booleans(), "keepdim")
    x = _values(data, shape, 0.5, 1.5) if op == "prod" else _values(data, shape)

    def tfn(t):
        if axis is None:
            r = getattr(torch, {"max": "amax", "min": "amin"}.get(op, op))(t) if op != "prod" \
                else torch.prod(t)
            return r.reshape((1,) * t.ndim) if keep else r
        if op in ("max", "min"):
            return getattr(torch, "a" + op)(t, axis, keep)
        return getattr(torch, op)(t, axis, keepdim=keep)
    _compare(lambda t: getattr(pf, op)(t, axis, keep), tfn, [x], data)


def test_zero_size_reduction_grad(device):
    x = pf.zeros((0, 3), requires_grad=True)
    x.sum().backward()
    assert tuple(x.grad.shape) == (0, 3)


def test_zero_size_concat_grad(device):
    g = pf.grad(lambda a, b: pf.concat([a, b]).sum(), argnums=(0, 1))(pf.zeros((0, 2)),
                                                                     pf.ones((2, 2)))
    assert tuple(g[0].shape) == (0, 2)
    np.testing.assert_array_equal(g[1].numpy(), np.ones((2, 2)))


# ------------------------------------------------------------------ shape ops

@given(data=st.data())
def test_shape_ops_grad(device, data):
    shape = data.draw(shapes(min_dims=1, max_dims=3, min_side=1, max_side=3), "shape")
    nd = len(shape)
    x = _values(data, shape)
    perm = data.draw(st.permutations(range(nd)), "perm")
    _compare(lambda t: t.transpose(perm), lambda t: t.permute(*perm), [x], data)
    _compare(lambda t: t.reshape(-1), lambda t: t.reshape(-1), [x], data)
    lead = data.draw(st.integers(1, 3), "lead")
    _compare(lambda t: pf.broadcast_to(t, (lead,) + shape),
             lambda t: t.expand((lead,) + shape), [x], data)
    axis = data.draw(axis_of(nd), "axis")
    y = _values(data, shape, name="y")
    _compare(lambda a, b: pf.concat([a, b], axis), lambda a, b: torch.cat([a, b], axis),
             [x, y], data)
    _compare(lambda a, b: pf.stack([a, b], axis), lambda a, b: torch.stack([a, b], axis),
             [x, y], data)
    step = data.draw(st.integers(1, 2), "step")
    _compare(lambda t: t[..., ::step], lambda t: t[..., ::step], [x], data)
    if shape[0] > 1:
        _compare(lambda t: t[1:], lambda t: t[1:], [x], data)


@given(data=st.data())
def test_gather_index_select_grad(device, data):
    shape = data.draw(shapes(min_dims=1, max_dims=3, min_side=1, max_side=3), "shape")
    axis = data.draw(axis_of(len(shape)), "axis")
    d = shape[axis]
    ishape = list(shape)
    ishape[axis] = data.draw(st.integers(1, 4), "n")  # zero: see the isolated creation cases
    idx = data.draw(hnp.arrays(np.int64, tuple(ishape), elements=st.integers(0, d - 1)), "idx")
    x = _values(data, shape)
    ti = torch.from_numpy(idx)
    _compare(lambda t: pf.gather(t, axis, pf.tensor(idx)),
             lambda t: torch.gather(t, axis, ti), [x], data)
    sel = data.draw(hnp.arrays(np.int64, (data.draw(st.integers(1, 4)),),
                               elements=st.integers(0, d - 1)), "sel")
    _compare(lambda t: pf.index_select(t, axis, pf.tensor(sel)),
             lambda t: torch.index_select(t, axis, torch.from_numpy(sel)), [x], data)


# ------------------------------------------------------------- linear algebra

@given(data=st.data())
def test_matmul_grad(device, data):
    m, k, n = (data.draw(st.integers(1, 4)) for _ in range(3))
    batch = data.draw(shapes(max_dims=2, min_side=1, max_side=2), "batch")
    bb = batch[data.draw(st.integers(0, len(batch))):]
    a, b = _values(data, batch + (m, k), name="a"), _values(data, bb + (k, n), name="b")
    _compare(pf.matmul, torch.matmul, [a, b], data)


@pytest.mark.parametrize("log", [False, True])
@given(data=st.data())
def test_softmax_grad(device, log, data):
    shape = data.draw(shapes(min_dims=1, max_dims=3, min_side=1), "shape")
    axis = data.draw(axis_of(len(shape)), "axis")
    x = _values(data, shape, -4, 4)
    _compare(lambda t: (pf.log_softmax if log else pf.softmax)(t, axis),
             lambda t: (torch.log_softmax if log else torch.softmax)(t, axis), [x], data)


@given(data=st.data())
def test_norm_grads(device, data):
    n, g = data.draw(st.integers(1, 3), "n"), data.draw(st.integers(1, 2), "groups")
    c = g * data.draw(st.integers(1, 2), "per_group")
    x = _values(data, (n, c, 3), -3, 3)
    w, b = _values(data, (3,), name="w"), _values(data, (3,), name="b")
    _compare(lambda t, ww, bb: pf.layer_norm(t, [3], ww, bb, 1e-5),
             lambda t, ww, bb: TF.layer_norm(t, (3,), ww, bb, 1e-5), [x, w, b], data,
             atol=1e-3, rtol=1e-3)
    wc, bc = _values(data, (c,), name="wc"), _values(data, (c,), name="bc")
    _compare(lambda t, ww, bb: pf.group_norm(t, g, ww, bb, 1e-5),
             lambda t, ww, bb: TF.group_norm(t, g, ww, bb, 1e-5), [x, wc, bc], data,
             atol=1e-3, rtol=1e-3)
    _compare(lambda t, ww: pf.rms_norm(t, ww, 1e-6),
             lambda t, ww: t / torch.sqrt((t * t).mean(-1, keepdim=True) + 1e-6) * ww,
             [x, w], data, atol=1e-3, rtol=1e-3)


# --------------------------------------------------------------------- losses

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@given(data=st.data())
def test_loss_grads(device, reduction, data):
    n, c = data.draw(st.integers(1, 4), "n"), data.draw(st.integers(2, 5), "c")
    x, y = _values(data, (n, c), -3, 3, "x"), _values(data, (n, c), -3, 3, "y")
    _compare(lambda a, b: pf.mse_loss(a, b, reduction),
             lambda a, b: TF.mse_loss(a, b, reduction=reduction), [x, y], data)
    p, q = _values(data, (n, c), 0.05, 0.95, "p"), _values(data, (n, c), 0.0, 1.0, "q")
    _compare(lambda a: pf.bce_loss(a, pf.tensor(q.astype(np.float32)), None, reduction),
             lambda a: TF.binary_cross_entropy(a, torch.from_numpy(q), reduction=reduction),
             [p], data, atol=1e-3, rtol=1e-3)
    target = data.draw(hnp.arrays(np.int64, (n,), elements=st.integers(0, c - 1)), "target")
    smoothing = data.draw(st.sampled_from([0.0, 0.2]), "label_smoothing")
    w = _values(data, (c,), 0.5, 2.0, "w")  # class weights: constants, as in torch
    tt, tw, pw = torch.from_numpy(target), torch.from_numpy(w), pf.tensor(w.astype(np.float32))
    _compare(lambda a: pf.cross_entropy(a, pf.tensor(target), pw, -100, reduction, smoothing),
             lambda a: TF.cross_entropy(a, tt, weight=tw, reduction=reduction,
                                        label_smoothing=smoothing),
             [x], data, atol=1e-3, rtol=1e-3)
    _compare(lambda a: pf.nll_loss(a, pf.tensor(target), None, -100, reduction),
             lambda a: TF.nll_loss(a, tt, reduction=reduction), [x], data)


# -------------------------------------------------------------- conv / pool

@given(data=st.data())
def test_conv2d_grad(device, data):
    groups = data.draw(st.integers(1, 2), "groups")
    cin, cout = groups * data.draw(st.integers(1, 2)), groups * data.draw(st.integers(1, 2))
    k = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)))
    stride, pad = data.draw(st.integers(1, 2), "stride"), data.draw(st.integers(0, 1), "pad")
    size = (k[0] + data.draw(st.integers(0, 3)), k[1] + data.draw(st.integers(0, 3)))
    x = _values(data, (1, cin) + size, name="x")
    w = _values(data, (cout, cin // groups) + k, name="w")
    b = _values(data, (cout,), name="b")
    _compare(lambda t, ww, bb: pf.conv2d(t, ww, bb, stride, pad, 1, groups),
             lambda t, ww, bb: TF.conv2d(t, ww, bb, stride, pad, 1, groups), [x, w, b], data,
             atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("kind", ["max", "avg"])
@given(data=st.data())
def test_pool2d_grad(device, kind, data):
    k = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)))
    stride = data.draw(st.integers(1, 3), "stride")
    size = (k[0] + data.draw(st.integers(0, 3)), k[1] + data.draw(st.integers(0, 3)))
    x = _values(data, (1, 2) + size)
    if kind == "max":
        _compare(lambda t: pf.max_pool2d(t, k, stride), lambda t: TF.max_pool2d(t, k, stride),
                 [x], data)
    else:
        _compare(lambda t: pf.avg_pool2d(t, k, stride), lambda t: TF.avg_pool2d(t, k, stride),
                 [x], data)
