"""Comparisons, where and clamp."""
import operator

import numpy as np
import pytest

import pyflame as pf
from conftest import EVERY_DTYPE, FLOAT_DTYPES, assert_close, make_tensor, random_array, rounded

COMPARE = {
    "eq": (pf.eq, np.equal, operator.eq),
    "ne": (pf.ne, np.not_equal, operator.ne),
    "lt": (pf.lt, np.less, operator.lt),
    "le": (pf.le, np.less_equal, operator.le),
    "gt": (pf.gt, np.greater, operator.gt),
    "ge": (pf.ge, np.greater_equal, operator.ge),
}


def _pair(shape_a, shape_b, dtype):
    # Few distinct values, so equal elements are common.
    a = random_array(shape_a, dtype, -3, 3)
    b = random_array(shape_b, dtype, -3, 3)
    if dtype not in ("bool", "int32", "int64"):
        a, b = np.round(a), np.round(b)
    return a, b


@pytest.mark.parametrize("dtype", EVERY_DTYPE)
@pytest.mark.parametrize("name", list(COMPARE))
def test_compare(device, name, dtype):
    fn, ref, op = COMPARE[name]
    a, b = _pair((6, 7), (6, 7), dtype)
    a[0, :3] = [1, 0, 1]  # an equal pair, a smaller and a larger one, whatever the draw
    b[0, :3] = [1, 1, 0]
    ta, tb = make_tensor(a, dtype), make_tensor(b, dtype)
    want = ref(a, b)
    assert want.any() and not want.all()
    assert_close(fn(ta, tb), want, "bool", device=device)
    assert_close(op(ta, tb), want, "bool", device=device)


@pytest.mark.parametrize("name", list(COMPARE))
def test_compare_broadcast_and_scalars(device, name):
    fn, ref, op = COMPARE[name]
    a, b = _pair((3, 1, 4), (5, 1), "float32")
    ta, tb = make_tensor(a, "float32"), make_tensor(b, "float32")
    assert_close(fn(ta, tb), ref(a, b), "bool")
    s = float(np.round(np.random.uniform(-2, 2)))
    assert_close(op(ta, s), ref(a, s), "bool")
    assert_close(op(s, ta), ref(s, a), "bool")  # reflected: s < t is t > s
    assert_close(fn(s, ta), ref(s, a), "bool")
    ti = make_tensor(np.round(a).astype(np.int32))
    assert_close(op(ti, 0.5), ref(np.round(a), 0.5), "bool")  # int vs float scalar: as floats


@pytest.mark.parametrize("name", list(COMPARE))
def test_compare_mixed_dtypes(device, name):
    fn, ref, _ = COMPARE[name]
    a, _ = _pair((20,), (20,), "int32")
    b = np.round(random_array((20,), "float32", -3, 3) * 2) / 2  # halves
    assert_close(fn(make_tensor(a), make_tensor(b, "float16")), ref(a, b), "bool")
    assert_close(fn(make_tensor(a), make_tensor(a.astype(np.int64))), ref(a, a), "bool")


@pytest.mark.parametrize("name", list(COMPARE))
def test_compare_nan(device, name):
    fn, ref, _ = COMPARE[name]
    a = np.array([np.nan, 1.0, np.nan, 2.0], dtype=np.float32)
    b = np.array([np.nan, np.nan, 1.0, 2.0], dtype=np.float32)
    assert_close(fn(make_tensor(a), make_tensor(b)), ref(a, b), "bool")


def test_compare_non_contiguous(device):
    base = np.round(random_array((5, 6), "float32"))
    t = make_tensor(base, "float32")
    assert_close(t.T[::2] <= t[::-1, ::-1].T[::2], base.T[::2] <= base[::-1, ::-1].T[::2], "bool")
    assert_close(pf.eq(t[:, ::3], t[:, 1::3]), base[:, ::3] == base[:, 1::3], "bool")


def test_compare_empty(device):
    assert_close(pf.lt(pf.zeros((0, 3)), pf.zeros(3)), np.zeros((0, 3), bool), "bool")


# ------------------------------------------------------------------ where

@pytest.mark.parametrize("dtype", EVERY_DTYPE)
def test_where(device, dtype):
    c = np.random.rand(4, 5) < 0.5
    a = random_array((4, 5), dtype)
    b = random_array((4, 5), dtype)
    out = pf.where(make_tensor(c), make_tensor(a, dtype), make_tensor(b, dtype))
    assert_close(out, np.where(c, a, b), dtype, device=device)


@pytest.mark.parametrize("shapes", [((3, 1), (1, 4), (4,)), ((4,), (2, 3, 4), ()),
                                    ((), (2, 3), (3, 1, 1)), ((2, 1, 3), (3,), (4, 1))], ids=str)
