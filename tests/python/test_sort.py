"""Sort-family ops (argmax/argmin, sort/argsort, topk, cumsum, multinomial)
and slice_update against NumPy and PyTorch's CPU implementation."""
import numpy as np
import pytest

import pyflame as pf
from conftest import (ALL_DTYPES, FLOAT_DTYPES, NUMPY_OF, assert_close, make_tensor,
                      random_array, rounded)

torch = pytest.importorskip("torch")


def _raises(exc, fn, call, *args, **kwargs):
    with pytest.raises(exc) as info:
        out = call(*args, **kwargs)
        for t in out if isinstance(out, tuple) else (out,):
            if isinstance(t, pf.Tensor):
                t.numpy()
    msg = str(info.value).strip("'\"")
    assert msg.startswith(f"[{fn}]"), msg
    return msg


def _ref(x, dtype):
    """x as the values a pf tensor of dtype holds (NumPy, for references)."""
    return np.asarray(x).astype(NUMPY_OF[dtype]) if dtype in ("bool", "int32", "int64") \
        else np.asarray(x, dtype=np.float64)


def _with_nans(x, frac=0.1):
    x = np.array(x, dtype=np.float64)
    x[np.random.rand(*x.shape) < frac] = np.nan
    return x


# ---------------------------------------------------------------- argmax / argmin

@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax_argmin(device, dtype, axis, keepdim):
    # Few distinct values: many ties, which take the first index.
    x = random_array((5, 37), dtype, -2, 2)
    t = make_tensor(x, dtype, device)
    ref = _ref(x, dtype)
    for fn, np_fn in ((pf.argmax, np.argmax), (pf.argmin, np.argmin)):
        exp = np_fn(ref, axis=axis, keepdims=keepdim)
        assert_close(fn(t, axis, keepdim), exp, "int64", device=device)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_argmax_nan_counts_as_max(device, dtype):
    x = rounded(_with_nans(np.random.randn(6, 300), 0.01), dtype)
    x[2, :] = np.nan
    x[3, 7] = x[3, 250] = np.nan
    t = make_tensor(x, dtype, device)
    assert_close(pf.argmax(t, 1), np.argmax(x, 1), "int64")
    assert_close(pf.argmin(t, 1), np.argmin(x, 1), "int64")  # NumPy: the first NaN too
    assert_close(pf.argmax(t, 0), np.argmax(x, 0), "int64")
    tt = torch.from_numpy(x.astype(np.float32))
    got = pf.argmax(t, 1).numpy()
    assert np.array_equal(got[np.isnan(x).any(1)], tt.argmax(1).numpy()[np.isnan(x).any(1)])


def test_argmax_long_rows_views_and_0d(device):
    x = np.random.randn(3, 70000).astype(np.float32)
    t = pf.tensor(x, device=device)
    assert_close(pf.argmax(t, -1), np.argmax(x, -1), "int64")
    assert_close(pf.argmin(t.T, 0), np.argmin(x.T, 0), "int64")  # a transposed view
    assert_close(pf.argmax(t), np.argmax(x), "int64")
    s = pf.tensor(np.float32(3.0), device=device)
    assert_close(pf.argmax(s), np.int64(0), "int64")
    assert_close(pf.argmax(s, 0), np.int64(0), "int64")


def test_tensor_methods(device):
    x = np.random.randn(4, 6).astype(np.float32)
    t = pf.tensor(x, device=device)
    assert_close(t.argmax(1), np.argmax(x, 1), "int64")
    assert_close(t.argmin(), np.argmin(x), "int64")
    assert_close(t.argsort(0), np.argsort(x, 0, kind="stable"), "int64")
    assert_close(t.sort(1)[0], np.sort(x, 1), "float32")
    assert_close(t.topk(2)[1], np.argsort(-x, 1, kind="stable")[:, :2], "int64")
    assert_close(t.cumsum(1), np.cumsum(x.astype(np.float64), 1), "float32", rtol=1e-5, atol=1e-5)


def test_arg_reduce_errors(device):
    t = pf.zeros(3, 0, device=device)
    _raises(ValueError, "argmax", pf.argmax, t, 1)
    _raises(ValueError, "argmin", pf.argmin, t)
    _raises(ValueError, "argmax", pf.argmax, pf.zeros(3, device=device), 1)


# ---------------------------------------------------------------- sort / argsort

