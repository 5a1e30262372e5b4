"""The Array API namespace (pyflame.array_api) against NumPy on every device:
inspection, creation, manipulation, indexing, statistics, searching, sets,
sorting, utility and core linear algebra functions; non-contiguous views,
empty tensors, NaN and bad input."""
import math

import numpy as np
import pytest

import pyflame as pf
from conftest import random_array

xp = pf.array_api


def T(a, device):
    return xp.asarray(np.asarray(a), device=device)


def close(t, want, rtol=2e-6, atol=1e-6):
    got = t.numpy() if isinstance(t, pf.Tensor) else np.asarray(t)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


# ---------------------------------------------------------------- namespace

def test_namespace_and_info(device):
    x = pf.ones(2, 3, device=device)
    assert x.__array_namespace__() is xp
    assert x.__array_namespace__(api_version="2023.12") is xp
    with pytest.raises(ValueError, match=r"\[__array_namespace__\]"):
        x.__array_namespace__(api_version="1999.01")
    info = xp.__array_namespace_info__()
    assert info.default_dtypes()["real floating"] == xp.float32
    assert info.default_dtypes()["indexing"] == xp.int64
    assert "cpu" in info.devices() and info.capabilities()["data-dependent shapes"]
    assert set(info.dtypes(kind="integral").values()) >= {xp.int32, xp.int64}
    assert xp.e == math.e and xp.newaxis is None and math.isnan(xp.nan)
    assert x.device == x.to_device(x.device).device
    assert x.mT.shape == (3, 2)


def test_dtype_functions():
    assert xp.isdtype(xp.float32, "real floating") and not xp.isdtype(xp.int32, "real floating")
    assert xp.isdtype(xp.int64, ("bool", "integral")) and xp.isdtype(xp.bool, xp.bool)
    with pytest.raises(ValueError, match=r"\[isdtype\]"):
        xp.isdtype(xp.float32, "floats")
    assert xp.result_type(xp.int32, xp.int64) == xp.int64
    assert xp.result_type(xp.float16, xp.float32) == xp.float32
    assert xp.result_type(xp.int32, 1) == xp.int32 and xp.result_type(xp.int32, 1.0) == xp.float32
    assert xp.can_cast(xp.int32, xp.int64) and not xp.can_cast(xp.int64, xp.int32)
    assert xp.can_cast(xp.bool, xp.int32) and not xp.can_cast(xp.float32, xp.int64)
    f = xp.finfo(xp.float32)
    assert f.bits == 32 and f.eps == np.finfo(np.float32).eps and f.max == np.finfo(np.float32).max
    assert xp.finfo(xp.bfloat16).eps == 2.0 ** -7
    assert xp.iinfo(xp.int32).min == -2**31 and xp.iinfo(xp.int64).bits == 64
    with pytest.raises(ValueError, match=r"\[finfo\]"):
        xp.finfo(xp.int32)


def test_astype_and_asarray(device):
    x = T([1.5, -2.5, 3.0], device)
    assert xp.astype(x, xp.int32).dtype == xp.int32
    np.testing.assert_array_equal(xp.astype(x, xp.int32).numpy(), [1, -2, 3])
    assert xp.astype(x, xp.float32, copy=False) is x
    assert xp.asarray([1, 2]).dtype == xp.int64 and xp.asarray([1.0]).dtype == xp.float32
    assert xp.asarray(True).dtype == xp.bool
    y = xp.asarray(x, copy=True)
    assert y is not x
    close(y, x.numpy())
    with pytest.raises(ValueError, match=r"\[asarray\]"):
        xp.asarray(x, dtype=xp.int32, copy=False)


# ---------------------------------------------------------------- creation