def test_where_broadcasting(device, shapes):
    c = np.random.rand(*shapes[0]) < 0.5
    a = random_array(shapes[1], "float32")
    b = random_array(shapes[2], "float32")
    out = pf.where(make_tensor(c), make_tensor(a, "float32"), make_tensor(b, "float32"))
    assert_close(out, np.where(c, a, b), "float32")


@pytest.mark.parametrize("cdtype", ["int32", "int64", "float32", "float16", "bfloat16"])
def test_where_non_bool_condition(device, cdtype):
    c = random_array((5, 4), cdtype, -2, 2)
    c[0, 0], c[0, 1] = 0, 1  # both branches, whatever the draw
    if cdtype in ("float32", "float16"):
        c[1, 0] = np.nan  # NaN is truthy
        c[1, 1] = -0.0
    a = random_array((5, 4), "float32")
    b = random_array((4,), "float32")
    out = pf.where(make_tensor(c, cdtype), make_tensor(a, "float32"), make_tensor(b, "float32"))
    assert_close(out, np.where(c.astype(bool), a, b), "float32")


def test_where_scalars_and_promotion(device):
    c = np.random.rand(6) < 0.5
    c[:2] = [True, False]
    x = random_array((6,), "int32", -9, 9)
    tc, tx = make_tensor(c), make_tensor(x)
    assert_close(pf.where(tc, tx, 0), np.where(c, x, 0), "int32")
    assert_close(pf.where(tc, 2.5, tx), np.where(c, 2.5, x), "float32")
    assert_close(pf.where(tc, 1.0, 0.0), np.where(c, 1.0, 0.0), "float32")
    y = random_array((6,), "float16")
    assert_close(pf.where(tc, tx, make_tensor(y, "float16")), np.where(c, x, y), "float16")
    assert_close(pf.where(c.tolist(), x.tolist(), -1), np.where(c, x, -1), "int64")


def test_where_non_contiguous(device):
    c = np.random.rand(6, 4) < 0.5
    a = random_array((4, 6), "float32")
    b = random_array((6, 8), "float32")
    out = pf.where(make_tensor(c)[::-1], make_tensor(a, "float32").T, make_tensor(b, "float32")[:, ::2])
    assert_close(out, np.where(c[::-1], a.T, b[:, ::2]), "float32")


def test_where_mismatch_raises(device):
    with pytest.raises(ValueError, match=r"^\[where\]"):
        pf.where(pf.ones(3, dtype="bool"), pf.zeros(4), pf.zeros(3))


# ------------------------------------------------------------------ clamp

@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_clamp_float(device, dtype):
    x = random_array((5, 6), dtype, -4, 4)
    t = make_tensor(x, dtype)
    lo, hi = sorted(np.round(np.random.uniform(-3, 3, 2), 1))
    lo_r, hi_r = rounded(lo, dtype), rounded(hi, dtype)  # the bounds take the tensor's dtype
    tol = {"rtol": 0, "atol": 0}
    assert_close(pf.clamp(t, lo, hi), np.clip(x, lo_r, hi_r), dtype, **tol)
    assert_close(pf.clamp(t, min=lo), np.maximum(x, lo_r), dtype, **tol)
    assert_close(pf.clamp(t, max=hi), np.minimum(x, hi_r), dtype, **tol)
    assert_close(t.clamp(lo, hi), np.clip(x, lo_r, hi_r), dtype, **tol)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_clamp_int(device, dtype):
    x = random_array((20,), dtype, -20, 20)
    t = make_tensor(x)
    lo, hi = sorted(int(v) for v in np.random.randint(-10, 10, 2))
    assert_close(pf.clamp(t, lo, hi), np.clip(x, lo, hi), dtype)
    assert_close(pf.clamp(t, min=lo), np.maximum(x, lo), dtype)
    assert_close(pf.clamp(t, max=hi), np.minimum(x, hi), dtype)
    # a fractional bound promotes, as a Python float scalar does
    assert_close(pf.clamp(t, max=2.5), np.minimum(x, 2.5), "float32")
    assert_close(pf.clamp(t, min=-(2.0**70)), x, "float32")


def test_clamp_nan_and_errors(device):
    x = np.array([np.nan, -5.0, 5.0, 0.5], dtype=np.float32)
    assert_close(pf.clamp(make_tensor(x), -1.0, 1.0), np.clip(x, -1.0, 1.0), "float32")
    with pytest.raises(ValueError, match=r"^\[clamp\]"):
        pf.clamp(make_tensor(x))
    b = np.random.rand(8) < 0.5
    assert_close(pf.clamp(make_tensor(b), 0, 1), np.clip(b, 0, 1), "int64")  # as NumPy


def test_clamp_non_contiguous(device):
    x = random_array((4, 6), "float32")
    t = make_tensor(x, "float32")
    assert_close(pf.clamp(t.T[::-2], -1.0, 0.5), np.clip(x.T[::-2], -1.0, np.float32(0.5)), "float32")
