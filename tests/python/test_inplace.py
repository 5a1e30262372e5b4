"""In-place updates: item assignment (every index kind, against NumPy), the
``_`` methods and ``+=`` (against PyTorch), views seeing writes, buffer
donation, and PyTorch's autograd rules (leaf writes, version counters)."""
import numpy as np
import pytest

import pyflame as pf

torch = pytest.importorskip("torch")


def _t(a, device, **kw):
    return pf.tensor(a, device=device, **kw)


# ---------------------------------------------------------------- setitem vs NumPy

_KEYS = [
    0, -1, (1, 2), slice(1, 3), (slice(None), 1), (Ellipsis, 0), (slice(None, None, 2), slice(1, None)),
    (None, 1), (1, slice(None, None, -1)), (slice(3, 1), 0),  # empty selection
]


@pytest.mark.parametrize("key", _KEYS, ids=[repr(k) for k in _KEYS])
def test_setitem_basic_matches_numpy(device, key):
    a = np.random.randn(4, 5, 3).astype(np.float32)
    x = _t(a, device)
    sel = a[key]
    v = np.random.randn(*np.shape(sel)).astype(np.float32)
    a[key] = v
    x[key] = _t(v, device)
    np.testing.assert_array_equal(x.numpy(), a)


def test_setitem_scalar_and_broadcast(device):
    a = np.random.randn(4, 5).astype(np.float32)
    x = _t(a, device)
    x[1] = 7.5
    a[1] = 7.5
    x[:, 2:4] = _t(np.array([1.0, 2.0], np.float32), device)  # broadcasts over rows
    a[:, 2:4] = [1.0, 2.0]
    x[...] = x * 2  # the new value reads the old version
    a[...] = a * 2
    np.testing.assert_array_equal(x.numpy(), a)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32", "int64", "bool"])
def test_setitem_dtypes(device, dtype):
    a = (np.random.randn(6, 4) * 4).astype(np.float32)
    x = _t(a, device).astype(dtype)
    ref = x.numpy().copy()
    x[2:4, 1] = 1
    ref[2:4, 1] = 1
    x[np.array([0, 5])] = 0
    ref[np.array([0, 5])] = 0
    assert x.dtype == getattr(pf, dtype if dtype != "bool" else "bool_")
    np.testing.assert_array_equal(x.numpy(), ref)


def test_setitem_float_into_int_truncates(device):
    x = _t(np.arange(4), device)
    x[1] = 2.7
    np.testing.assert_array_equal(x.numpy(), [0, 2, 2, 3])


@pytest.mark.parametrize("kind", ["list", "ndarray", "tensor", "negative", "2d", "mixed"])
def test_setitem_integer_index(device, kind):
    a = np.random.randn(5, 4).astype(np.float32)
    x = _t(a, device)
    key = {"list": [0, 3], "ndarray": np.array([4, 1]), "tensor": pf.tensor([2, 0], device=device),
           "negative": [-1, -5], "2d": np.array([[0, 1], [3, 4]]),
           "mixed": (np.array([0, 2]), slice(1, 3))}[kind]
    npkey = key.numpy() if isinstance(key, pf.Tensor) else key
    v = np.random.randn(*a[npkey].shape).astype(np.float32)
    a[npkey] = v
    x[key] = v
    np.testing.assert_array_equal(x.numpy(), a)
    np.testing.assert_array_equal(x[key].numpy(), a[npkey])  # advanced getitem too


def test_setitem_bool_mask(device):
    a = np.random.randn(4, 6).astype(np.float32)
    x = _t(a, device)
    m = a > 0
    x[_t(m, device)] = 0.0
    a[m] = 0.0
    np.testing.assert_array_equal(x.numpy(), a)
    rows = np.array([True, False, True, False])
    x[rows] = _t(np.ones((2, 6), np.float32), device)
    a[rows] = 1.0
    np.testing.assert_array_equal(x.numpy(), a)
    np.testing.assert_array_equal(x[_t(a > 0.5, device)].numpy(), a[a > 0.5])