def _torch_sort(x, axis, descending):
    v, i = torch.sort(torch.from_numpy(np.ascontiguousarray(x)), dim=axis, descending=descending,
                      stable=True)
    return v.numpy(), i.numpy()


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_argsort(device, dtype, axis, descending):
    x = random_array((6, 45), dtype, -3, 3)   # ties everywhere
    ref = _ref(x, dtype)
    t = make_tensor(x, dtype, device)
    tref = ref.astype(np.int64) if dtype == "bool" else ref
    ev, ei = _torch_sort(tref, axis, descending)
    v, i = pf.sort(t, axis, descending=descending)
    assert_close(i, ei, "int64", device=device)
    assert_close(pf.argsort(t, axis, descending=descending), ei, "int64")
    assert_close(v, ev.astype(NUMPY_OF[dtype]) if dtype == "bool" else ev, dtype)
    if not descending:
        assert_close(i, np.argsort(ref, axis=axis, kind="stable"), "int64")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("n", [1, 7, 1000, 5000, 70000])
def test_sort_nan_and_long_rows(device, dtype, n):
    # 5000 and 70000 entries exceed the GPU's shared-memory sort.
    x = rounded(_with_nans(np.random.randn(2, n)), dtype)
    t = make_tensor(x, dtype, device)
    for desc in (False, True):
        ev, ei = _torch_sort(x, -1, desc)
        v, i = pf.sort(t, -1, descending=desc)
        assert_close(i, ei, "int64")
        assert_close(v, ev, dtype)
    assert_close(pf.argsort(t), np.argsort(x, -1, kind="stable"), "int64")


def test_sort_views_zero_size_and_0d(device):
    x = np.random.randn(4, 5, 6).astype(np.float32)
    t = pf.tensor(x, device=device).transpose(2, 0, 1)
    ref = x.transpose(2, 0, 1)
    assert_close(pf.argsort(t, 1), np.argsort(ref, 1, kind="stable"), "int64")
    v, i = pf.sort(pf.zeros(3, 0, device=device))
    assert v.shape == (3, 0) and i.shape == (3, 0) and str(i.dtype) == "int64"
    v, i = pf.sort(pf.tensor(np.float32(2.5), device=device))
    assert v.item() == 2.5 and i.item() == 0
    _raises(ValueError, "argsort", pf.argsort, t, 3)


