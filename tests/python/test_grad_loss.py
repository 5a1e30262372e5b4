"""Gradients of the losses: cross_entropy and nll_loss over every option
(class weights, ignore_index present in the targets, label smoothing, each
reduction, (C,), (N, C) and (N, C, d1, ...) scores), and the composite
mse_loss and bce_loss, against torch and finite differences on every
device."""
import numpy as np
import pytest

import pyflame as pf
from conftest import random_array
from gradcheck import check_finite_differences, check_vs_torch

torch = pytest.importorskip("torch")
F = torch.nn.functional

REDUCTIONS = ["none", "mean", "sum"]
# (scores shape, target shape)
CLASS_SHAPES = [((5,), ()), ((6, 5), (6,)), ((3, 5, 4), (3, 4)), ((2, 5, 3, 2), (2, 3, 2))]
LOW_PRECISION = [("float16", 2e-2, 2e-2), ("bfloat16", 8e-2, 8e-2)]


def class_case(scores_shape, target_shape, ignore_index, with_weight):
    """Scores, targets with ignore_index present (unless 0-d) and optional weights."""
    C = scores_shape[0] if len(scores_shape) == 1 else scores_shape[1]
    x = random_array(scores_shape)
    t = np.random.randint(0, C, size=target_shape).astype(np.int64)
    if t.ndim > 0:
        t.flat[1::3] = ignore_index
        t.flat[0] = 2 if ignore_index != 2 else 3  # at least one kept target
    arrays = [x, t]
    if with_weight:
        arrays.append(np.random.uniform(0.5, 2.0, size=C).astype(np.float32).astype(np.float64))
    return arrays


def weight_kw(args):
    return {"weight": args[0]} if args else {}


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.25])
@pytest.mark.parametrize("ignore_index", [-100, 1])
@pytest.mark.parametrize("with_weight", [False, True])
@pytest.mark.parametrize("shapes", CLASS_SHAPES)
def test_cross_entropy_grad(device, shapes, with_weight, ignore_index, smoothing, reduction):
    arrays = class_case(*shapes, ignore_index, with_weight)
    kw = dict(ignore_index=ignore_index, reduction=reduction, label_smoothing=smoothing)
    mask = [True, False, False][:len(arrays)]
    check_vs_torch(lambda x, t, *w: pf.cross_entropy(x, t, **weight_kw(w), **kw),
                   lambda x, t, *w: F.cross_entropy(x, t, **weight_kw(w), **kw),
                   arrays, device, grad_mask=mask)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("ignore_index", [-100, 1])
@pytest.mark.parametrize("with_weight", [False, True])
@pytest.mark.parametrize("shapes", CLASS_SHAPES)
def test_nll_loss_grad(device, shapes, with_weight, ignore_index, reduction):
    arrays = class_case(*shapes, ignore_index, with_weight)
    kw = dict(ignore_index=ignore_index, reduction=reduction)
    mask = [True, False, False][:len(arrays)]
    check_vs_torch(lambda x, t, *w: pf.nll_loss(x, t, **weight_kw(w), **kw),
                   lambda x, t, *w: F.nll_loss(x, t, **weight_kw(w), **kw),
                   arrays, device, grad_mask=mask)


def test_nll_loss_of_log_softmax_grad(device):
    x, t, w = class_case((4, 6, 3), (4, 3), -100, True)
    check_vs_torch(lambda a, b, c: pf.nll_loss(pf.log_softmax(a, 1), b, weight=c),
                   lambda a, b, c: F.nll_loss(F.log_softmax(a, 1), b, weight=c),
                   [x, t, w], device, grad_mask=[True, False, False])


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 1.0])
def test_cross_entropy_grad_smoothing_extremes(device, smoothing):
    x, t, w = class_case((7, 4), (7,), 0, True)
    for kw in [{}, {"weight": w}]:
        check_vs_torch(
            lambda a, b, *c: pf.cross_entropy(a, b, **weight_kw(c), ignore_index=0,
                                              label_smoothing=smoothing),
            lambda a, b, *c: F.cross_entropy(a, b, **weight_kw(c), ignore_index=0,
                                             label_smoothing=smoothing),
            [x, t] + ([w] if kw else []), device, grad_mask=[True, False, False])


def test_cross_entropy_grad_int32_targets_and_views(device):
    x = random_array((5, 4, 3))
    t = np.random.randint(0, 4, size=(5, 3)).astype(np.int32)
    # scores reach the loss through a transpose (a non-contiguous view)
    check_vs_torch(lambda a, b: pf.cross_entropy(a.transpose(0, 2, 1).transpose(0, 2, 1) * 1.5, b),
                   lambda a, b: F.cross_entropy(a * 1.5, b.long()), [x, t], device)
    check_vs_torch(lambda a, b: pf.cross_entropy(a.transpose(2, 1, 0), b.T, label_smoothing=0.3),
                   lambda a, b: F.cross_entropy(a.permute(2, 1, 0), b.long().T,
                                                label_smoothing=0.3),
                   [x, t], device)


@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_class_loss_finite_differences(device, loss):
    x, t, w = class_case((4, 5, 2), (4, 2), 3, True)
    kw = {"label_smoothing": 0.2} if loss == "cross_entropy" else {}
    f = getattr(pf, loss)
    for red in REDUCTIONS:
        check_finite_differences(lambda a, b, c: f(a, b, weight=c, ignore_index=3, reduction=red,
                                                   **kw),
                                 [x, t, w], device, grad_mask=[True, False, False])


