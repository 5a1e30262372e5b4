"""Errors: the right class, a message starting with "[function]", and a
process that keeps working afterwards."""
import re

import numpy as np
import pytest

import pyflame as pf
from conftest import assert_close, make_tensor, random_array


def _still_usable():
    """A fresh computation after an error gives the right answer."""
    a = random_array((3, 4), "float32")
    b = random_array((4, 2), "float32")
    out = pf.relu(pf.matmul(make_tensor(a, "float32"), make_tensor(b, "float32")) + 1.0).sum(0)
    assert_close(out, np.maximum(a @ b + 1.0, 0).sum(0), "float32")


def _raises(exc, fn, call, *args, **kwargs):
    """Calls call(*args) expecting exc with a message starting '[fn]'."""
    with pytest.raises(exc) as info:
        call(*args, **kwargs)
    assert type(info.value) is exc or issubclass(type(info.value), exc)
    msg = str(info.value)
    assert re.match(rf"^\[{fn}\] \S", msg), f"message {msg!r} does not start with '[{fn}] '"
    _still_usable()
    return msg


# ------------------------------------------------------------ shape errors

def test_shape_mismatch(device):
    a, b = pf.zeros((2, 3)), pf.zeros((4, 5))
    for name in ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "lt", "ge"):
        msg = _raises(ValueError, name, getattr(pf, name), a, b)
        assert "(2,3)" in msg and "(4,5)" in msg
    _raises(ValueError, "add", lambda: a + b)
    _raises(ValueError, "mul", lambda: b * a)
    _raises(ValueError, "lt", lambda: a < b)
    msg = _raises(ValueError, "matmul", pf.matmul, a, b)
    assert msg == "[matmul] shapes (2,3) and (4,5) do not align"
    _raises(ValueError, "matmul", lambda: a @ b)
    _raises(ValueError, "where", pf.where, pf.ones((2, 3), dtype="bool"), a, b)
    _raises(ValueError, "reshape", a.reshape, 4, 2)
    _raises(ValueError, "broadcast_to", pf.broadcast_to, a, (3, 3))


def test_negative_shapes(device):
    for name, call in (("zeros", lambda: pf.zeros(2, -1)), ("ones", lambda: pf.ones((-3,))),
                       ("full", lambda: pf.full((2, -2), 1.0)), ("rand", lambda: pf.rand(-1)),
                       ("randn", lambda: pf.randn(3, -4)),
                       ("randint", lambda: pf.randint(0, 4, (-1,))),
                       ("eye", lambda: pf.eye(-2)), ("zeros", lambda: pf.zeros("a"))):
        _raises(ValueError, name, call)


# -------------------------------------------------------------- bad axis

@pytest.mark.parametrize("axis", [2, -3, 10])
def test_bad_axis(device, axis):
    t = pf.ones((2, 3))
    for name in ("sum", "mean", "max", "min", "prod"):
        msg = _raises(ValueError, name, getattr(pf, name), t, axis)
        assert "out of range" in msg
        _raises(ValueError, name, getattr(t, name), (0, axis))
    _raises(ValueError, "softmax", pf.softmax, t, axis)
    _raises(ValueError, "log_softmax", pf.log_softmax, t, axis)
    _raises(ValueError, "squeeze", pf.squeeze, t, axis)
    _raises(ValueError, "flatten", pf.flatten, t, axis)
    _raises(ValueError, "swapaxes", pf.swapaxes, t, 0, axis)
    _raises(ValueError, "transpose", pf.transpose, t, (0, axis))
    _raises(ValueError, "unsqueeze", pf.unsqueeze, t, axis + (1 if axis > 0 else -1))


def test_bad_axis_types(device):
    t = pf.ones((2, 3))
    _raises(ValueError, "sum", pf.sum, t, 1.5)
    _raises(ValueError, "mean", pf.mean, t, "0")
    _raises(ValueError, "sum", pf.sum, t, (0, 0))