def test_creation(device):
    close(xp.linspace(0, 1, 5, device=device), np.linspace(0, 1, 5, dtype=np.float32))
    close(xp.linspace(-3, 7, 11, endpoint=False, device=device), np.linspace(-3, 7, 11, endpoint=False))
    assert xp.linspace(2, 5, 7, device=device).numpy()[-1] == 5.0
    assert xp.linspace(0, 1, 0, device=device).shape == (0,)
    close(xp.eye(3, 4, k=1, device=device), np.eye(3, 4, k=1))
    close(xp.full_like(T([[1, 2]], device), 7), np.full((1, 2), 7))
    assert xp.empty((2, 0), device=device).shape == (2, 0)
    assert xp.empty_like(T([1.0], device)).dtype == xp.float32
    a = random_array((4, 5))
    for k in (-2, 0, 1, 7):
        close(xp.tril(T(a, device), k=k), np.tril(a, k))
        close(xp.triu(T(a, device), k=k), np.triu(a, k))
    b = random_array((2, 3, 4))
    close(xp.tril(T(b, device)), np.tril(b))
    for indexing in ("xy", "ij"):
        got = xp.meshgrid(T([1, 2, 3], device), T([4, 5], device), indexing=indexing)
        want = np.meshgrid([1, 2, 3], [4, 5], indexing=indexing)
        for g, w in zip(got, want):
            close(g, w)


# ---------------------------------------------------------------- manipulation

def test_manipulation(device):
    a = random_array((3, 4, 5))
    t = T(a, device)
    close(xp.flip(t), np.flip(a))
    close(xp.flip(t, axis=(0, 2)), np.flip(a, (0, 2)))
    close(xp.roll(t, 2), np.roll(a, 2))
    close(xp.roll(t, (-1, 3), axis=(1, 2)), np.roll(a, (-1, 3), (1, 2)))
    close(xp.moveaxis(t, 0, -1), np.moveaxis(a, 0, -1))
    close(xp.moveaxis(t, (0, 1), (2, 0)), np.moveaxis(a, (0, 1), (2, 0)))
    close(xp.permute_dims(t, (2, 0, 1)), np.transpose(a, (2, 0, 1)))
    close(xp.repeat(t, 2, axis=1), np.repeat(a, 2, axis=1))
    close(xp.repeat(t, 3), np.repeat(a, 3))
    close(xp.repeat(t, T([1, 0, 2], device), axis=0), np.repeat(a, [1, 0, 2], axis=0))
    close(xp.tile(t, (2, 1, 1, 2)), np.tile(a, (2, 1, 1, 2)))
    close(xp.tile(t, (2,)), np.tile(a, (2,)))
    close(xp.expand_dims(t, axis=(0, -1)), np.expand_dims(a, (0, -1)))
    close(xp.squeeze(xp.expand_dims(t, axis=1), axis=1), a)
    parts = xp.unstack(t, axis=1)
    assert len(parts) == 4
    close(parts[2], a[:, 2])
    x1, x2 = xp.broadcast_arrays(T(a[:, :1], device), T(a[0], device))
    assert x1.shape == x2.shape == (3, 4, 5)
    close(xp.concat([t, t], axis=None), np.concatenate([a, a], axis=None))
    close(xp.stack([t, t], axis=1), np.stack([a, a], axis=1))
    close(xp.reshape(t, (-1, 5)), a.reshape(-1, 5))
    with pytest.raises(ValueError, match=r"\[squeeze\]"):
        xp.squeeze(t, axis=0)
    with pytest.raises(ValueError, match=r"\[moveaxis\]"):
        xp.moveaxis(t, 5, 0)


def test_indexing(device):
    a = random_array((4, 6))
    t = T(a, device)
    idx = np.array([3, 0, -1, 2])
    close(xp.take(t, T(idx, device), axis=1), np.take(a, idx, axis=1))
    close(xp.take(T(a[0], device), T(idx, device)), np.take(a[0], idx))
    ii = np.argsort(a, axis=1)
    close(xp.take_along_axis(t, T(ii, device), axis=1), np.take_along_axis(a, ii, 1))
    ii0 = np.random.randint(0, 4, size=(2, 1))
    close(xp.take_along_axis(t, T(ii0, device), axis=0), np.take_along_axis(a, ii0, 0))


# ---------------------------------------------------------------- statistics

