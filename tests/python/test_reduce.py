"""Reductions: sum, mean, max, min, prod."""
import numpy as np
import pytest

import pyflame as pf
from conftest import FLOAT_DTYPES, assert_close, make_tensor, random_array

REDUCE = {
    "sum": (pf.sum, np.sum),
    "mean": (pf.mean, np.mean),
    "max": (pf.max, np.max),
    "min": (pf.min, np.min),
    "prod": (pf.prod, np.prod),
}

AXES = [None, 0, 1, 2, -1, -3, (0, 2), (2, 0), (-1, 1), (0, 1, 2), [1]]


def _input(name, shape, dtype):
    if dtype == "bool":
        return random_array(shape, dtype)
    if name == "prod":  # products of moderate size
        if dtype in ("int32", "int64"):
            return random_array(shape, dtype, -2, 2)
        return random_array(shape, dtype, 0.6, 1.5) * np.where(np.random.rand(*shape) < 0.3, -1, 1)
    return random_array(shape, dtype, -50, 50)


def _out_dtype(name, dtype):
    if dtype in ("int32", "int64", "bool"):
        return {"sum": "int64", "prod": "int64", "mean": "float32"}.get(name, dtype)
    return dtype


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("name", list(REDUCE))
def test_reduce_axes(device, name, axis, keepdim):
    fn, ref = REDUCE[name]
    x = _input(name, (3, 4, 5), "float32")
    t = make_tensor(x, "float32")
    np_axis = tuple(axis) if isinstance(axis, list) else axis
    want = ref(x, axis=np_axis, keepdims=keepdim)
    assert_close(fn(t, axis=axis, keepdim=keepdim), want, "float32", device=device)
    assert_close(getattr(t, name)(axis, keepdim), want, "float32")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + ["int32", "int64", "bool"])
@pytest.mark.parametrize("name", list(REDUCE))
def test_reduce_dtypes(device, name, dtype):
    fn, ref = REDUCE[name]
    x = _input(name, (4, 6), dtype)
    t = make_tensor(x, dtype)
    out_dtype = _out_dtype(name, dtype)
    xr = x.astype(np.float64) if dtype == "bool" and name in ("sum", "prod", "mean") else x
    for axis in (None, 1, 0):
        assert_close(fn(t, axis=axis), ref(xr, axis=axis), out_dtype, device=device)


def test_reduce_dtype_rules(device):
    i32 = make_tensor(random_array((3, 4), "int32", -9, 9))
    b = make_tensor(np.random.rand(3, 4) < 0.5)
    assert pf.sum(i32).dtype == pf.int64
    assert pf.prod(i32).dtype == pf.int64
    assert pf.mean(i32).dtype == pf.float32
    assert pf.max(i32).dtype == pf.int32
    assert pf.sum(b).dtype == pf.int64
    assert pf.mean(b).dtype == pf.float32
    assert pf.max(b).dtype == pf.bool_
    assert pf.sum(make_tensor(random_array((3,), "float16"), "float16")).dtype == pf.float16


def test_int_sum_no_overflow(device):
    x = np.full((1000,), 2**31 - 1, dtype=np.int32)
    assert_close(pf.sum(make_tensor(x)), np.sum(x, dtype=np.int64), "int64")


def test_int_mean_of_large_values(device):
    x = random_array((2, 5), "int64", 2**61, 2**62)
    assert_close(pf.mean(make_tensor(x)), np.mean(x), "float32")
    assert_close(pf.mean(make_tensor(x), axis=1), np.mean(x, axis=1), "float32")
    y = np.full((7,), 2**31 - 1, dtype=np.int32)
    assert_close(pf.mean(make_tensor(y)), np.mean(y), "float32")


def test_reduce_scalar_input(device):
    v = float(np.random.randn())
    t = pf.tensor(v)
    for name, (fn, ref) in REDUCE.items():
        assert_close(fn(t), ref(np.float32(v)), "float32")


# ------------------------------------------------------------------ empty

