"""Losses against torch.nn.functional in float64 (mse_loss also against NumPy),
on every device, with every reduction and the bad-input cases."""
import numpy as np
import pytest

import pyflame as pf
from conftest import FLOAT_DTYPES, assert_close, make_tensor, random_array, rounded, t64, torch_or_skip

REDUCTIONS = ["none", "mean", "sum"]


def _tidx(t):
    torch, _ = torch_or_skip()
    return torch.from_numpy(np.asarray(t, dtype=np.int64).copy())


def _ref_ce(x, t, w=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    _, F = torch_or_skip()
    return F.cross_entropy(t64(x), _tidx(t), weight=t64(w), ignore_index=ignore_index,
                           reduction=reduction, label_smoothing=label_smoothing).numpy()


def _ref_nll(x, t, w=None, ignore_index=-100, reduction="mean"):
    _, F = torch_or_skip()
    return F.nll_loss(t64(x), _tidx(t), weight=t64(w), ignore_index=ignore_index,
                      reduction=reduction).numpy()


def _ref_bce(p, y, w=None, reduction="mean"):
    _, F = torch_or_skip()
    wt = None if w is None else t64(np.broadcast_to(w, np.shape(p)))
    return F.binary_cross_entropy(t64(p), t64(y), weight=wt, reduction=reduction).numpy()


F32 = dict(rtol=1e-5, atol=1e-5)


def _rnd(want, dtype):
    """The reference rounded to ``dtype`` (keeping 0-d shapes)."""
    return rounded(np.asarray(want), dtype).reshape(np.shape(want))


def _tol(dtype):
    return F32 if dtype == "float32" else {}


def _targets(shape, C, ignore_frac=0.0, ignore_index=-100):
    t = np.random.randint(0, C, size=shape).astype(np.int64)
    if ignore_frac:
        t[np.random.rand(*shape) < ignore_frac] = ignore_index
    return t


# --------------------------------------------------------------------- mse_loss

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 5), ()])
def test_mse_loss(device, reduction, shape):
    a, b = random_array(shape, "float32"), random_array(shape, "float32")
    _, F = torch_or_skip()
    want = F.mse_loss(t64(a), t64(b), reduction=reduction).numpy()
    assert_close(pf.mse_loss(make_tensor(a), make_tensor(b), reduction), want, "float32",
                 device=device, **F32)


def test_mse_loss_broadcast_and_numpy_target(device):
    a, b = random_array((4, 5), "float32"), random_array((5,), "float32")
    want = ((a - b) ** 2)
    assert_close(pf.mse_loss(make_tensor(a), make_tensor(b), "none"), want, "float32", **F32)
    # A float64 NumPy target is a float64 tensor (as torch.tensor makes it): float64 result.
    assert_close(pf.mse_loss(make_tensor(a), b, "sum"), want.sum(), "float64", **F32)
    assert_close(pf.mse_loss(make_tensor(a), 0.5), ((a - 0.5) ** 2).mean(), "float32", **F32)
    # Non-contiguous operands.
    assert_close(pf.mse_loss(make_tensor(a).T, make_tensor(a[::-1]).T, "none"),
                 (a.T - a[::-1].T) ** 2, "float32", **F32)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_mse_loss_dtypes(device, dtype):
    a, b = random_array((6, 7), dtype), random_array((6, 7), dtype)
    for reduction in REDUCTIONS:
        want = ((a - b) ** 2)
        want = want.mean() if reduction == "mean" else want.sum() if reduction == "sum" else want
        assert_close(pf.mse_loss(make_tensor(a, dtype), make_tensor(b, dtype), reduction),
                     _rnd(want, dtype), dtype, device=device, **_tol(dtype))