def test_sort_gradient(device):
    x = np.random.randn(4, 9)
    t = pf.tensor(x.astype(np.float32), device=device, requires_grad=True)
    w = np.random.randn(4, 9)
    v, _ = pf.sort(t, 1, descending=True)
    (v * pf.tensor(w.astype(np.float32), device=device)).sum().backward()
    tt = torch.tensor(x, requires_grad=True)
    (torch.sort(tt, 1, descending=True)[0] * torch.from_numpy(w)).sum().backward()
    assert_close(t.grad, tt.grad.numpy(), "float32", rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- topk

@pytest.mark.parametrize("dtype", ["int32", "int64", "float16", "bfloat16", "float32"])
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("axis", [0, -1])
def test_topk_distinct(device, dtype, largest, axis):
    n = 40
    x = np.stack([np.random.permutation(n) - 20 for _ in range(5)], 1 if axis == 0 else 0)
    t = make_tensor(x, dtype, device)
    for k in (0, 1, 5, n):
        ev, ei = torch.topk(torch.from_numpy(x.astype(np.float64)), k, dim=axis, largest=largest)
        v, i = pf.topk(t, k, axis, largest=largest)
        assert_close(i, ei.numpy(), "int64", device=device)
        assert_close(v, ev.numpy().astype(NUMPY_OF[dtype]), dtype)


def test_topk_ties_keep_lower_index(device):
    x = np.random.randint(0, 3, size=(4, 50)).astype(np.float32)
    v, i = pf.topk(pf.tensor(x, device=device), 10)
    order = np.argsort(-x, axis=1, kind="stable")[:, :10]
    assert_close(i, order, "int64")
    assert_close(v, np.take_along_axis(x, order, 1), "float32")


def test_topk_nan_long_rows_gradient_errors(device):
    x = np.random.randn(2, 33000).astype(np.float32)
    x[0, 17] = np.nan
    v, i = pf.topk(pf.tensor(x, device=device), 8)
    ev, ei = torch.topk(torch.from_numpy(x), 8)
    assert_close(i, ei.numpy(), "int64")
    assert_close(v, ev.numpy(), "float32")
    xs = np.random.randn(3, 10)
    t = pf.tensor(xs.astype(np.float32), device=device, requires_grad=True)
    pf.topk(t, 4)[0].sum().backward()
    tt = torch.tensor(xs, requires_grad=True)
    torch.topk(tt, 4)[0].sum().backward()
    assert_close(t.grad, tt.grad.numpy(), "float32")
    _raises(ValueError, "topk", pf.topk, pf.zeros(3, 4, device=device), 5)
    _raises(ValueError, "topk", pf.topk, pf.zeros(3, 4, device=device), -1)


# ---------------------------------------------------------------- cumsum

@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_cumsum(device, dtype, axis):
    x = random_array((3, 4, 50), dtype, -3, 3)
    t = make_tensor(x, dtype, device)
    out = pf.cumsum(t, axis)
    if dtype in ("bool", "int32", "int64"):
        assert_close(out, np.cumsum(x.astype(np.int64), axis), "int64", device=device)
    else:
        exp = np.cumsum(x, axis)
        tol = {"float32": 1e-5, "float16": 3e-2, "bfloat16": 3e-1}[dtype]
        assert_close(out, rounded(exp, dtype), dtype, rtol=tol, atol=tol)


def test_cumsum_dtype_views_long_rows_and_0d(device):
    x = np.random.randint(-5, 6, size=(3, 5)).astype(np.int32)
    t = pf.tensor(x, device=device)
    assert_close(pf.cumsum(t, 1, dtype=pf.float32), np.cumsum(x, 1).astype(np.float32), "float32")
    assert_close(pf.cumsum(t, 0, dtype="int32"), np.cumsum(x, 0).astype(np.int32), "int32")
    y = np.random.rand(2, 20000).astype(np.float32)
    ty = pf.tensor(y, device=device)
    assert_close(pf.cumsum(ty, -1), np.cumsum(y.astype(np.float64), -1), "float32", rtol=1e-4, atol=1e-3)
    assert_close(pf.cumsum(ty.T, 0), np.cumsum(y.T.astype(np.float64), 0), "float32", rtol=1e-4, atol=1e-3)
    yi = np.random.randint(-9, 10, size=(2, 5000))
    assert_close(pf.cumsum(pf.tensor(yi, device=device), -1), np.cumsum(yi, -1), "int64")
    yh = rounded(np.random.rand(3, 2000), "float16")
    assert_close(pf.cumsum(make_tensor(yh, "float16", device), 1), rounded(np.cumsum(yh, 1), "float16"),
                 "float16", rtol=2e-3, atol=1e-2)
    assert_close(pf.cumsum(pf.tensor(np.float32(2), device=device), 0), np.float32(2), "float32")
    z = pf.cumsum(pf.zeros(0, 3, device=device), 0)
    assert z.shape == (0, 3)
    _raises(ValueError, "cumsum", pf.cumsum, t, 2)
    _raises(ValueError, "cumsum", pf.cumsum, t, 0, dtype="bool")


@pytest.mark.parametrize("shape", [(3, 7), (2, 3000)])   # long rows: the GPU's block scan
def test_cumsum_gradient(device, shape):
    x = np.random.randn(*shape)
    w = np.random.randn(*shape)
    for axis in (0, 1):
        t = pf.tensor(x.astype(np.float32), device=device, requires_grad=True)
        (pf.cumsum(t, axis) * pf.tensor(w.astype(np.float32), device=device)).sum().backward()
        tt = torch.tensor(x, requires_grad=True)
        (torch.cumsum(tt, axis) * torch.from_numpy(w)).sum().backward()
        assert_close(t.grad, tt.grad.numpy(), "float32", rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- multinomial

@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_multinomial_seeded_and_distribution(device, dtype):
    p = np.array([0.1, 0.0, 0.4, 0.2, 0.3])
    t = make_tensor(np.tile(p, (4, 1)), dtype, device)
    pf.manual_seed(7)
    a = pf.multinomial(t, 5000, replacement=True).numpy()
    pf.manual_seed(7)
    b = pf.multinomial(t, 5000, replacement=True).numpy()
    assert a.dtype == np.int64 and a.shape == (4, 5000)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, pf.multinomial(t, 5000, replacement=True).numpy())
    freq = np.bincount(a.ravel(), minlength=5) / a.size
    assert freq[1] == 0
    np.testing.assert_allclose(freq, rounded(p, dtype) / rounded(p, dtype).sum(), atol=0.015)


def test_multinomial_without_replacement(device):
    w = np.random.rand(6, 50).astype(np.float32)
    w[:, ::3] = 0.0   # 17 zero entries per row: at most 33 distinct draws
    t = pf.tensor(w, device=device)
    s = pf.multinomial(t, 33).numpy()
    for row, ws in zip(s, w):
        assert len(set(row.tolist())) == 33
        assert (ws[row] > 0).all()
    one = pf.multinomial(pf.tensor(w[0], device=device), 3)
    assert one.shape == (3,)
    # Heavier entries come first more often: the first draw follows p.
    p = np.array([0.7, 0.2, 0.1], dtype=np.float32)
    first = pf.multinomial(pf.tensor(np.tile(p, (4000, 1)), device=device), 2).numpy()[:, 0]
    np.testing.assert_allclose(np.bincount(first, minlength=3) / 4000, p, atol=0.03)


def _last_probabilities(w):
    """P(category i is drawn last) when all are drawn in sequence without
    replacement: the integral over t of w_i e^{-w_i t} prod_{j != i} (1 - e^{-w_j t})
    (the exponential race's law, which is the sequential draws')."""
    t = np.linspace(0, 60 / w.min(), 20001)[:, None]
    log_cdf = np.log(np.maximum(-np.expm1(-w * t), 1e-300))
    others = np.exp(log_cdf.sum(1, keepdims=True) - log_cdf)
    trapezoid = getattr(np, "trapezoid", None) or np.trapz  # renamed in NumPy 2
    return trapezoid(w * np.exp(-w * t) * others, t[:, 0], axis=0)


def test_multinomial_without_replacement_law(device):
    # More than 32 draws take the race: its law against the exact one of the
    # sequential draws (PyTorch's), on 20000 rows of 40 categories.
    rng = np.random.RandomState(5)
    w = np.concatenate([[0.0, 0.0], rng.rand(38) * 4 + 0.2])  # 38 positive weights
    rows = 20000
    pf.manual_seed(9)
    d = pf.multinomial(pf.tensor(np.tile(w, (rows, 1)).astype(np.float32), device=device), 37).numpy()
    assert d.shape == (rows, 37) and not np.isin(d, [0, 1]).any()
    assert all(len(set(r)) == 37 for r in d[:100].tolist())
    w = w.astype(np.float32).astype(np.float64)
    W = w.sum()
    np.testing.assert_allclose(np.bincount(d[:, 0], minlength=40) / rows, w / W, atol=0.01)
    second = (w[:, None] / W * w[None, :] / (W - w[:, None]))  # first i, then j
    np.fill_diagonal(second, 0)
    np.testing.assert_allclose(np.bincount(d[:, 1], minlength=40) / rows, second.sum(0), atol=0.01)
    left_out = sum(range(2, 40)) - d.sum(1)  # the one positive category not drawn
    last = np.zeros(40)
    last[2:] = _last_probabilities(w[2:])
    assert abs(last.sum() - 1) < 1e-4
    np.testing.assert_allclose(np.bincount(left_out, minlength=40) / rows, last, atol=0.012)


def test_multinomial_errors(device):
    ok = pf.tensor(np.array([0.5, 0.5], dtype=np.float32), device=device)
    _raises(ValueError, "multinomial", pf.multinomial, ok, 3)
    _raises(ValueError, "multinomial", pf.multinomial, ok, 0)
    _raises(ValueError, "multinomial", pf.multinomial, pf.zeros(2, 2, 2, device=device))
    _raises(ValueError, "multinomial", pf.multinomial, pf.tensor([1, 2], device=device))
    for bad in ([0.5, -0.1], [0.5, np.nan], [np.inf, 1.0], [0.0, 0.0]):
        _raises(RuntimeError, "multinomial", pf.multinomial,
                pf.tensor(np.array(bad, dtype=np.float32), device=device), 1, True)
    _raises(RuntimeError, "multinomial", pf.multinomial,
            pf.tensor(np.array([0.5, 0.0, 0.5], dtype=np.float32), device=device), 3)
    race = np.ones((3, 40), dtype=np.float32)  # 33 draws or more: the race
    race[1, :8] = 0
    _raises(RuntimeError, "multinomial", pf.multinomial, pf.tensor(race, device=device), 33)  # fewer non-zero
    race[1] = 0
    _raises(RuntimeError, "multinomial", pf.multinomial, pf.tensor(race, device=device), 33)  # none
    for bad in (-0.1, np.nan, np.inf):
        race[1, 5] = bad
        _raises(RuntimeError, "multinomial", pf.multinomial, pf.tensor(race, device=device), 33)
    assert_close(pf.argmax(ok), np.int64(0), "int64")   # still usable


def test_multinomial_same_on_cpu_and_gpu(gpu_device):
    w = np.random.rand(8, 3000).astype(np.float32) ** 4
    for dtype in FLOAT_DTYPES:
        for repl, n in ((True, 64), (False, 16), (False, 700)):  # 700: the race
            pf.manual_seed(11)
            a = pf.multinomial(make_tensor(w, dtype, "cpu"), n, replacement=repl).numpy()
            pf.manual_seed(11)
            b = pf.multinomial(make_tensor(w, dtype, gpu_device), n, replacement=repl).numpy()
            assert np.array_equal(a, b), (dtype, repl)


# ---------------------------------------------------------------- slice_update

@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_slice_update_values(device, dtype, axis):
    c = random_array((4, 5, 6), dtype)
    shape = [4, 5, 6]
    shape[axis] = 2
    u = random_array(shape, dtype)
    start = np.random.randint(0, [4, 5, 6][axis] - 1)
    exp = c.copy()
    idx = [slice(None)] * 3
    idx[axis] = slice(start, start + 2)
    exp[tuple(idx)] = u
    got = pf.slice_update(make_tensor(c, dtype, device), make_tensor(u, dtype, device), start, axis)
    assert_close(got, _ref(exp, dtype), dtype, device=device)


class _Memory:
    """(reset peak, bytes in use, peak bytes) of the device's allocator."""

    def __init__(self, device):
        if device == "cpu":
            cpu = pf.backend.cpu
            self.reset, self.used, self.peak = (cpu.reset_peak_memory_stats, cpu.memory_allocated,
                                                cpu.max_memory_allocated)
        else:
            mm = pf.backend.rocm.get_memory_manager()
            self.reset = mm.reset_stats
            self.used = lambda: mm.get_stats()["total_allocated"]
            self.peak = lambda: mm.get_stats()["peak_allocated"]


def test_slice_update_in_place_when_unshared(device):
    B, H, L, D = 1, 2, 4096, 64       # 2 MiB caches
    cache = pf.zeros(B, H, L, D, device=device)
    ref = np.zeros((B, H, L, D), np.float32)
    pf.eval(cache)
    nbytes = B * H * L * D * 4
    mem = _Memory(device)
    for pos in range(3):
        u = np.random.randn(B, H, 1, D).astype(np.float32)
        ref[:, :, pos:pos + 1] = u
        tu = pf.tensor(u, device=device)
        pf.eval(tu)
        pf.synchronize()
        mem.reset()
        before = mem.used()
        cache = pf.slice_update(cache, tu, pos, 2)   # the old version is dropped
        pf.eval(cache)
        assert mem.peak() - before < nbytes // 2     # no second cache-sized buffer was needed
    assert_close(cache, ref, "float32")


def test_slice_update_copies_when_shared(device):
    c = np.random.randn(3, 8).astype(np.float32)
    old = pf.tensor(c, device=device)
    view = old[1]
    pf.eval(old, view)
    new = pf.slice_update(old, pf.ones(3, 2, device=device), 4, 1)
    exp = c.copy()
    exp[:, 4:6] = 1
    assert_close(new, exp, "float32")
    assert_close(old, c, "float32")       # the old version is unchanged
    assert_close(view, c[1], "float32")
    # Two consumers of one version in one evaluation: neither sees the other's write.
    a = pf.slice_update(old, pf.zeros(3, 1, device=device), 0, 1)
    b = pf.slice_update(old, pf.full((3, 1), 5.0, device=device), 0, 1)
    ea, eb = c.copy(), c.copy()
    ea[:, 0], eb[:, 0] = 0, 5
    pf.eval(a, b)
    assert_close(a, ea, "float32")
    assert_close(b, eb, "float32")


def test_slice_update_gradient_and_errors(device):
    c = np.random.randn(3, 6)
    u = np.random.randn(3, 2)
    w = np.random.randn(3, 6)
    tc = pf.tensor(c.astype(np.float32), device=device, requires_grad=True)
    tu = pf.tensor(u.astype(np.float32), device=device, requires_grad=True)
    (pf.slice_update(tc, tu, 3, 1) * pf.tensor(w.astype(np.float32), device=device)).sum().backward()
    gc = w.copy()
    gc[:, 3:5] = 0
    assert_close(tc.grad, gc, "float32")
    assert_close(tu.grad, w[:, 3:5], "float32")
    cache = pf.zeros(3, 6, device=device)
    _raises(ValueError, "slice_update", pf.slice_update, cache, pf.zeros(3, 2, device=device), 5, 1)
    _raises(ValueError, "slice_update", pf.slice_update, cache, pf.zeros(3, 2, device=device), -1, 1)
    _raises(ValueError, "slice_update", pf.slice_update, cache, pf.zeros(2, 2, device=device), 0, 1)
    _raises(ValueError, "slice_update", pf.slice_update, cache, pf.zeros(3, 2, device=device), 0, 2)


# ---------------------------------------------------------------- attention offset, rope frequencies

def _np_attention(q, k, v, offset):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    Sq, Sk = s.shape[-2:]
    mask = np.arange(Sk)[None, :] <= np.arange(Sq)[:, None] + offset
    s = np.where(mask, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("Sq", [1, 5, 24])
def test_attention_causal_offset(device, Sq):
    q = np.random.randn(2, 4, Sq, 16)
    k = np.random.randn(2, 4, 40, 16)
    v = np.random.randn(2, 4, 40, 16)
    k[:, :, 30:] = 1e3   # past the last query's position: must not be read
    off = 6
    f = lambda a: pf.tensor(a.astype(np.float32), device=device)  # noqa: E731
    out = pf.scaled_dot_product_attention(f(q), f(k), f(v), causal=True, causal_offset=off)
    assert_close(out, _np_attention(q, k, v, off), "float32", rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError):
        pf.scaled_dot_product_attention(f(q), f(k), f(v), causal=True, causal_offset=-1)


@pytest.mark.parametrize("Sq", [1, 5, 24])
def test_attention_tensor_causal_offset(device, Sq):
    """A 0-d tensor offset is read at evaluation: one compiled function serves
    every offset (a replayed decode step), with grouped heads, in both the
    fused (Sq <= 16 on the GPU) and composed paths, and differentiates."""
    rng = np.random.default_rng(Sq)
    q = rng.standard_normal((2, 4, Sq, 16))
    k = rng.standard_normal((2, 2, 40, 16))
    v = rng.standard_normal((2, 2, 40, 16))
    kr, vr = np.repeat(k, 2, 1), np.repeat(v, 2, 1)
    f = lambda a: pf.tensor(a.astype(np.float32), device=device)  # noqa: E731
    step = pf.compile(lambda q, k, v, o: pf.scaled_dot_product_attention(q, k, v, causal=True,
                                                                         causal_offset=o))
    for off in (6, 0, 16):
        k[:, :, Sq + off:] = 1e3   # past the last query's position: must not be read
        kr = np.repeat(k, 2, 1)
        o = pf.tensor(off, dtype=pf.int64, device=device)
        assert_close(step(f(q), f(k), f(v), o), _np_attention(q, kr, vr, off), "float32", rtol=1e-4, atol=1e-4)
        o32 = pf.tensor(off, dtype=pf.int32, device=device)
        out = pf.scaled_dot_product_attention(f(q), f(k), f(v), causal=True, causal_offset=o32)
        assert_close(out, _np_attention(q, kr, vr, off), "float32", rtol=1e-4, atol=1e-4)
    # Gradients match the int offset's.
    grads = []
    for off in (pf.tensor(3, dtype=pf.int64, device=device), 3):
        tq = f(q).requires_grad_()
        pf.scaled_dot_product_attention(tq, f(k), f(v), causal=True, causal_offset=off).sum().backward()
        grads.append(tq.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"\[scaled_dot_product_attention\] a tensor causal_offset needs"):
        pf.scaled_dot_product_attention(f(q), f(k), f(v), causal_offset=o)
    with pytest.raises(ValueError, match=r"0-d integer tensor"):
        pf.scaled_dot_product_attention(f(q), f(k), f(v), causal=True, causal_offset=pf.tensor([1.0]))


def test_rope_inv_freq(device):
    x = np.random.randn(2, 3, 7, 8)
    inv = np.random.rand(4) + 0.01
    out = pf.rope(pf.tensor(x.astype(np.float32), device=device), offset=3,
                  inv_freq=inv.astype(np.float32).tolist())
    ang = (np.arange(7) + 3)[:, None] * inv.astype(np.float32)[None, :]
    c, s = np.cos(ang), np.sin(ang)
    a, b = x[..., :4], x[..., 4:]
    exp = np.concatenate([a * c - b * s, b * c + a * s], -1)
    assert_close(out, exp, "float32", rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError):
        pf.rope(pf.tensor(x.astype(np.float32), device=device), inv_freq=[1.0, 2.0])
