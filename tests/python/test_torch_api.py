"""PyTorch-style conveniences against PyTorch CPU on fresh random inputs:
tensor methods, pf.einsum/where/chunk, the torch.nn.functional additions and
their nn modules (values and gradients, dtypes, non-contiguous inputs, empty
tensors, NaN/Inf, bad input)."""
import math

import numpy as np
import pytest

import pyflame as pf
import pyflame.nn as nn
import pyflame.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

_TOL = {"float32": (1e-5, 1e-6), "float16": (2e-2, 2e-3), "bfloat16": (5e-2, 2e-2)}


def _pair(a, device, dtype="float32", requires_grad=False):
    x = pf.tensor(a, device=device).astype(dtype)
    t = torch.tensor(x.astype("float32").numpy(), requires_grad=requires_grad)
    if requires_grad:
        x.requires_grad = True
    return x, t


def _close(x, t, dtype="float32"):
    rtol, atol = _TOL[dtype]
    np.testing.assert_allclose(x.astype("float32").numpy(), t.detach().float().numpy(),
                               rtol=rtol, atol=atol)


# ---------------------------------------------------------------- tensor methods

def test_tensor_conversion_and_shape_methods(device):
    a = np.random.randn(2, 3, 4).astype(np.float32)
    x = pf.tensor(a, device=device)
    for name, dt in (("float", pf.float32), ("half", pf.float16), ("bfloat16", pf.bfloat16),
                     ("long", pf.int64), ("int", pf.int32), ("bool", pf.bool_)):
        assert getattr(x, name)().dtype == dt
    np.testing.assert_array_equal(x.long().numpy(), a.astype(np.int64))
    assert x.dim() == 3 and x.numel() == 24
    np.testing.assert_array_equal(x.view(6, 4).numpy(), a.reshape(6, 4))
    np.testing.assert_array_equal(x.permute(2, 0, 1).numpy(), a.transpose(2, 0, 1))
    np.testing.assert_array_equal(x.permute((1, 0, 2)).contiguous().numpy(), a.transpose(1, 0, 2))
    np.testing.assert_array_equal(x[:, :1].expand(-1, 5, -1).numpy(),
                                  torch.tensor(a)[:, :1].expand(-1, 5, -1).numpy())
    np.testing.assert_array_equal(x[0, 0].expand(3, 4).numpy(), np.broadcast_to(a[0, 0], (3, 4)))
    c = x.clone()
    assert c._node_id != x._node_id
    np.testing.assert_array_equal(c.numpy(), a)
    with pytest.raises(ValueError, match=r"\[permute\]"):
        x.permute(0, 1)
    with pytest.raises(ValueError, match=r"\[expand\]"):
        x.expand(4, 4)
    if hasattr(pf, "float64"):
        assert x.double().dtype == pf.float64


def test_clone_gradient():
    w = pf.tensor([1.0, 2.0], requires_grad=True)
    (w.clone() * 3).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3, 3])


def test_where_with_scalars(device):
    a = np.random.randn(3, 4).astype(np.float32)
    c = a > 0
    cond = pf.tensor(c, device=device)
    x = pf.tensor(a, device=device)
    np.testing.assert_array_equal(pf.where(cond, x, 0.0).numpy(), np.where(c, a, 0.0))
    np.testing.assert_array_equal(pf.where(cond, -1.0, x).numpy(), np.where(c, -1.0, a))
    r = pf.where(cond, 1.0, 0.0)
    assert r.dtype == pf.float32 and r.device == x.device
    np.testing.assert_array_equal(r.numpy(), c.astype(np.float32))
    assert pf.where(cond, 1, 0).dtype == pf.int64


def test_cat_and_chunk_match_torch(device):
    a = np.random.randn(7, 3).astype(np.float32)
    x, t = pf.tensor(a, device=device), torch.tensor(a)
    np.testing.assert_array_equal(pf.cat([x, x], 0).numpy(), torch.cat([t, t], 0).numpy())
    for n in (1, 2, 3, 7, 9):
        ours, theirs = pf.chunk(x, n), torch.chunk(t, n)
        assert len(ours) == len(theirs)
        for o, r in zip(ours, theirs):
            np.testing.assert_array_equal(o.numpy(), r.numpy())
    assert [p.shape for p in x.chunk(2, axis=1)] == [tuple(p.shape) for p in t.chunk(2, 1)]
    with pytest.raises(ValueError, match=r"\[chunk\]"):
        pf.chunk(x, 0)