@pytest.mark.parametrize("dtype", ["float32", "int32", "float16"])
def test_empty_sum_prod_mean(device, dtype):
    x = np.zeros((0, 3), dtype=np.float32 if dtype == "float32" else np.int32)
    t = make_tensor(x, dtype)
    assert_close(pf.sum(t), 0, _out_dtype("sum", dtype))
    assert_close(pf.prod(t), 1, _out_dtype("prod", dtype))
    assert_close(pf.sum(t, axis=0), np.zeros(3), _out_dtype("sum", dtype))
    assert_close(pf.prod(t, axis=0, keepdim=True), np.ones((1, 3)), _out_dtype("prod", dtype))
    assert_close(pf.sum(t, axis=1), np.zeros(0), _out_dtype("sum", dtype))
    assert_close(pf.max(t, axis=1), np.zeros(0), dtype)  # nothing to reduce: fine
    with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning):
        want = np.mean(x.astype(np.float64), axis=0)
    assert_close(pf.mean(t, axis=0), want, _out_dtype("mean", dtype))


@pytest.mark.parametrize("name", ["max", "min"])
def test_empty_max_min_raise(device, name):
    fn = REDUCE[name][0]
    for shape, axis in (((0,), None), ((0, 3), 0), ((2, 0), None), ((2, 0), 1)):
        with pytest.raises(ValueError, match=rf"^\[{name}\] .*zero-size"):
            fn(pf.zeros(shape), axis=axis)
    assert pf.sum(pf.ones(3)).item() == 3.0  # still usable


# ----------------------------------------------------------- layouts, NaN

@pytest.mark.parametrize("name", list(REDUCE))
def test_reduce_non_contiguous(device, name):
    fn, ref = REDUCE[name]
    x = _input(name, (6, 5, 4), "float32")
    t = make_tensor(x, "float32")
    views = [(t.T, x.T), (t[::2, ::-1], x[::2, ::-1]), (t.transpose(1, 2, 0)[:, 1], x.transpose(1, 2, 0)[:, 1]),
             (pf.broadcast_to(t[:1, :, 2:3], (3, 5, 6)), np.broadcast_to(x[:1, :, 2:3], (3, 5, 6)))]
    for tv, xv in views:
        for axis in (None, 0, -1, (0, 1)):
            assert_close(fn(tv, axis=axis), ref(xv, axis=axis), "float32")


@pytest.mark.parametrize("name", ["max", "min", "sum"])
def test_reduce_nan_propagates(device, name):
    fn, ref = REDUCE[name]
    x = random_array((4, 5), "float32")
    x[np.random.randint(4), np.random.randint(5)] = np.nan
    x[2, 3] = np.nan
    t = make_tensor(x, "float32")
    for axis in (None, 0, 1):
        assert_close(fn(t, axis=axis), ref(x, axis=axis), "float32")


# --------------------------------------------------------------- accuracy

def test_large_sum_accuracy(device):
    n = (1 << 20) + 12345  # large enough for the parallel path
    # Many small addends: a plain running float32 sum drifts by ~1e-2
    # relative here; pairwise or wider accumulation stays near 1e-7.
    x = np.random.uniform(0.09, 0.11, n).astype(np.float32)
    t = make_tensor(x)
    want = np.sum(x.astype(np.float64))
    assert_close(pf.sum(t), want, "float32", rtol=1e-5, atol=0)
    assert_close(pf.mean(t), want / n, "float32", rtol=1e-5, atol=0)
    square = t[: 1 << 20].reshape(1024, 1024)  # the same over two axes
    assert_close(pf.sum(square, axis=(0, 1)), np.sum(x[: 1 << 20].astype(np.float64)), "float32",
                 rtol=1e-5, atol=0)
    assert_close(pf.max(t), x.max(), "float32", rtol=0, atol=0)
    assert_close(pf.min(t), x.min(), "float32", rtol=0, atol=0)
    y = np.random.randn(n).astype(np.float32)  # cancellation: relative to the sum of |y|
    got = pf.sum(make_tensor(y)).item()
    assert abs(got - np.sum(y.astype(np.float64))) <= 1e-6 * np.sum(np.abs(y.astype(np.float64)))


def test_large_int_sum_exact(device):
    n = 300007
    x = np.random.randint(-(2**40), 2**40, n, dtype=np.int64)
    assert_close(pf.sum(make_tensor(x)), x.sum(), "int64")
    y = x[:4000].reshape(40, 100)
    assert_close(pf.sum(make_tensor(y), axis=1), y.sum(axis=1), "int64")


