"""softmax and log_softmax against a float64 NumPy reference."""
import numpy as np
import pytest

import pyflame as pf
from conftest import FLOAT_DTYPES, assert_close, make_tensor, random_array, rounded


def _log_softmax(x, axis):
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


def _softmax(x, axis):
    return np.exp(_log_softmax(x, axis))


FNS = {"softmax": (pf.softmax, _softmax), "log_softmax": (pf.log_softmax, _log_softmax)}


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3])
@pytest.mark.parametrize("name", list(FNS))
def test_softmax_every_axis(device, name, axis):
    fn, ref = FNS[name]
    x = random_array((3, 4, 5), "float32", -5, 5)
    t = make_tensor(x, "float32")
    want = ref(x, axis)
    assert_close(fn(t, axis=axis), want, "float32", device=device)
    assert_close(getattr(t, name)(axis), want, "float32")
    if name == "softmax":
        np.testing.assert_allclose(fn(t, axis).numpy().sum(axis=axis), 1.0, rtol=1e-5)


@pytest.mark.parametrize("name", list(FNS))
def test_softmax_default_axis_and_1d(device, name):
    fn, ref = FNS[name]
    x = random_array((4, 7), "float32")
    assert_close(fn(make_tensor(x, "float32")), ref(x, -1), "float32")
    v = random_array((9,), "float32")
    assert_close(fn(make_tensor(v, "float32")), ref(v, 0), "float32")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", list(FNS))
def test_softmax_low_precision(device, name, dtype):
    fn, ref = FNS[name]
    x = random_array((6, 10), dtype, -4, 4)
    for axis in (0, 1):
        assert_close(fn(make_tensor(x, dtype), axis), ref(x, axis), dtype, device=device)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", list(FNS))
def test_softmax_large_values_stable(device, name, dtype):
    fn, ref = FNS[name]
    big = {"float32": 1e4, "float16": 6e4, "bfloat16": 1e30}[dtype]
    x = random_array((4, 8), dtype, -3, 3)
    x[0] += big  # exp would overflow without subtracting the max
    x[1] -= big
    x[2, :4] = big
    x[3] = big  # a constant row: uniform output
    x = rounded(x, dtype)  # what the tensor holds
    out = fn(make_tensor(x, dtype), -1)
    assert np.isfinite(out.numpy()).all()
    assert_close(out, ref(x, -1), dtype)


def test_softmax_extremes_and_inf(device):
    x = np.array([[0.0, -np.inf, 1.0], [-np.inf, 5.0, -np.inf], [np.nan, 0.0, 1.0]], np.float32)
    with np.errstate(invalid="ignore"):
        want_s, want_l = _softmax(x, -1), _log_softmax(x, -1)
    assert_close(pf.softmax(make_tensor(x), -1), want_s, "float32")
    assert_close(pf.log_softmax(make_tensor(x), -1), want_l, "float32")


def test_softmax_int_input_promotes(device):
    x = random_array((3, 5), "int32", -4, 4)
    assert_close(pf.softmax(make_tensor(x), 1), _softmax(x, 1), "float32")
    assert_close(pf.log_softmax(make_tensor(x), 0), _log_softmax(x, 0), "float32")


def test_softmax_non_contiguous(device):
    x = random_array((5, 6, 4), "float32")
    t = make_tensor(x, "float32")
    for tv, xv in ((t.T, x.T), (t[::-1, ::2], x[::-1, ::2]),
                   (pf.broadcast_to(t[:, :1], (5, 3, 4)), np.broadcast_to(x[:, :1], (5, 3, 4)))):
        for axis in (0, 1, -1):
            assert_close(pf.softmax(tv, axis), _softmax(xv, axis), "float32")
            assert_close(pf.log_softmax(tv, axis), _log_softmax(xv, axis), "float32")


def test_softmax_wide_rows(device):
    x = random_array((3, 5000), "float32", -10, 10)
    assert_close(pf.softmax(make_tensor(x, "float32")), _softmax(x, -1), "float32", atol=1e-8)
    assert_close(pf.log_softmax(make_tensor(x, "float32")), _log_softmax(x, -1), "float32")


def test_softmax_empty_and_errors(device):
    assert_close(pf.softmax(pf.zeros((0, 4)), -1), np.zeros((0, 4)), "float32")
    assert_close(pf.log_softmax(pf.zeros((3, 0)), 0), np.zeros((3, 0)), "float32")
    with pytest.raises(ValueError, match=r"^\[softmax\] axis 2 is out of range"):
        pf.softmax(pf.zeros((2, 3)), 2)
    with pytest.raises(ValueError, match=r"^\[log_softmax\]"):
        pf.log_softmax(pf.tensor(1.0))


# Row lengths that reach every GPU path (16-byte slots: 4 float32 or 8 16-bit
# values when the length and the pointers allow, single elements otherwise):
# grouped rows of 4/16/32 lanes with 1/2/4/8 slots per lane (<= 256 slots),
# one cached block per row with 4 or 8 slots per thread (<= 512 x 8 slots),
# and the three-pass kernel for longer rows. Many rows for short lengths, so
# that blocks of several rows end part-full.
ROW_LENGTHS = [1, 3, 4, 8, 31, 64, 100, 128, 200, 250, 256, 1000, 1001, 1024, 3001, 4096, 4097,
               20000, 70000]


def _rows_for(cols):
    return 67 if cols <= 256 else 9 if cols <= 4097 else 2


@pytest.mark.parametrize("cols", ROW_LENGTHS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", list(FNS))
def test_softmax_row_lengths(device, name, dtype, cols):
    fn, ref = FNS[name]
    x = random_array((_rows_for(cols), cols), dtype, -8, 8)
    x[0, cols // 2] = 40.0 if dtype != "float16" else 11.0  # one dominant entry
    x = rounded(x, dtype)
    out = fn(make_tensor(x, dtype), -1)
    atol = 1e-7 if dtype == "float32" else None
    assert_close(out, ref(x, -1), dtype, atol=atol, device=device)
    if name == "softmax":
        np.testing.assert_allclose(out.numpy().astype(np.float64).sum(axis=-1), 1.0,
                                   rtol={"float32": 1e-4, "float16": 1e-2, "bfloat16": 5e-2}[dtype])


@pytest.mark.parametrize("name", list(FNS))
def test_softmax_unaligned_rows(device, name):
    # A view whose data starts 4 bytes into its buffer: rows of a vector
    # multiple that are not 16-byte aligned take the element-wise slots.
    fn, ref = FNS[name]
    for cols in (64, 2048):
        x = random_array((2 * cols + 1,), "float32", -5, 5)
        t = make_tensor(x, "float32")[1:]
        xv = x[1:]
        assert_close(fn(t, -1), ref(xv, -1), "float32", atol=1e-7, device=device)
        assert_close(fn(t.reshape((2, cols)), -1), ref(xv.reshape(2, cols), -1), "float32",
                     atol=1e-7, device=device)


@pytest.mark.parametrize("name", list(FNS))
def test_softmax_rows_with_inf_nan_each_path(device, name):
    fn, ref = FNS[name]
    for cols in (5, 64, 1000, 4096, 70000):
        x = random_array((4, cols), "float32", -3, 3)
        x[0, 1] = -np.inf
        x[1, :] = -np.inf
        x[1, cols - 1] = 2.0  # one finite entry
        x[2, cols // 2] = np.nan
        with np.errstate(invalid="ignore"):
            want = ref(x, -1)
        assert_close(fn(make_tensor(x, "float32"), -1), want, "float32", atol=1e-7, device=device)