def test_mse_loss_errors_and_empty(device):
    with pytest.raises(ValueError, match=r"^\[mse_loss\] reduction must be 'none', 'mean' or 'sum', "
                                         r"got 'avg'"):
        pf.mse_loss(pf.zeros(3), pf.zeros(3), "avg")
    with pytest.raises(ValueError, match=r"^\[mse_loss\] shapes \(3,\) and \(4,\) cannot be broadcast"):
        pf.mse_loss(pf.zeros(3), pf.zeros(4))
    with pytest.raises(ValueError, match=r"^\[mse_loss\] expected floating-point tensors"):
        pf.mse_loss(pf.zeros(3, dtype=pf.int64), pf.zeros(3, dtype=pf.int64))
    assert np.isnan(pf.mse_loss(pf.zeros(0), pf.zeros(0)).item())
    assert pf.mse_loss(pf.zeros(0), pf.zeros(0), "sum").item() == 0.0


# ---------------------------------------------------------------- cross_entropy

# Class counts reaching the GPU's thread-per-row (C <= 32) and block-per-row kernels.
@pytest.mark.parametrize("C", [1, 3, 32, 33, 100, 1000, 5000])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_classes(device, C, reduction):
    N = 6
    x = random_array((N, C), "float32", -4, 4)
    t = _targets((N,), C)
    out = pf.cross_entropy(make_tensor(x), make_tensor(t), reduction=reduction)
    assert_close(out, _ref_ce(x, t, reduction=reduction), "float32", device=device, **F32)


@pytest.mark.parametrize("shape", [(2, 4, 3, 5), (2, 40, 6), (3, 5, 1), (1, 300, 2, 2)])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_spatial(device, shape, reduction):
    x = random_array(shape, "float32")
    t = _targets((shape[0],) + shape[2:], shape[1], ignore_frac=0.2)
    w = random_array((shape[1],), "float32", 0.1, 2)
    out = pf.cross_entropy(make_tensor(x), make_tensor(t), make_tensor(w), reduction=reduction)
    assert_close(out, _ref_ce(x, t, w, reduction=reduction), "float32", device=device, **F32)


def test_cross_entropy_unbatched(device):
    x = random_array((7,), "float32")
    for reduction in REDUCTIONS:
        out = pf.cross_entropy(make_tensor(x), pf.tensor(3), reduction=reduction)
        assert_close(out, _ref_ce(x, np.int64(3), reduction=reduction), "float32", **F32)
    assert_close(pf.cross_entropy(make_tensor(x), 2), _ref_ce(x, np.int64(2)), "float32", **F32)


@pytest.mark.parametrize("C", [5, 300])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_weight_and_ignore_index(device, C, reduction):
    x = random_array((12, C), "float32")
    w = random_array((C,), "float32", 0.0, 3)
    t = _targets((12,), C, ignore_frac=0.3)
    out = pf.cross_entropy(make_tensor(x), make_tensor(t), make_tensor(w), reduction=reduction)
    assert_close(out, _ref_ce(x, t, w, reduction=reduction), "float32", device=device, **F32)
    # An ignore_index inside [0, C): that class's targets drop out.
    t2 = _targets((12,), C)
    t2[:3] = 1
    out = pf.cross_entropy(make_tensor(x), make_tensor(t2), None, ignore_index=1, reduction=reduction)
    assert_close(out, _ref_ce(x, t2, ignore_index=1, reduction=reduction), "float32", **F32)


@pytest.mark.parametrize("smoothing", [0.1, 0.5, 1.0])
@pytest.mark.parametrize("C", [4, 257])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_label_smoothing(device, smoothing, C, weighted):
    x = random_array((9, C), "float32")
    w = random_array((C,), "float32", 0.2, 2) if weighted else None
    t = _targets((9,), C, ignore_frac=0.25)
    for reduction in REDUCTIONS:
        out = pf.cross_entropy(make_tensor(x), make_tensor(t), None if w is None else make_tensor(w),
                               reduction=reduction, label_smoothing=smoothing)
        want = _ref_ce(x, t, w, reduction=reduction, label_smoothing=smoothing)
        assert_close(out, want, "float32", device=device, **F32)