def test_setitem_duplicate_indices_last_write_wins_on_cpu():
    x = pf.zeros(3)
    x[[0, 0, 2]] = pf.tensor([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(x.numpy(), [2.0, 0.0, 3.0])


def test_setitem_bad_index(device):
    x = _t(np.zeros((3, 2), np.float32), device)
    with pytest.raises(IndexError, match=r"\[setitem\]"):
        x[[0, 3]] = 1.0
    with pytest.raises(IndexError, match=r"\[setitem\]"):
        x[np.array([0.5])] = 1.0
    with pytest.raises(RuntimeError, match=r"\[setitem\].*shape"):
        x[0] = pf.ones(3, device=device)
    np.testing.assert_array_equal(x.numpy(), np.zeros((3, 2)))  # still usable, unchanged


def test_setitem_empty_tensor(device):
    x = pf.zeros(0, 3, device=device)
    x[:] = 1.0
    x[[]] = 2.0
    assert x.shape == (0, 3)


# ---------------------------------------------------------------- `_` methods vs torch

_METHODS = [
    ("add_", lambda o: (o,), {}), ("add_", lambda o: (o,), {"alpha": 2.5}),
    ("sub_", lambda o: (o,), {}), ("mul_", lambda o: (o,), {}), ("div_", lambda o: (o,), {}),
    ("clamp_", lambda o: (-0.5, 0.5), {}), ("zero_", lambda o: (), {}),
    ("fill_", lambda o: (3.25,), {}), ("copy_", lambda o: (o,), {}),
]


@pytest.mark.parametrize("name,args,kw", _METHODS, ids=[m[0] + str(m[2]) for m in _METHODS])
def test_inplace_methods_match_torch(device, name, args, kw):
    a = np.random.randn(3, 4).astype(np.float32)
    o = (np.random.rand(4).astype(np.float32) + 0.5)  # broadcasts over rows
    x, tx = _t(a, device), torch.tensor(a)
    pa = args(_t(o, device)) if name != "copy_" else (_t(o, device),)
    ta = tuple(torch.tensor(o) if isinstance(v, pf.Tensor) else v for v in pa)
    out = getattr(x, name)(*pa, **kw)
    getattr(tx, name)(*ta, **kw)
    assert out is x
    np.testing.assert_allclose(x.numpy(), tx.numpy(), rtol=1e-6, atol=1e-6)


def test_augmented_operators_are_in_place(device):
    a = np.random.randn(2, 3).astype(np.float32)
    x = _t(a, device)
    v = x[0]  # a view: sees the writes
    alias = x
    x += 1
    x *= 2
    x -= 0.5
    x /= 4
    assert alias is x
    np.testing.assert_allclose(x.numpy(), ((a + 1) * 2 - 0.5) / 4, rtol=1e-6)
    np.testing.assert_allclose(v.numpy(), x.numpy()[0], rtol=0)


def test_inplace_dtype_and_shape_rules(device):
    i = _t(np.arange(4), device)
    with pytest.raises(RuntimeError, match=r"\[add_\] result type float32 can't be cast"):
        i.add_(0.5)
    i.add_(2)
    np.testing.assert_array_equal(i.numpy(), [2, 3, 4, 5])
    x = pf.zeros(3, device=device)
    with pytest.raises(RuntimeError, match=r"\[add_\].*shape"):
        x.add_(pf.ones(2, 3, device=device))
    h = pf.ones(3, dtype="float16", device=device)
    h.mul_(pf.ones(3, device=device) * 3)  # float32 into float16: same kind, allowed
    assert h.dtype == pf.float16
    np.testing.assert_array_equal(h.numpy(), [3, 3, 3])


def test_masked_fill_scatter_index_add_match_torch(device):
    a = np.random.randn(4, 5).astype(np.float32)
    m = np.random.rand(4, 5) > 0.5
    x, tx = _t(a, device), torch.tensor(a)
    np.testing.assert_array_equal(x.masked_fill(_t(m, device), -1.0).numpy(),
                                  tx.masked_fill(torch.tensor(m), -1.0).numpy())
    idx = np.random.randint(0, 4, (3, 5))
    src = np.random.randn(3, 5).astype(np.float32)
    np.testing.assert_allclose(x.scatter_add(0, _t(idx, device), _t(src, device)).numpy(),
                               tx.scatter_add(0, torch.tensor(idx), torch.tensor(src)).numpy(),
                               rtol=1e-6, atol=1e-6)
    perm = np.stack([np.random.permutation(5)[:3] for _ in range(4)])  # unique per row
    src2 = np.random.randn(4, 3).astype(np.float32)
    np.testing.assert_array_equal(pf.scatter(x, 1, _t(perm, device), _t(src2, device)).numpy(),
                                  torch.scatter(tx, 1, torch.tensor(perm), torch.tensor(src2)).numpy())
    np.testing.assert_array_equal(x.scatter(1, _t(perm, device), value=2.0).numpy(),
                                  tx.scatter(1, torch.tensor(perm), 2.0).numpy())
    rows = np.array([0, 3, 0])
    s3 = np.random.randn(3, 5).astype(np.float32)
    np.testing.assert_allclose(
        x.index_add(0, _t(rows, device), _t(s3, device), alpha=2.0).numpy(),
        tx.index_add(0, torch.tensor(rows), torch.tensor(s3), alpha=2.0).numpy(), rtol=1e-6)
    x.index_add_(0, _t(rows, device), _t(s3, device))
    tx.index_add_(0, torch.tensor(rows), torch.tensor(s3))
    x.masked_fill_(_t(m, device), 0.0)
    tx.masked_fill_(torch.tensor(m), 0.0)
    np.testing.assert_allclose(x.numpy(), tx.numpy(), rtol=1e-6, atol=1e-6)


def test_scatter_errors(device):
    x = pf.zeros(3, 4, device=device)
    with pytest.raises(IndexError, match=r"\[scatter\].*out of bounds"):
        pf.scatter(x, 0, pf.tensor([[3, 0, 0, 0]], device=device), 1.0).numpy()
    with pytest.raises(ValueError, match=r"\[scatter_add\]"):
        pf.scatter_add(x, 0, pf.tensor([[0.5]], device=device), pf.ones(1, 1, device=device))
    with pytest.raises(IndexError, match=r"\[put\]"):
        pf.put(x, pf.tensor([12], device=device), 1.0).numpy()
    with pytest.raises(TypeError, match=r"\[masked_fill\]"):
        x.masked_fill(pf.ones(3, 4, device=device), 1.0)
    assert float(x.sum().item()) == 0.0


# ---------------------------------------------------------------- views see writes

def test_views_see_writes_both_ways(device):
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    x = _t(a, device)
    row, col, t, r = x[1], x[:, 2], x.T, x.view(2, 12)
    sub = x[1:3, ::2]
    x[1, 2] = -1.0
    a[1, 2] = -1.0
    col.mul_(10)  # through a view
    a[:, 2] *= 10
    sub.add_(100)  # strided view
    a[1:3, ::2] += 100
    t[5, 0] = 42.0  # through a transposed view
    a[0, 5] = 42.0
    np.testing.assert_array_equal(x.numpy(), a)
    np.testing.assert_array_equal(row.numpy(), a[1])
    np.testing.assert_array_equal(col.numpy(), a[:, 2])
    np.testing.assert_array_equal(t.numpy(), a.T)
    np.testing.assert_array_equal(r.numpy(), a.reshape(2, 12))
    np.testing.assert_array_equal(sub.numpy(), a[1:3, ::2])
    vv = x[2][1:4]  # a view of a view
    vv.zero_()
    a[2, 1:4] = 0
    np.testing.assert_array_equal(x.numpy(), a)
    for piece, ref in zip(x.chunk(2, axis=1), np.split(a, 2, axis=1)):
        np.testing.assert_array_equal(piece.numpy(), ref)


def test_view_requires_contiguous_and_clone_is_independent(device):
    x = pf.arange(6, dtype="float32", device=device).reshape(2, 3)
    with pytest.raises(RuntimeError, match=r"\[view\].*contiguous"):
        x.T.view(6)
    c = x.clone()
    c[0] = 0.0
    np.testing.assert_array_equal(x.numpy(), np.arange(6).reshape(2, 3))
    e = x[0:1].expand(4, 3)
    with pytest.raises(RuntimeError, match="expanded"):
        e.add_(1)


def _address(x):
    a = np.asarray(x.__array__(copy=False))  # a view: released before the next write
    return a.ctypes.data


def test_write_reuses_the_buffer_when_unobserved():
    x = pf.zeros(1000)
    x.eval()
    addr = _address(x)
    x[3] = 1.0
    x[10:12] = 2.0
    x.eval()
    assert _address(x) == addr  # donated: written in place
    v = x[0:2]  # views are derived again after a write: they do not block it
    x[4] = 5.0
    x.eval()
    assert _address(x) == addr
    before = x * 1  # reads the old version (not yet evaluated): the write copies
    x[5] = 3.0
    x.eval()
    assert _address(x) != addr
    np.testing.assert_array_equal(x.numpy()[[3, 4, 5, 10, 11]], [1, 5, 3, 2, 2])
    assert before.numpy()[5] == 0.0 and v.numpy()[1] == 0.0


# ---------------------------------------------------------------- autograd rules

def test_leaf_requiring_grad_cannot_be_written():
    w = pf.ones(3, requires_grad=True)
    for op in (lambda: w.add_(1), lambda: w.__setitem__(0, 2.0), lambda: w[1:].zero_()):
        with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
            op()
    with pf.no_grad():  # as optimizers do
        w.mul_(2)
    assert w.is_leaf and w.requires_grad
    np.testing.assert_array_equal(w.numpy(), [2, 2, 2])


def test_modified_saved_tensor_raises_at_backward():
    w = pf.tensor(np.random.randn(4).astype(np.float32), requires_grad=True)
    y = w * 2
    z = y.sin()  # sin's backward reads y
    y.add_(1)
    assert y._version == 1
    with pytest.raises(RuntimeError, match=r"\[backward\].*modified by an in-place operation"):
        z.sum().backward()
    # PyTorch agrees.
    tw = torch.tensor(w.numpy(), requires_grad=True)
    ty = tw * 2
    tz = ty.sin()
    ty.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        tz.sum().backward()


def test_gradient_through_writes_matches_torch():
    a = np.random.randn(4, 3).astype(np.float32)
    b = np.random.randn(3).astype(np.float32)
    w, v = pf.tensor(a, requires_grad=True), pf.tensor(b, requires_grad=True)
    tw, tv = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    for lib, W, V in ((pf, w, v), (torch, tw, tv)):
        h = W * 1.5
        h[1] = V * 3  # row 1 replaced: W gets no gradient there
        h[:, 0] += V[0]  # through a column view
        h.mul_(2.0)
        (h * h).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_write_then_read_view_inside_autograd_graph():
    a = np.random.randn(3, 4).astype(np.float32)
    w = pf.tensor(a, requires_grad=True)
    tw = torch.tensor(a, requires_grad=True)
    outs = []
    for W in (w, tw):
        h = W + 0
        col = h[:, 1]
        col.mul_(3)  # h changes too
        outs.append((h * h).sum())
    outs[0].backward()
    outs[1].backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5)


def test_inplace_on_empty_and_nonfinite(device):
    e = pf.zeros(0, 4, device=device)
    e.add_(1).mul_(2).zero_()
    assert e.shape == (0, 4)
    a = np.array([1.0, np.nan, np.inf, -np.inf], np.float32)
    x = _t(a, device)
    x.mul_(2)
    x.clamp_(-5, 5)
    t = torch.tensor(a)
    t.mul_(2)
    t.clamp_(-5, 5)
    np.testing.assert_array_equal(x.numpy(), t.numpy())


def test_views_through_shape_ops_see_writes(device):
    a = np.random.randn(2, 3, 4).astype(np.float32)
    x = _t(a, device)
    flat = x.flatten()
    sq = x[:, :1].squeeze(1)
    un = x.unsqueeze(0)
    sw = x.swapaxes(0, 2)
    pieces = pf.split(x, 2, axis=2)
    pieces[1].fill_(9.0)
    a[:, :, 2:] = 9.0
    sw[0, 1, 1] = -3.0  # x[1, 1, 0]
    a[1, 1, 0] = -3.0
    for view, ref in ((flat, a.reshape(-1)), (sq, a[:, 0]), (un, a[None]), (sw, a.swapaxes(0, 2)),
                      (x, a)):
        np.testing.assert_array_equal(view.numpy(), ref)


def test_aliases_see_writes(device):
    x = pf.zeros(2, 3, device=device)
    same = x.squeeze()  # nothing to squeeze: the same storage
    c = x.contiguous()  # already row-major: an alias, as in PyTorch
    copy = x.T.contiguous()  # a copy: independent
    same.add_(1)
    c[0, 0] = 5.0
    np.testing.assert_array_equal(x.numpy(), [[5, 1, 1], [1, 1, 1]])
    np.testing.assert_array_equal(same.numpy(), x.numpy())
    np.testing.assert_array_equal(copy.numpy(), np.zeros((3, 2)))