@pytest.mark.parametrize("axis", [None, 0, (0, 2), -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_statistics(device, axis, keepdims):
    a = random_array((3, 4, 5))
    t = T(a, device)
    kw = dict(axis=axis, keepdims=keepdims)
    close(xp.sum(t, **kw), np.sum(a, **kw), rtol=1e-5, atol=1e-5)
    close(xp.mean(t, **kw), np.mean(a, **kw), rtol=1e-5, atol=1e-5)
    close(xp.max(t, **kw), np.max(a, **kw))
    close(xp.min(t, **kw), np.min(a, **kw))
    close(xp.prod(t, **kw), np.prod(a, **kw), rtol=1e-4, atol=1e-5)
    for c in (0, 1):
        close(xp.var(t, correction=c, **kw), np.var(a, ddof=c, **kw), rtol=1e-5, atol=1e-5)
        close(xp.std(t, correction=c, **kw), np.std(a, ddof=c, **kw), rtol=1e-5, atol=1e-5)


def test_statistics_dtypes_and_errors(device):
    i = T(np.array([[1, 2], [3, 4]], dtype=np.int32), device)
    assert xp.sum(i).dtype == xp.int64 and xp.prod(i).dtype == xp.int64
    assert xp.sum(i, dtype=xp.float32).dtype == xp.float32
    assert xp.sum(T(np.array([True, True]), device)).numpy() == 2
    e = xp.zeros((0, 3), device=device)
    close(xp.sum(e, axis=0), np.zeros(3))
    with pytest.raises(ValueError, match=r"\[max\]"):
        xp.max(e, axis=0)
    with pytest.raises(ValueError, match=r"\[min\]"):
        xp.min(e)
    assert math.isnan(xp.var(T([1.0], device), correction=1).numpy())
    with pytest.raises(ValueError, match=r"\[mean\]"):
        xp.mean(i)


def test_cumulative(device):
    a = random_array((4, 7), low=0.5, high=1.5)
    t = T(a, device)
    close(xp.cumulative_sum(t, axis=1), np.cumsum(a, 1), rtol=1e-5)
    close(xp.cumulative_sum(t, axis=0, include_initial=True),
          np.concatenate([np.zeros((1, 7)), np.cumsum(a, 0)]), rtol=1e-5)
    close(xp.cumulative_prod(t, axis=1), np.cumprod(a, 1), rtol=1e-5)
    close(xp.cumulative_prod(t, axis=0, include_initial=True),
          np.concatenate([np.ones((1, 7)), np.cumprod(a, 0)]), rtol=1e-5)
    n = np.random.randint(-3, 4, size=(13,))
    np.testing.assert_array_equal(xp.cumulative_prod(T(n, device)).numpy(), np.cumprod(n))
    assert xp.cumulative_sum(T(n.astype(np.int32), device)).dtype == xp.int64
    with pytest.raises(ValueError, match=r"\[cumulative_sum\]"):
        xp.cumulative_sum(t)


# ---------------------------------------------------------------- utility, searching

def test_all_any_diff(device):
    a = np.array([[0.0, 1.0, np.nan], [2.0, 3.0, 4.0]])
    t = T(a, device)
    for axis in (None, 0, 1):
        np.testing.assert_array_equal(xp.all(t, axis=axis).numpy(), np.all(a, axis=axis))
        np.testing.assert_array_equal(xp.any(t, axis=axis).numpy(), np.any(a, axis=axis))
        np.testing.assert_array_equal(xp.count_nonzero(t, axis=axis).numpy(), np.count_nonzero(a, axis=axis))
    assert bool(xp.all(xp.zeros((0,), device=device)).numpy())
    b = random_array((3, 6))
    close(xp.diff(T(b, device)), np.diff(b))
    close(xp.diff(T(b, device), axis=0, n=2), np.diff(b, n=2, axis=0))
    close(xp.diff(T(b, device), prepend=T(b[:, :1], device)), np.diff(b, prepend=b[:, :1]))


def test_searching(device):
    a = random_array((4, 5))
    t = T(a, device)
    for axis in (None, 0, 1):
        np.testing.assert_array_equal(xp.argmax(t, axis=axis).numpy(), np.argmax(a, axis=axis))
        np.testing.assert_array_equal(xp.argmin(t, axis=axis, keepdims=True).numpy(),
                                      np.argmin(a, axis=axis, keepdims=True))
    m = np.array([[0, 2, 0], [1, 0, 3]])
    for g, w in zip(xp.nonzero(T(m, device)), np.nonzero(m)):
        np.testing.assert_array_equal(g.numpy(), w)
    s = np.sort(random_array((9,)))
    s[3] = s[4]
    v = np.concatenate([random_array((5,)), s[2:5], [np.nan]])
    for side in ("left", "right"):
        np.testing.assert_array_equal(xp.searchsorted(T(s, device), T(v, device), side=side).numpy(),
                                      np.searchsorted(s.astype(np.float32), v.astype(np.float32), side=side))
    close(xp.where(T(a > 0, device), t, 0.0), np.where(a > 0, a, 0.0))
    with pytest.raises(ValueError, match=r"\[argmax\]"):
        xp.argmax(xp.zeros((0,), device=device))
    with pytest.raises(ValueError, match=r"\[nonzero\]"):
        xp.nonzero(T(np.array(1.0), device))


def test_sets_and_sorting(device):
    a = np.array([[3.0, 1.0, np.nan], [1.0, 3.0, np.nan]])
    t = T(a, device)
    vals, idx, inv, counts = xp.unique_all(t)
    wv, wi, winv, wc = np.unique(a, return_index=True, return_inverse=True, return_counts=True, equal_nan=False)
    close(vals, wv)
    np.testing.assert_array_equal(idx.numpy(), wi)
    np.testing.assert_array_equal(inv.numpy(), winv.reshape(a.shape))
    np.testing.assert_array_equal(counts.numpy(), wc)
    assert xp.unique_counts(t).counts.shape == (4,)
    assert xp.unique_inverse(t).inverse_indices.shape == (2, 3)
    close(xp.unique_values(T([2, 2, 1], device)), [1, 2])
    b = random_array((3, 6))
    close(xp.sort(T(b, device), axis=0, descending=True), -np.sort(-b, axis=0))
    np.testing.assert_array_equal(xp.argsort(T(b, device)).numpy(), np.argsort(b, kind="stable"))


# ---------------------------------------------------------------- elementwise and operators

def test_elementwise_names(device):
    a = random_array((3, 4))
    t = T(a, device)
    close(xp.square(t), a ** 2)
    close(xp.reciprocal(t), 1 / a, rtol=1e-6)
    close(xp.positive(t), a)
    close(xp.negative(t), -a)
    close(xp.subtract(t, 1), a - 1)
    close(xp.imag(t), np.zeros_like(a))
    close(xp.clip(t, -1, 1.5), np.clip(a, -1, 1.5))
    close(xp.clip(t, max=T(a[0], device)), np.minimum(a, a[0]))
    close(xp.clip(t), a)
    i = T(np.array([1, 5, 9], dtype=np.int32), device)
    c = xp.clip(i, 2, 7)
    assert c.dtype == xp.int32
    np.testing.assert_array_equal(c.numpy(), [2, 5, 7])


# ---------------------------------------------------------------- core linear algebra

def test_core_linear_algebra(device):
    a = random_array((2, 3, 4))
    b = random_array((4, 5))
    close(xp.matmul(T(a, device), T(b, device)), a @ b, rtol=1e-5, atol=1e-5)
    close(xp.matrix_transpose(T(a, device)), np.swapaxes(a, -1, -2))
    close(xp.tensordot(T(a, device), T(b, device), axes=1), np.tensordot(a, b, axes=1), rtol=1e-5, atol=1e-5)
    c = random_array((4, 3, 2))
    close(xp.tensordot(T(a, device), T(c, device), axes=([1, 2], [1, 0])),
          np.tensordot(a, c, axes=([1, 2], [1, 0])), rtol=1e-5, atol=1e-5)
    u = random_array((3, 4))
    close(xp.vecdot(T(a, device), T(u, device)), np.sum(a * u, axis=-1), rtol=1e-5, atol=1e-5)
    close(xp.vecdot(T(a, device), T(u[:, :1].repeat(4, 1)[None], device), axis=-2),
          np.sum(a * u[:, :1].repeat(4, 1)[None], axis=-2), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"\[vecdot\]"):
        xp.vecdot(T(a, device), T(b, device))