def test_cross_entropy_label_smoothing_spatial(device):
    x = random_array((2, 6, 4), "float32")
    t = _targets((2, 4), 6, ignore_frac=0.2)
    w = random_array((6,), "float32", 0.2, 2)
    for reduction in REDUCTIONS:
        out = pf.cross_entropy(make_tensor(x), make_tensor(t), make_tensor(w), reduction=reduction,
                               label_smoothing=0.2)
        assert_close(out, _ref_ce(x, t, w, reduction=reduction, label_smoothing=0.2), "float32", **F32)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("C", [10, 2000])
def test_cross_entropy_dtypes(device, dtype, C):
    x = random_array((5, C), dtype, -3, 3)
    t = _targets((5,), C)
    for reduction in REDUCTIONS:
        out = pf.cross_entropy(make_tensor(x, dtype), make_tensor(t), reduction=reduction,
                               label_smoothing=0.1)
        want = _ref_ce(x, t, reduction=reduction, label_smoothing=0.1)
        assert_close(out, _rnd(want, dtype), dtype, device=device, **_tol(dtype))


def test_cross_entropy_int32_targets_and_non_contiguous(device):
    x = random_array((8, 6, 3), "float32")
    t = _targets((8, 3), 6, ignore_frac=0.2)
    xt = make_tensor(x)
    out = pf.cross_entropy(xt, make_tensor(t, "int32"), reduction="none")
    assert_close(out, _ref_ce(x, t, reduction="none"), "float32", **F32)
    # Non-contiguous logits and targets.
    xv = np.ascontiguousarray(x.transpose(2, 1, 0))  # (3, 6, 8)
    tv = np.ascontiguousarray(t.T)
    out = pf.cross_entropy(pf.transpose(xt, (2, 1, 0)), make_tensor(t).T, reduction="sum")
    assert_close(out, _ref_ce(xv, tv, reduction="sum"), "float32", **F32)
    out = pf.cross_entropy(xt[::2, :, 0], make_tensor(t)[::2, 0])
    assert_close(out, _ref_ce(x[::2, :, 0], t[::2, 0]), "float32", **F32)


def test_cross_entropy_large_logits_stable(device):
    x = random_array((4, 50), "float32", -3, 3)
    x[0] += 1e4
    x[1] -= 1e4
    x[2, 7] = 3e4
    t = _targets((4,), 50)
    t[2] = 3
    x = rounded(x, "float32")
    for s in (0.0, 0.1):
        out = pf.cross_entropy(make_tensor(x), make_tensor(t), reduction="none", label_smoothing=s)
        assert np.isfinite(out.numpy()).all()
        assert_close(out, _ref_ce(x, t, reduction="none", label_smoothing=s), "float32",
                     rtol=1e-5, atol=2e-3)


def test_cross_entropy_nonfinite(device):
    x = random_array((4, 40), "float32")
    x[0, 5] = np.nan
    x[1, :] = -np.inf
    x[1, 2] = 0.0  # one finite class
    x[2, 9] = -np.inf
    t = np.array([1, 2, 9, 0])
    out = pf.cross_entropy(make_tensor(x), make_tensor(t), reduction="none").numpy()
    want = _ref_ce(x, t, reduction="none")
    assert np.isnan(out[0]) and np.isinf(out[2])
    np.testing.assert_allclose(out[[1, 3]], want[[1, 3]], rtol=1e-5, atol=1e-5)


def test_cross_entropy_all_ignored(device):
    x = random_array((3, 4), "float32")
    t = np.full((3,), -100)
    assert np.isnan(pf.cross_entropy(make_tensor(x), make_tensor(t)).item())
    assert pf.cross_entropy(make_tensor(x), make_tensor(t), reduction="sum").item() == 0.0
    assert_close(pf.cross_entropy(make_tensor(x), make_tensor(t), reduction="none"), np.zeros(3),
                 "float32")
    assert np.isnan(pf.cross_entropy(pf.zeros((0, 4)), pf.zeros(0, dtype=pf.int64)).item())