# ------------------------------------------------------------- bad dtype

BAD_DTYPES = ["float128", "complex", "complex64", "uint16", "uint64", "", "float33",
              np.uint32, np.complex128, np.dtype("uint16"), complex, 5]


@pytest.mark.parametrize("dtype", BAD_DTYPES, ids=repr)
def test_bad_dtype(device, dtype):
    t = pf.ones(3)
    _raises(ValueError, "astype", t.astype, dtype)
    _raises(ValueError, "astype", pf.astype, t, dtype)
    _raises(ValueError, "zeros", pf.zeros, 2, dtype=dtype)
    _raises(ValueError, "ones", pf.ones, 2, dtype=dtype)
    _raises(ValueError, "full", pf.full, 2, 1.0, dtype=dtype)
    _raises(ValueError, "tensor", pf.tensor, [1.0, 2.0], dtype=dtype)
    _raises(ValueError, "arange", pf.arange, 3, dtype=dtype)
    _raises(ValueError, "eye", pf.eye, 3, dtype=dtype)
    _raises(ValueError, "rand", pf.rand, 3, dtype=dtype)
    _raises(ValueError, "randn", pf.randn, 3, dtype=dtype)
    _raises(ValueError, "randint", pf.randint, 0, 5, (3,), dtype=dtype)
    _raises(ValueError, "zeros_like", pf.zeros_like, t, dtype=dtype)
    if not isinstance(dtype, str):
        _raises(ValueError, "to", t.to, dtype)


def test_unsupported_input_dtypes(device):
    _raises(ValueError, "tensor", pf.tensor, np.array([1 + 2j]))
    _raises(ValueError, "tensor", pf.tensor, np.array(["2020-01-01"], dtype="datetime64[D]"))
    _raises(ValueError, "tensor", pf.tensor, np.array([1.0], dtype=np.longdouble)
            if np.dtype(np.longdouble) != np.dtype(np.float64) else np.array([1j]))


# ------------------------------------------------------------- bad device

@pytest.mark.parametrize("spec,exc", [("tpu", ValueError), ("ROCM", ValueError), ("", ValueError),
                                      ("rocm:x", ValueError), ("rocm:", ValueError),
                                      ("cpu:0:1", ValueError), ("cerebras", RuntimeError),
                                      ("cerebras:simulator", RuntimeError)])
def test_bad_device(device, spec, exc):
    before = pf.get_device()
    _raises(exc, "set_device", pf.set_device, spec)
    assert pf.get_device() == before  # unchanged by the failed call
    _raises(exc, "zeros", pf.zeros, 2, device=spec)
    _raises(exc, "full", pf.full, 2, 1.0, device=spec)
    _raises(exc, "tensor", pf.tensor, [1, 2], device=spec)
    _raises(exc, "rand", pf.rand, 2, device=spec)
    _raises(exc, "arange", pf.arange, 2, device=spec)
    _raises(exc, "to", pf.ones(2).to, spec)


def test_device_not_a_string(device):
    _raises(ValueError, "set_device", pf.set_device, 3)
    _raises(ValueError, "set_device", pf.set_device, None)
    _raises(ValueError, "zeros", pf.zeros, 2, device=0)
    _raises(ValueError, "tensor", pf.tensor, [1], device=["cpu"])


def test_rocm_index_out_of_range(device):
    _raises(RuntimeError, "set_device", pf.set_device, f"rocm:{pf.rocm_device_count() + 3}")
    _raises(RuntimeError, "set_device", pf.set_device, "rocm:-1")
    _raises(RuntimeError, "zeros", pf.zeros, 2, device="rocm:99")


# ------------------------------------------------------- non-numeric input

NON_NUMERIC = ["abc", ["a", "b"], [1, "a"], b"xy", object(), [object()], {"a": 1}, None,
               [[1, 2], [3]]]