# ---------------------------------------------------------------- einsum

_EINSUM = [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij->ji", [(3, 4)]), ("ii->i", [(4, 4)]), ("ii", [(4, 4)]), ("ij->", [(3, 4)]),
    ("i,i->", [(5,), (5,)]), ("i,j->ij", [(3,), (4,)]), ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ijk", [(2, 3, 4)]), ("ba,ab", [(3, 2), (2, 3)]), ("i...->...", [(3, 2, 2)]),
    ("ij,ij->i", [(3, 4), (3, 4)]), ("ij,kj", [(2, 3), (4, 3)]), ("iij->j", [(3, 3, 2)]),
    ("ij,j->ij", [(3, 1), (4,)]), ("bn,anm,bm->ba", [(2, 3), (5, 3, 4), (2, 4)]),
    ("i,i,i->", [(4,), (4,), (4,)]),
]


@pytest.mark.parametrize("eq,shapes", _EINSUM, ids=[e for e, _ in _EINSUM])
def test_einsum_matches_torch(device, eq, shapes):
    arrays = [np.random.randn(*s).astype(np.float32) for s in shapes]
    xs = [pf.tensor(a, device=device, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, ref = pf.einsum(eq, *xs), torch.einsum(eq, *ts)
    assert out.shape == tuple(ref.shape)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-4, atol=1e-4)
    w = np.asarray(np.random.randn(*ref.shape), dtype=np.float32)
    (out * pf.tensor(w, device=device)).sum().backward()
    (ref * torch.tensor(w)).sum().backward()
    for x, t in zip(xs, ts):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_einsum_ints_empty_and_errors(device):
    a = np.random.randint(-5, 5, (3, 4))
    b = np.random.randint(-5, 5, (4, 2))
    np.testing.assert_array_equal(pf.einsum("ij,jk->ik", pf.tensor(a, device=device),
                                            pf.tensor(b, device=device)).numpy(), a @ b)
    e = pf.einsum("ij,jk->ik", pf.zeros(0, 3, device=device), pf.zeros(3, 2, device=device))
    assert e.shape == (0, 2)
    x = pf.zeros(2, 3, device=device)
    for eq, ops in (("ij,jk->ik", [x, x]), ("ij->k", [x]), ("ijk->", [x]), ("ij", [x, x]),
                    ("i1->i", [x])):
        with pytest.raises(ValueError, match=r"\[einsum\]"):
            pf.einsum(eq, *ops)


# ---------------------------------------------------------------- activations

_ACT = [
    ("leaky_relu", lambda F_, x: F_.leaky_relu(x, 0.2)), ("elu", lambda F_, x: F_.elu(x, 1.3)),
    ("selu", lambda F_, x: F_.selu(x)), ("softplus", lambda F_, x: F_.softplus(x)),
    ("softplus_beta", lambda F_, x: F_.softplus(x, beta=2.0, threshold=5.0)),
    ("mish", lambda F_, x: F_.mish(x)), ("hardswish", lambda F_, x: F_.hardswish(x)),
    ("hardsigmoid", lambda F_, x: F_.hardsigmoid(x)), ("logsigmoid", lambda F_, x: F_.logsigmoid(x)),
    ("celu", lambda F_, x: F_.celu(x, 0.7)),
]


@pytest.mark.parametrize("name,f", _ACT, ids=[a[0] for a in _ACT])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_activation_values_and_grads(device, name, f, dtype):
    a = (np.random.randn(5, 6) * 4).astype(np.float32)
    a[0, :3] = [0.0, 1e-7, -1e-7]
    x, t = _pair(a, device, dtype, requires_grad=True)
    xt = x.T  # non-contiguous input
    out, ref = f(F, xt), f(TF, t.T)
    _close(out, ref, dtype)
    if dtype == "float32":
        w = np.asarray(np.random.randn(*ref.shape), dtype=np.float32)
        (out * pf.tensor(w, device=device)).sum().backward()
        (ref * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_activations_stable_at_extremes(device):
    a = np.array([-1e4, -100.0, -20.0, 0.0, 20.0, 100.0, 1e4, np.inf, -np.inf, np.nan],
                 np.float32)
    x, t = _pair(a, device, requires_grad=True)
    for name in ("softplus", "logsigmoid", "mish", "elu", "selu", "leaky_relu", "hardswish"):
        out, ref = getattr(F, name)(x), getattr(TF, name)(t)
        np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=name)
    xf, tf = _pair(a[:7], device, requires_grad=True)
    for name in ("softplus", "logsigmoid"):
        g = pf.autograd.grad(getattr(F, name)(xf).sum(), [xf])[0]
        tg = torch.autograd.grad(getattr(TF, name)(tf).sum(), [tf])[0]
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


def test_activation_modules_and_bad_input(device):
    a = np.random.randn(4, 3).astype(np.float32)
    x, t = _pair(a, device)
    for ours, theirs in ((nn.LeakyReLU(0.1), torch.nn.LeakyReLU(0.1)), (nn.ELU(0.5), torch.nn.ELU(0.5)),
                         (nn.SELU(), torch.nn.SELU()), (nn.Softplus(2.0, 3.0), torch.nn.Softplus(2.0, 3.0)),
                         (nn.Mish(), torch.nn.Mish()), (nn.Hardswish(), torch.nn.Hardswish()),
                         (nn.Hardsigmoid(), torch.nn.Hardsigmoid()), (nn.LogSigmoid(), torch.nn.LogSigmoid())):
        _close(ours(x), theirs(t))
    with pytest.raises(TypeError, match=r"\[leaky_relu\]"):
        F.leaky_relu(pf.tensor([1, 2], device=device))
    with pytest.raises(TypeError, match=r"\[elu\]"):
        F.elu(np.ones(3))
    assert F.softplus(pf.zeros(0, 3, device=device)).shape == (0, 3)


def test_one_hot(device):
    a = np.random.randint(0, 5, (3, 4))
    x = pf.tensor(a, device=device)
    np.testing.assert_array_equal(F.one_hot(x).numpy(), TF.one_hot(torch.tensor(a)).numpy())
    np.testing.assert_array_equal(F.one_hot(x, 7).numpy(), TF.one_hot(torch.tensor(a), 7).numpy())
    assert F.one_hot(x).dtype == pf.int64
    with pytest.raises(ValueError, match=r"\[one_hot\]"):
        F.one_hot(x, 3)
    with pytest.raises(ValueError, match=r"\[one_hot\]"):
        F.one_hot(pf.tensor([-1, 0], device=device))
    with pytest.raises(TypeError, match=r"\[one_hot\]"):
        F.one_hot(pf.zeros(3, device=device))


# ---------------------------------------------------------------- interpolate

_INTERP = [
    ("nearest", None, (7, 5), None), ("nearest", None, None, 2.0), ("nearest", None, None, (1.5, 0.5)),
    ("bilinear", False, (7, 9), None), ("bilinear", True, (7, 9), None),
    ("bilinear", False, None, 2.0), ("bilinear", True, None, 0.5), ("bilinear", False, (1, 1), None),
    ("bilinear", True, (1, 3), None),
]


@pytest.mark.parametrize("mode,ac,size,scale", _INTERP, ids=[str(i) for i in _INTERP])
def test_interpolate_matches_torch(device, mode, ac, size, scale):
    a = np.random.randn(2, 3, 4, 6).astype(np.float32)
    x, t = _pair(a, device, requires_grad=True)
    out = F.interpolate(x, size=size, scale_factor=scale, mode=mode, align_corners=ac)
    ref = TF.interpolate(t, size=size, scale_factor=scale, mode=mode, align_corners=ac)
    assert out.shape == tuple(ref.shape)
    _close(out, ref)
    w = np.asarray(np.random.randn(*ref.shape), dtype=np.float32)
    (out * pf.tensor(w, device=device)).sum().backward()
    (ref * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_interpolate_other_ranks_module_and_errors(device):
    a = np.random.randn(2, 3, 5).astype(np.float32)
    x, t = _pair(a, device)
    _close(F.interpolate(x, scale_factor=3, mode="linear", align_corners=False),
           TF.interpolate(t, scale_factor=3, mode="linear", align_corners=False))
    _close(F.interpolate(x, size=4), TF.interpolate(t, size=4))
    b = np.random.randn(1, 2, 3, 4, 5).astype(np.float32)
    y, u = _pair(b, device)
    _close(F.interpolate(y, size=(4, 5, 6), mode="trilinear", align_corners=True),
           TF.interpolate(u, size=(4, 5, 6), mode="trilinear", align_corners=True))
    z, v = _pair(np.random.randn(1, 2, 3, 3).astype(np.float32), device)
    _close(nn.Upsample(scale_factor=2, mode="bilinear")(z),
           torch.nn.Upsample(scale_factor=2, mode="bilinear")(v))
    h = pf.tensor(np.random.randn(1, 1, 4, 4), device=device).astype("float16")
    assert F.interpolate(h, scale_factor=2, mode="bilinear").dtype == pf.float16
    for kw in ({"size": 4, "scale_factor": 2}, {}, {"size": 4, "mode": "bicubic"},
               {"size": 4, "mode": "nearest", "align_corners": True}, {"size": (0, 3)},
               {"size": 4, "mode": "trilinear"}):
        with pytest.raises(ValueError, match=r"\[interpolate\]"):
            F.interpolate(z, **kw)
    with pytest.raises(ValueError, match=r"\[interpolate\]"):
        F.interpolate(pf.zeros(3, 4, device=device), size=2)


# ---------------------------------------------------------------- normalize, cosine

def test_normalize_and_cosine_similarity(device):
    a = np.random.randn(4, 5).astype(np.float32)
    a[1] = 0.0  # a zero row: finite values and gradients
    b = np.random.randn(1, 5).astype(np.float32)
    x, t = _pair(a, device, requires_grad=True)
    y, u = _pair(b, device, requires_grad=True)
    for p in (2.0, 1.0, 3.0, math.inf):
        _close(F.normalize(x, p=p, dim=1), TF.normalize(t, p=p, dim=1))
    _close(F.normalize(x.T, dim=0), TF.normalize(t.T, dim=0))
    out, ref = F.cosine_similarity(x, y), TF.cosine_similarity(t, u)
    _close(out, ref)
    (out.sum() + F.normalize(x).sum()).backward()
    (ref.sum() + TF.normalize(t).sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(y.grad.numpy(), u.grad.numpy(), rtol=1e-4, atol=1e-5)
    _close(nn.CosineSimilarity(dim=0)(x, x * 2), torch.nn.CosineSimilarity(dim=0)(t, t * 2))
    with pytest.raises(ValueError, match=r"\[cosine_similarity\]"):
        F.cosine_similarity(x, pf.zeros(3, 5, device=device))
    with pytest.raises(ValueError, match=r"\[normalize\]"):
        F.normalize(x, dim=2)


# ---------------------------------------------------------------- losses

_RED = ["mean", "sum", "none"]


@pytest.mark.parametrize("reduction", _RED)
def test_regression_losses(device, reduction):
    a = np.random.randn(6, 3).astype(np.float32) * 2
    b = np.random.randn(6, 3).astype(np.float32) * 2
    for ours, theirs in (
            (lambda x, y: F.smooth_l1_loss(x, y, reduction=reduction, beta=0.5),
             lambda x, y: TF.smooth_l1_loss(x, y, reduction=reduction, beta=0.5)),
            (lambda x, y: F.smooth_l1_loss(x, y, reduction=reduction, beta=0.0),
             lambda x, y: TF.smooth_l1_loss(x, y, reduction=reduction, beta=0.0)),
            (lambda x, y: F.huber_loss(x, y, reduction=reduction, delta=0.7),
             lambda x, y: TF.huber_loss(x, y, reduction=reduction, delta=0.7)),
            (lambda x, y: nn.SmoothL1Loss(reduction)(x, y), lambda x, y: torch.nn.SmoothL1Loss(reduction=reduction)(x, y)),
            (lambda x, y: nn.HuberLoss(reduction, 2.0)(x, y), lambda x, y: torch.nn.HuberLoss(reduction=reduction, delta=2.0)(x, y)),
            (lambda x, y: nn.L1Loss(reduction)(x, y), lambda x, y: torch.nn.L1Loss(reduction=reduction)(x, y))):
        x, t = _pair(a, device, requires_grad=True)
        y, u = _pair(b, device)
        out, ref = ours(x, y), theirs(t, u)
        _close(out, ref)
        out.sum().backward()
        ref.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides")
@pytest.mark.parametrize("reduction", ["mean", "sum", "none", "batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(device, reduction, log_target):
    logits = np.random.randn(4, 5).astype(np.float32)
    inp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    tgt = np.random.rand(4, 5).astype(np.float32)
    tgt[0, 0] = 0.0  # 0 * log 0 = 0
    tgt /= tgt.sum(1, keepdims=True)
    if log_target:
        tgt = np.log(np.maximum(tgt, 1e-6)).astype(np.float32)
    x, t = _pair(inp, device, requires_grad=True)
    y, u = _pair(tgt, device)
    out = F.kl_div(x, y, reduction=reduction, log_target=log_target)
    ref = TF.kl_div(t, u, reduction=reduction, log_target=log_target)
    _close(out, ref)
    out.sum().backward()
    ref.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)
    _close(nn.KLDivLoss(reduction, log_target)(x, y),
           torch.nn.KLDivLoss(reduction=reduction, log_target=log_target)(t, u))


@pytest.mark.parametrize("reduction", _RED)
def test_bce_with_logits(device, reduction):
    a = (np.random.randn(5, 3) * 5).astype(np.float32)
    a[0] = [-200.0, 200.0, 0.0]  # no overflow
    tgt = np.random.rand(5, 3).astype(np.float32)
    w = np.random.rand(3).astype(np.float32)
    pw = (np.random.rand(3) * 3).astype(np.float32)
    for kw in ({}, {"weight": w}, {"pos_weight": pw}, {"weight": w, "pos_weight": pw}):
        x, t = _pair(a, device, requires_grad=True)
        y, u = _pair(tgt, device)
        ours = {k: pf.tensor(v, device=device) for k, v in kw.items()}
        theirs = {k: torch.tensor(v) for k, v in kw.items()}
        out = F.binary_cross_entropy_with_logits(x, y, reduction=reduction, **ours)
        ref = TF.binary_cross_entropy_with_logits(t, u, reduction=reduction, **theirs)
        assert np.all(np.isfinite(out.numpy()))
        _close(out, ref)
        out.sum().backward()
        ref.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)
        _close(nn.BCEWithLogitsLoss(reduction=reduction, **ours)(x, y),
               torch.nn.BCEWithLogitsLoss(reduction=reduction, **theirs)(t, u))


def test_loss_errors(device):
    x = pf.zeros(3, device=device)
    with pytest.raises(ValueError, match=r"\[huber_loss\]"):
        F.huber_loss(x, x, reduction="avg")
    with pytest.raises(ValueError, match=r"\[binary_cross_entropy_with_logits\]"):
        F.binary_cross_entropy_with_logits(x, pf.zeros(2, 3, device=device))
    with pytest.raises(ValueError, match=r"\[smooth_l1_loss\]"):
        F.smooth_l1_loss(x, pf.zeros(2, device=device))
    with pytest.raises(TypeError, match=r"\[kl_div\]"):
        F.kl_div(x, [1, 2, 3])
    nan = F.smooth_l1_loss(pf.tensor([np.nan, 1.0], device=device), pf.zeros(2, device=device),
                           reduction="none").numpy()
    assert np.isnan(nan[0]) and nan[1] == 0.5


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_losses_broadcast_and_low_precision(device, dtype):
    a = np.random.randn(4, 3).astype(np.float32)
    b = np.random.randn(3).astype(np.float32)  # broadcasts over the rows
    x, t = _pair(a, device, dtype)
    y, u = _pair(b, device, dtype)
    for name, kw in (("smooth_l1_loss", {"beta": 0.5}), ("huber_loss", {"delta": 0.5}),
                     ("l1_loss", {}), ("kl_div", {})):
        _close(getattr(F, name)(x, y, **kw), getattr(TF, name)(t, u, **kw), dtype)
    z = (np.random.rand(4, 3) > 0.5).astype(np.float32)
    zz, zt = _pair(z, device, dtype)
    _close(F.binary_cross_entropy_with_logits(x, zz), TF.binary_cross_entropy_with_logits(t, zt),
           dtype)
    assert F.huber_loss(x, y).dtype == x.dtype