def test_reduce_many_rows(device):
    x = random_array((2000, 7), "float32")
    t = make_tensor(x, "float32")
    for name, (fn, ref) in REDUCE.items():
        if name == "prod":
            continue
        assert_close(fn(t, axis=1), ref(x, axis=1), "float32", atol=1e-5)
        assert_close(fn(t, axis=0), ref(x, axis=0), "float32", atol=1e-4)


# Few long rows: on a GPU each row is split over several blocks and the last block to finish
# combines their results in the same launch (per-row arrival counters that must read zero
# again afterwards). Odd lengths take the element-wise loads, an offset view too.
SPLIT_SHAPES = [(1, 1 << 20), (1, 300007), (3, 99999), (5, 65536 + 4), (40, 20000)]


@pytest.mark.parametrize("shape", SPLIT_SHAPES, ids=str)
@pytest.mark.parametrize("name", list(REDUCE))
def test_reduce_split_rows(device, name, shape):
    fn, ref = REDUCE[name]
    rows, cols = shape
    if name == "prod":
        # Factors e^N(0, 0.01): the product stays finite and its float32
        # accumulators leave 1.0 at once. Factors all within 1e-4 of 1 keep
        # every partial product at 1.0, where the float32 spacing halves and
        # the rounding drifts (NumPy's float32 prod of 2**20 such factors is
        # off by 2.5e-4): that tests the float format, not the reduction. A
        # lost or doubled factor still moves the product by about 1%.
        x = np.exp(np.random.normal(0.0, 0.01, shape))
    else:
        x = np.random.uniform(-1, 2, shape)
    x = x.astype(np.float32)
    want = ref(x.astype(np.float64), axis=1)
    tol = dict(rtol=1e-3 if name == "prod" else 1e-5, atol=1e-5)  # a product's rounding grows as sqrt(n)
    t = make_tensor(x)
    first = fn(t, axis=1).numpy()
    for again in range(2):  # the same bits each time: the combine order is fixed
        np.testing.assert_array_equal(fn(t, axis=1).numpy(), first)
    assert_close(fn(t, axis=1), want, "float32", **tol)
    pad = np.concatenate([np.zeros(3, np.float32), x.reshape(-1)])
    view = make_tensor(pad)[3:].reshape(rows, cols)  # rows start off the 16-byte boundary
    assert_close(fn(view, axis=1), want, "float32", **tol)
    # Short rows in between (never split) leave the counters as they were.
    assert_close(fn(make_tensor(x[:, :7].copy()), axis=1), ref(x[:, :7].astype(np.float64), axis=1),
                 "float32", **tol)
    assert_close(fn(t, axis=1), want, "float32", **tol)


@pytest.mark.parametrize("dtype", ["int32", "float16", "float64"])
def test_sum_split_rows_dtypes(device, dtype):
    x = random_array((2, 200003), dtype, *((-100, 100) if dtype == "int32" else (-1, 1)))
    want = np.sum(x.astype(np.float64) if dtype != "int32" else x.astype(np.int64), axis=1)
    out_dtype = "int64" if dtype == "int32" else dtype
    assert_close(pf.sum(make_tensor(x, dtype), axis=1), want, out_dtype, rtol=1e-3, atol=0.5)
    assert_close(pf.max(make_tensor(x, dtype)), x.max(), dtype, rtol=0, atol=0)


def test_max_split_rows_nan(device):
    x = np.random.rand(2, 1 << 18).astype(np.float32)
    x[0, 123457] = np.nan  # in one block's chunk of row 0 only
    got = pf.max(make_tensor(x), axis=1).numpy()
    assert np.isnan(got[0]) and got[1] == x[1].max()
    assert np.isnan(pf.min(make_tensor(x)).item())


# ----------------------------------------------------------------- errors

@pytest.mark.parametrize("name", list(REDUCE))
def test_reduce_bad_axis(device, name):
    fn = REDUCE[name][0]
    t = pf.zeros((2, 3))
    with pytest.raises(ValueError, match=rf"^\[{name}\] axis 2 is out of range"):
        fn(t, axis=2)
    with pytest.raises(ValueError, match=rf"^\[{name}\] axis -3 is out of range"):
        fn(t, axis=-3)
    with pytest.raises(ValueError, match=rf"^\[{name}\] repeated axis"):
        fn(t, axis=(1, -1))
    with pytest.raises(ValueError, match=rf"^\[{name}\]"):
        fn(t, axis="x")