@pytest.mark.parametrize("bad", [4, -1, 1000, -101])
@pytest.mark.parametrize("C", [4, 300])
def test_cross_entropy_out_of_range_target(device, bad, C):
    x = make_tensor(random_array((5, C), "float32"))
    t = _targets((5,), C)
    bad = C if bad == 4 else bad
    t[3] = bad
    for dt in ("int64", "int32"):
        for reduction in REDUCTIONS:
            with pytest.raises(IndexError, match=rf"^\[cross_entropy\] target {bad} is out of range "
                                                 rf"for {C} classes"):
                pf.cross_entropy(x, make_tensor(t, dt), reduction=reduction).numpy()
    with pytest.raises(IndexError, match=r"^\[cross_entropy\] target"):
        pf.cross_entropy(x, make_tensor(t), label_smoothing=0.1, ignore_index=0).item()
    # The process stays usable: the same inputs with a valid target.
    t[3] = 0
    assert_close(pf.cross_entropy(x, make_tensor(t)), _ref_ce(x.numpy(), t), "float32", **F32)


def test_cross_entropy_errors(device):
    x, t = pf.zeros((4, 3)), pf.zeros(4, dtype=pf.int64)
    with pytest.raises(ValueError, match=r"^\[cross_entropy\] reduction must be 'none', 'mean' or "
                                         r"'sum', got 'batchmean'"):
        pf.cross_entropy(x, t, reduction="batchmean")
    with pytest.raises(ValueError, match=r"^\[cross_entropy\] target must hold integer class indices"):
        pf.cross_entropy(x, pf.zeros(4))
    with pytest.raises(ValueError, match=r"^\[cross_entropy\] target must hold integer class indices"):
        pf.cross_entropy(x, pf.zeros(4, dtype=pf.bool_))
    with pytest.raises(ValueError, match=r"^\[cross_entropy\] expected target of shape \(4,\) for "
                                         r"logits of shape \(4,3\), got \(5,\)"):
        pf.cross_entropy(x, pf.zeros(5, dtype=pf.int64))
    with pytest.raises(ValueError, match=r"^\[cross_entropy\] expected target of shape \(4,2\)"):
        pf.cross_entropy(pf.zeros((4, 3, 2)), t)
    with pytest.raises(ValueError, match=r"^\[cross_entropy\] expected target of shape \(\)"):
        pf.cross_entropy(pf.zeros(3), t)
    with pytest.raises(ValueError, match=r"^\[cross_entropy\] logits must be \(C,\), \(N, C\)"):
        pf.cross_entropy(pf.tensor(1.0), pf.tensor(0))
    with pytest.raises(ValueError, match=r"^\[cross_entropy\] expected floating-point logits, got int64"):
        pf.cross_entropy(pf.zeros((4, 3), dtype=pf.int64), t)
    with pytest.raises(ValueError, match=r"^\[cross_entropy\] weight must have shape \(3,\)"):
        pf.cross_entropy(x, t, pf.ones(4))
    with pytest.raises(ValueError, match=r"^\[cross_entropy\] weight must be a floating-point"):
        pf.cross_entropy(x, t, pf.ones(3, dtype=pf.int32))
    for s in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match=r"^\[cross_entropy\] label_smoothing must be in \[0, 1\]"):
            pf.cross_entropy(x, t, label_smoothing=s)
    with pytest.raises(ValueError, match=r"^\[cross_entropy\] logits of shape \(4,0\) have no classes"):
        pf.cross_entropy(pf.zeros((4, 0)), t)


def test_loss_device_mismatch(gpu_device):
    x = pf.zeros((4, 3), device=gpu_device)
    t = pf.zeros(4, dtype=pf.int64, device="cpu")
    with pytest.raises(ValueError, match=r"^\[cross_entropy\] tensors are on different devices"):
        pf.cross_entropy(x, t)
    with pytest.raises(ValueError, match=r"^\[nll_loss\] tensors are on different devices"):
        pf.nll_loss(x, t.to(gpu_device), pf.ones(3, device="cpu"))
    # NumPy and list targets follow the logits' device.
    assert_close(pf.cross_entropy(x, [0, 1, 2, 0], reduction="none"), np.full(4, np.log(3.0)),
                 "float32", device=gpu_device)