@pytest.mark.parametrize("value", NON_NUMERIC, ids=lambda v: type(v).__name__ + repr(v)[:10])
def test_non_numeric_input(device, value):
    _raises(ValueError, "tensor", pf.tensor, value)
    _raises(ValueError, "tensor", pf.asarray, value)
    t = pf.ones(2)
    _raises(ValueError, "add", pf.add, t, value)
    _raises(ValueError, "mul", pf.mul, value, t)
    _raises(ValueError, "add", lambda: t + value)
    _raises(ValueError, "sub", lambda: value - t)
    _raises(ValueError, "exp", pf.exp, value)
    _raises(ValueError, "sum", pf.sum, value)
    _raises(ValueError, "softmax", pf.softmax, value)
    _raises(ValueError, "where", pf.where, value, t, t)
    _raises(ValueError, "matmul", pf.matmul, t, value)


def test_non_numeric_scalars_elsewhere(device):
    _raises(ValueError, "full", pf.full, (2,), "a")
    _raises(ValueError, "eval", pf.eval, 3)
    _raises(ValueError, "gelu", pf.gelu, pf.ones(2), approximate="fast")
    _raises(ValueError, "add", pf.add, pf.ones(2, dtype="int64"), 2**70)


# ----------------------------------------------------- misc value errors

def test_misc_value_errors(device):
    _raises(ValueError, "item", pf.ones(2).item)
    _raises(ValueError, "bool", bool, pf.ones(3))
    _raises(ValueError, "len", len, pf.tensor(1.0))
    _raises(ValueError, "clamp", pf.clamp, pf.ones(2))
    _raises(ValueError, "arange", pf.arange, 0, 3, 0)
    _raises(ValueError, "randint", pf.randint, 3, 1, (2,))
    _raises(ValueError, "sub", pf.sub, pf.ones(2, dtype="bool"), pf.ones(2, dtype="bool"))
    _raises(IndexError, "getitem", lambda: pf.ones((2, 3))[2])
    _raises(IndexError, "getitem", lambda: pf.ones((2, 3))[0, -4])


# ------------------------------------------------------------ rocm (no GPU)

@pytest.mark.skipif(pf.rocm_is_available(), reason="checks the behaviour without a GPU")
def test_rocm_functions_without_gpu():
    assert pf.rocm_is_available() is False
    assert pf.rocm_device_count() == 0
    assert pf.rocm_get_device() == -1
    _raises(RuntimeError, "rocm_get_device_info", pf.rocm_get_device_info)
    _raises(RuntimeError, "rocm_get_device_info", pf.rocm_get_device_info, 0)
    _raises(RuntimeError, "rocm_set_device", pf.rocm_set_device, 0)
    _raises(RuntimeError, "rocm_synchronize", pf.rocm_synchronize)
    for spec in ("rocm", "rocm:0", "gpu", "cuda"):
        _raises(RuntimeError, "set_device", pf.set_device, spec)
        _raises(RuntimeError, "zeros", pf.zeros, 2, device=spec)
        _raises(RuntimeError, "to", pf.ones(2).to, spec)
    pf.set_device("auto")
    assert pf.get_device() == "cpu"
    pf.synchronize()  # a no-op on the CPU
    assert pf.rocm_get_device() == -1


@pytest.mark.skipif(not pf.rocm_is_available(), reason="needs a GPU")
def test_rocm_functions_with_gpu():
    n = pf.rocm_device_count()
    assert n >= 1
    _raises(RuntimeError, "rocm_get_device_info", pf.rocm_get_device_info, n)
    _raises(RuntimeError, "rocm_get_device_info", pf.rocm_get_device_info, -1)
    _raises(RuntimeError, "rocm_set_device", pf.rocm_set_device, n)
    pf.rocm_synchronize()


def test_many_errors_in_a_row_leave_state_clean():
    for i in range(200):
        with pytest.raises(ValueError):
            pf.zeros((2, 3)) + pf.zeros((3, 2))
        with pytest.raises(ValueError):
            pf.sum(pf.ones(2), axis=i % 7 + 1)
    _still_usable()