@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_class_weights_are_not_differentiable(device, loss):
    x = pf.tensor(np.random.randn(3, 4).astype(np.float32), device=device, requires_grad=True)
    w = pf.tensor(np.ones(4, np.float32), device=device, requires_grad=True)
    t = pf.tensor(np.array([0, 1, 3]), device=device)
    for red in REDUCTIONS:
        out = getattr(pf, loss)(x, t, weight=w, reduction=red)
        with pytest.raises(ValueError, match="class weights are not differentiable"):
            out.sum().backward()
    # a detached weight is fine
    out = getattr(pf, loss)(x, t, weight=pf.detach(w))
    out.backward()
    assert x.grad is not None


def test_cross_entropy_grad_ignored_targets_get_zero(device):
    x = pf.tensor(np.random.randn(4, 3).astype(np.float32), device=device, requires_grad=True)
    t = pf.tensor(np.array([0, -100, 2, -100]), device=device)
    pf.cross_entropy(x, t, reduction="sum", label_smoothing=0.5).backward()
    g = x.grad.numpy()
    np.testing.assert_array_equal(g[[1, 3]], 0)
    np.testing.assert_allclose(g.sum(axis=1), 0, atol=1e-6)  # softmax rows minus a distribution


@pytest.mark.parametrize("dtype,rtol,atol", LOW_PRECISION)
def test_class_losses_grad_low_precision(device, dtype, rtol, atol):
    x, t, w = class_case((6, 5, 3), (6, 3), 1, True)
    for loss in ["cross_entropy", "nll_loss"]:
        kw = {"label_smoothing": 0.1} if loss == "cross_entropy" else {}
        check_vs_torch(lambda a, b, c: getattr(pf, loss)(a, b, weight=c, ignore_index=1, **kw),
                       lambda a, b, c: getattr(F, loss)(a, b, weight=c, ignore_index=1, **kw),
                       [x, t, w], device, grad_mask=[True, False, False], rtol=rtol, atol=atol,
                       dtype=dtype)


# ---------------------------------------------------------------- composites: mse, bce

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shapes", [((4, 5), (4, 5)), ((3, 4, 5), (5,)), ((2, 1, 3), (4, 1))])
def test_mse_loss_grad(device, shapes, reduction):
    a, b = random_array(shapes[0]), random_array(shapes[1])
    # torch warns when the shapes differ; the broadcast result is the same
    tf = (lambda x, y: F.mse_loss(*torch.broadcast_tensors(x, y), reduction=reduction))
    check_vs_torch(lambda x, y: pf.mse_loss(x, y, reduction), tf, [a, b], device)
    check_finite_differences(lambda x, y: pf.mse_loss(x, y, reduction), [a, b], device)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("with_weight", [False, True])
def test_bce_loss_grad(device, reduction, with_weight):
    p = random_array((4, 6), low=0.05, high=0.95)
    y = random_array((4, 6), low=0.0, high=1.0)
    arrays = [p, y] + ([random_array((6,), low=0.5, high=2.0)] if with_weight else [])
    check_vs_torch(lambda a, b, *w: pf.bce_loss(a, b, *w, reduction=reduction),
                   lambda a, b, *w: F.binary_cross_entropy(a, b, *w, reduction=reduction),
                   arrays, device, grad_mask=[True, False, False][:len(arrays)])
    check_finite_differences(lambda a, b, *w: pf.bce_loss(a, b, *w, reduction=reduction),
                             arrays, device, eps=1e-3, grad_mask=[True, False, False])


@pytest.mark.parametrize("dtype,rtol,atol", LOW_PRECISION)
def test_mse_bce_grad_low_precision(device, dtype, rtol, atol):
    a, b = random_array((4, 5)), random_array((4, 5))
    check_vs_torch(lambda x, y: pf.mse_loss(x, y), lambda x, y: F.mse_loss(x, y), [a, b], device,
                   rtol=rtol, atol=atol, dtype=dtype)
    p = random_array((4, 5), low=0.1, high=0.9)
    y = random_array((4, 5), low=0.0, high=1.0)
    check_vs_torch(lambda x, t: pf.bce_loss(x, t), lambda x, t: F.binary_cross_entropy(x, t),
                   [p, y], device, rtol=rtol, atol=atol, dtype=dtype, grad_mask=[True, False])


@pytest.mark.parametrize("with_weight", [False, True])
def test_mean_over_only_ignored_targets_has_zero_grad(device, with_weight):
    # the loss is NaN (0 / 0) as in PyTorch; the gradient is 0, also as in PyTorch
    x = random_array((3, 4))
    t = np.full((3,), 2, np.int64)
    arrays = [x, t] + ([random_array((4,), low=0.5, high=2.0)] if with_weight else [])
    for smoothing in [0.0, 0.3]:
        check_vs_torch(
            lambda a, b, *w: pf.cross_entropy(a, b, *w, ignore_index=2, label_smoothing=smoothing),
            lambda a, b, *w: F.cross_entropy(a, b, *w, ignore_index=2, label_smoothing=smoothing),
            arrays, device, grad_mask=[True, False, False])
    check_vs_torch(lambda a, b, *w: pf.nll_loss(a, b, *w, ignore_index=2),
                   lambda a, b, *w: F.nll_loss(a, b, *w, ignore_index=2),
                   arrays, device, grad_mask=[True, False, False])