# ------------------------------------------------------------------- nll_loss

@pytest.mark.parametrize("shape", [(6, 5), (3, 40, 2), (2, 3, 2, 2), (7,)])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss(device, shape, reduction, weighted):
    C = shape[1] if len(shape) > 1 else shape[0]
    lp = random_array(shape, "float32", -6, 0)
    tshape = (shape[0],) + shape[2:] if len(shape) > 1 else ()
    t = _targets(tshape, C, ignore_frac=0.2) if tshape else np.int64(1)
    w = random_array((C,), "float32", 0.1, 2) if weighted else None
    out = pf.nll_loss(make_tensor(lp), make_tensor(t), None if w is None else make_tensor(w),
                      reduction=reduction)
    assert_close(out, _ref_nll(lp, t, w, reduction=reduction), "float32", device=device, **F32)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_nll_loss_dtypes_and_composition(device, dtype):
    x = random_array((6, 9), dtype)
    t = _targets((6,), 9, ignore_frac=0.2, ignore_index=4)
    lp = pf.log_softmax(make_tensor(x, dtype), -1)
    for reduction in REDUCTIONS:
        got = pf.nll_loss(lp, make_tensor(t, "int32"), ignore_index=4, reduction=reduction)
        want = _ref_ce(x, t, ignore_index=4, reduction=reduction)
        assert_close(got, _rnd(want, dtype), dtype, device=device,
                     **(F32 if dtype == "float32" else dict(rtol=2e-3, atol=2e-3)
                        if dtype == "float16" else {}))


def test_nll_loss_non_contiguous(device):
    lp = random_array((5, 4, 3), "float32", -5, 0)
    t = _targets((3, 5), 4)
    got = pf.nll_loss(pf.transpose(make_tensor(lp), (2, 1, 0)), make_tensor(t), reduction="none")
    assert_close(got, _ref_nll(np.ascontiguousarray(lp.transpose(2, 1, 0)), t, reduction="none"),
                 "float32", **F32)


def test_nll_loss_errors(device):
    lp = make_tensor(random_array((4, 3), "float32", -3, 0))
    for bad in (3, -1, 99):
        with pytest.raises(IndexError, match=rf"^\[nll_loss\] target {bad} is out of range for 3 "
                                             r"classes \(expected a value in \[0, 3\) or ignore_index "
                                             r"-100\)"):
            pf.nll_loss(lp, pf.tensor([0, bad, 1, 2]), reduction="sum").item()
    # ignore_index makes the value legal.
    want = _ref_nll(lp.numpy(), np.array([0, -1, 1, 2]), ignore_index=-1)
    assert_close(pf.nll_loss(lp, pf.tensor([0, -1, 1, 2]), ignore_index=-1), want, "float32", **F32)
    with pytest.raises(ValueError, match=r"^\[nll_loss\] reduction must be"):
        pf.nll_loss(lp, pf.tensor([0, 1, 1, 2]), reduction="mean ")
    with pytest.raises(ValueError, match=r"^\[nll_loss\] expected floating-point log_probs"):
        pf.nll_loss(pf.zeros((4, 3), dtype=pf.int32), pf.tensor([0, 1, 1, 2]))
    with pytest.raises(ValueError, match=r"^\[nll_loss\] expected target of shape \(4,\) for "
                                         r"log_probs of shape \(4,3\), got \(1,4\)"):
        pf.nll_loss(lp, pf.tensor([[0, 1, 1, 2]]))
    with pytest.raises(ValueError, match=r"^\[nll_loss\] weight must have shape \(3,\)"):
        pf.nll_loss(lp, pf.tensor([0, 1, 1, 2]), pf.ones((1, 3)))


# ------------------------------------------------------------------- bce_loss

def _probs(shape, dtype="float32"):
    p = random_array(shape, dtype, 0.0, 1.0)
    flat = p.reshape(-1)
    if flat.size >= 4:
        flat[:4] = [0.0, 1.0, 1e-30, 1.0 - 1e-3]  # logs clamp at -100
    return rounded(p, dtype)


@pytest.mark.parametrize("shape", [(10,), (4, 6), (2, 3, 4), ()])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_loss(device, shape, reduction):
    p = _probs(shape)
    y = random_array(shape, "float32", 0.0, 1.0)  # soft labels
    if y.ndim:
        y.reshape(-1)[: min(4, y.size)] = [0.0, 1.0, 1.0, 0.0][: min(4, y.size)]
    out = pf.bce_loss(make_tensor(p, "float32"), make_tensor(y, "float32"), reduction=reduction)
    assert_close(out, _ref_bce(p, y, reduction=reduction), "float32", device=device, **F32)


@pytest.mark.parametrize("wshape", [(6,), (4, 6), (4, 1), ()])
def test_bce_loss_weight_broadcast(device, wshape):
    p, y = _probs((4, 6)), (np.random.rand(4, 6) < 0.5).astype(np.float64)
    w = random_array(wshape, "float32", 0, 2)
    for reduction in REDUCTIONS:
        out = pf.bce_loss(make_tensor(p, "float32"), make_tensor(y, "float32"), make_tensor(w, "float32"),
                          reduction=reduction)
        assert_close(out, _ref_bce(p, y, w, reduction=reduction), "float32", **F32)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_bce_loss_dtypes_and_non_contiguous(device, dtype):
    p, y = _probs((5, 8), dtype), rounded(np.random.rand(5, 8), dtype)
    for reduction in REDUCTIONS:
        out = pf.bce_loss(make_tensor(p, dtype).T, make_tensor(y, dtype).T, reduction=reduction)
        want = _ref_bce(p.T, y.T, reduction=reduction)
        assert_close(out, _rnd(want, dtype), dtype, device=device, **_tol(dtype))


def test_bce_loss_errors(device):
    p = pf.full((2, 3), 0.5)
    with pytest.raises(ValueError, match=r"^\[bce_loss\] target of shape \(3,\) must have the input's "
                                         r"shape \(2,3\)"):
        pf.bce_loss(p, pf.zeros(3))
    with pytest.raises(ValueError, match=r"^\[bce_loss\] shapes \(2,\) and \(2,3\) cannot be broadcast"):
        pf.bce_loss(p, pf.zeros((2, 3)), pf.ones(2))
    with pytest.raises(ValueError, match=r"^\[bce_loss\] weight of shape \(3,2,3\) does not broadcast"):
        pf.bce_loss(p, pf.zeros((2, 3)), pf.ones((3, 2, 3)))
    with pytest.raises(ValueError, match=r"^\[bce_loss\] expected floating-point probabilities"):
        pf.bce_loss(pf.zeros((2, 3), dtype=pf.int64), pf.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"^\[bce_loss\] reduction must be"):
        pf.bce_loss(p, pf.zeros((2, 3)), reduction=None)
    assert_close(pf.bce_loss(p, pf.ones((2, 3))), np.log(2.0), "float32", **F32)


def test_bce_loss_outside_unit_interval_raises(device):
    # As PyTorch: a probability outside [0, 1] (or NaN) is an error when the
    # loss is evaluated, not a NaN loss; in-range values still match.
    for bad in (1.5, -0.5, float("nan")):
        out = pf.bce_loss(pf.tensor([bad, 0.5]), pf.tensor([1.0, 0.0]), reduction="none")
        with pytest.raises(ValueError, match=r"^\[bce_loss\] all elements of input should be between 0 and 1"):
            out.numpy()
    got = pf.bce_loss(pf.tensor([0.0, 1.0, 0.5]), pf.tensor([1.0, 1.0, 0.0]), reduction="none").numpy()
    np.testing.assert_allclose(got, [100.0, 0.0, np.log(2.0)], rtol=1e-6)
