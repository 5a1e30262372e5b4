"""The 'math' op family (pf.acos ... pf.logical_xor) against NumPy on every
device: dtypes, broadcasting, non-contiguous views, empty tensors, NaN/Inf,
bad input, and gradients against torch."""
import numpy as np
import pytest

import pyflame as pf
from conftest import random_array, rounded
from gradcheck import check_vs_torch

FLOAT_TOL = {"float32": (2e-6, 1e-6), "float16": (2e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2)}

# name -> (NumPy reference, input range)
UNARY_FLOAT = {
    "acos": (np.arccos, (-1, 1)), "asin": (np.arcsin, (-1, 1)), "atan": (np.arctan, (-5, 5)),
    "acosh": (np.arccosh, (1, 6)), "asinh": (np.arcsinh, (-5, 5)), "atanh": (np.arctanh, (-0.99, 0.99)),
    "cosh": (np.cosh, (-5, 5)), "sinh": (np.sinh, (-5, 5)), "tan": (np.tan, (-1.5, 1.5)),
    "expm1": (np.expm1, (-3, 3)), "log1p": (np.log1p, (-0.9, 5)), "log2": (np.log2, (0.01, 9)),
    "log10": (np.log10, (0.01, 9)),
}
UNARY_EXACT = {"floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc, "sign": np.sign}
PREDICATES = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite, "signbit": np.signbit}
BINARY_FLOAT = {"atan2": np.arctan2, "hypot": np.hypot, "copysign": np.copysign, "logaddexp": np.logaddexp}
SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1e-30])


def run(fn, *arrays, device):
    ts = [pf.tensor(a, device=device) if isinstance(a, np.ndarray) else a for a in arrays]
    return getattr(pf, fn)(*ts).numpy()


def low(dtype, x):
    return rounded(x, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("fn", sorted(UNARY_FLOAT))
def test_unary_float_matches_numpy(device, fn, dtype):
    ref, (lo, hi) = UNARY_FLOAT[fn]
    x = rounded(np.random.uniform(lo, hi, size=(5, 7)), dtype)
    got = pf.tensor(x, device=device).astype(dtype)
    out = getattr(pf, fn)(got)
    assert str(out.dtype) == dtype
    rtol, atol = FLOAT_TOL[dtype]
    np.testing.assert_allclose(out.astype("float32").numpy(), ref(x), rtol=rtol * 2, atol=atol * 2)


def test_log1p_expm1_accurate_near_zero(device):
    x = np.array([1e-10, -3e-9, 1e-7, 2e-20], dtype=np.float32)
    t = pf.tensor(x, device=device)
    np.testing.assert_allclose(pf.log1p(t).numpy(), np.log1p(x.astype(np.float64)), rtol=1e-6)
    np.testing.assert_allclose(pf.expm1(t).numpy(), np.expm1(x.astype(np.float64)), rtol=1e-6)


@pytest.mark.parametrize("fn", sorted(UNARY_FLOAT) + sorted(UNARY_EXACT) + sorted(PREDICATES))
def test_unary_specials(device, fn):
    ref = {**{k: v[0] for k, v in UNARY_FLOAT.items()}, **UNARY_EXACT, **PREDICATES}[fn]
    x = SPECIALS.astype(np.float32)
    with np.errstate(all="ignore"):
        want = ref(x)
    got = run(fn, x, device=device)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=0, equal_nan=True)


@pytest.mark.parametrize("fn", sorted(UNARY_EXACT))
def test_rounding_is_exact(device, fn):
    x = np.random.uniform(-50, 50, size=(4, 9)).astype(np.float32)
    x[0, :4] = [0.5, 1.5, -0.5, -2.5]  # ties go to even
    np.testing.assert_array_equal(run(fn, x, device=device), UNARY_EXACT[fn](x))


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_inputs(device, dtype):
    x = random_array((3, 4), dtype, -9, 9)
    t = pf.tensor(x, device=device)
    for fn in ("floor", "ceil", "round", "trunc"):
        out = getattr(pf, fn)(t)
        assert str(out.dtype) == dtype
        np.testing.assert_array_equal(out.numpy(), x)
    np.testing.assert_array_equal(pf.sign(t).numpy(), np.sign(x))
    np.testing.assert_array_equal(pf.bitwise_invert(t).numpy(), np.invert(x))
    np.testing.assert_array_equal(pf.signbit(t).numpy(), np.signbit(x))
    assert not pf.isnan(t).numpy().any() and pf.isfinite(t).numpy().all()
    # Transcendental functions of integers compute in float32.
    out = pf.atan(t)
    assert out.dtype == pf.float32
    np.testing.assert_allclose(out.numpy(), np.arctan(x), rtol=1e-6)


@pytest.mark.parametrize("fn", sorted(BINARY_FLOAT))
def test_binary_float_broadcast(device, fn):
    a = random_array((4, 1, 5))
    b = random_array((3, 1))
    got = run(fn, a, b, device=device)
    np.testing.assert_allclose(got, BINARY_FLOAT[fn](a, b), rtol=2e-6, atol=1e-6)


def test_binary_float_specials(device):
    a = np.repeat(SPECIALS, len(SPECIALS)).astype(np.float32)
    b = np.tile(SPECIALS, len(SPECIALS)).astype(np.float32)
    with np.errstate(all="ignore"):
        for fn, ref in {**BINARY_FLOAT, "floor_divide": np.floor_divide, "remainder": np.remainder}.items():
            np.testing.assert_allclose(run(fn, a, b, device=device), ref(a, b), rtol=2e-6, equal_nan=True,
                                       err_msg=fn)


def test_nextafter(device):
    a = np.array([1.0, 0.0, -1.0, np.inf, np.nan, 3.0], dtype=np.float32)
    b = np.array([2.0, -1.0, -2.0, 0.0, 1.0, 3.0], dtype=np.float32)
    np.testing.assert_array_equal(run("nextafter", a, b, device=device), np.nextafter(a, b))
    with pytest.raises(ValueError, match=r"\[nextafter\]"):
        pf.nextafter(pf.tensor(a).astype("float16"), pf.tensor(b).astype("float16"))


@pytest.mark.parametrize("dtype", ["int32", "int64", "float32"])
def test_floor_divide_remainder(device, dtype):
    a = random_array((6, 5), dtype, -20, 20)
    b = random_array((5,), dtype, -6, 6)
    if dtype == "float32":
        b[b == 0] = 1.5
        a, b = a.astype(np.float32), b.astype(np.float32)  # the reference in the same precision
    b[0] = -1
    with np.errstate(divide="ignore", invalid="ignore"):  # integer x // 0 is 0 in both
        np.testing.assert_array_equal(run("floor_divide", a, b, device=device), np.floor_divide(a, b))
        np.testing.assert_array_equal(run("remainder", a, b, device=device), np.remainder(a, b))


def test_integer_division_by_zero_and_overflow(device):
    a = np.array([7, -7, np.iinfo(np.int32).min], dtype=np.int32)
    b = np.array([0, 0, -1], dtype=np.int32)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(run("floor_divide", a, b, device=device), np.floor_divide(a, b))
        np.testing.assert_array_equal(run("remainder", a, b, device=device), np.remainder(a, b))


@pytest.mark.parametrize("dtype", ["int32", "int64", "bool"])
def test_bitwise(device, dtype):
    a = random_array((3, 4), dtype, -100, 100)
    b = random_array((4,), dtype, -100, 100)
    for fn, ref in (("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or),
                    ("bitwise_xor", np.bitwise_xor)):
        np.testing.assert_array_equal(run(fn, a, b, device=device), ref(a, b))
    if dtype != "bool":
        s = np.random.randint(0, 70, size=(4,)).astype(a.dtype)
        bits = np.iinfo(a.dtype).bits
        want_l = np.where(s < bits, np.left_shift(a, np.minimum(s, bits - 1)), 0)
        want_r = np.where(s < bits, np.right_shift(a, np.minimum(s, bits - 1)), np.where(a < 0, -1, 0))
        np.testing.assert_array_equal(run("bitwise_left_shift", a, s, device=device), want_l)
        np.testing.assert_array_equal(run("bitwise_right_shift", a, s, device=device), want_r)
        with pytest.raises(ValueError, match=r"\[bitwise_and\]"):
            pf.bitwise_and(pf.tensor(a.astype(np.float32), device=device), 1)


def test_logical(device):
    a = np.array([0.0, 1.0, np.nan, -2.0])
    b = np.array([1, 0, 0, 3])
    ta, tb = pf.tensor(a, device=device), pf.tensor(b, device=device)
    for fn, ref in (("logical_and", np.logical_and), ("logical_or", np.logical_or),
                    ("logical_xor", np.logical_xor)):
        np.testing.assert_array_equal(getattr(pf, fn)(ta, tb).numpy(), ref(a, b))
    np.testing.assert_array_equal(pf.logical_not(ta).numpy(), np.logical_not(a))


def test_non_contiguous_and_empty(device):
    x = random_array((6, 8))
    t = pf.tensor(x, device=device)
    view = t.T[::2]
    np.testing.assert_allclose(pf.asinh(view).numpy(), np.arcsinh(x.T[::2]), rtol=2e-6)
    np.testing.assert_allclose(pf.hypot(view, t[2:6, 1:7]).numpy(), np.hypot(x.T[::2], x[2:6, 1:7]), rtol=2e-6)
    e = pf.zeros(0, 3, device=device)
    assert pf.log1p(e).shape == (0, 3) and pf.atan2(e, e).shape == (0, 3)
    assert pf.isnan(e).shape == (0, 3)


def test_python_scalars_are_weak(device):
    t = pf.tensor(np.array([5, -7, 9], dtype=np.int32), device=device)
    assert pf.floor_divide(t, 2).dtype == pf.int32
    np.testing.assert_array_equal((t // 2).numpy(), np.array([5, -7, 9]) // 2)
    np.testing.assert_array_equal((t % 4).numpy(), np.array([5, -7, 9]) % 4)
    np.testing.assert_array_equal((20 // t).numpy(), 20 // np.array([5, -7, 9]))
    np.testing.assert_array_equal((t & 3).numpy(), np.array([5, -7, 9]) & 3)
    np.testing.assert_array_equal((~t).numpy(), ~np.array([5, -7, 9], dtype=np.int32))
    f = pf.tensor(np.array([1.5, -2.5], dtype=np.float32), device=device)
    np.testing.assert_allclose((f % 2).numpy(), np.array([1.5, -2.5]) % 2)


def test_bad_input(device):
    b = pf.tensor(np.array([True, False]), device=device)
    with pytest.raises(ValueError, match=r"\[floor\]"):
        pf.floor(b)
    with pytest.raises(ValueError, match=r"\[bitwise_invert\]"):
        pf.bitwise_invert(pf.tensor(np.array([1.0]), device=device))
    with pytest.raises(ValueError, match=r"\[atan2\]"):
        pf.atan2(pf.zeros(2, 3, device=device), pf.zeros(4, device=device))
    with pytest.raises(ValueError, match=r"\[bitwise_left_shift\]"):
        pf.bitwise_left_shift(b, b)
    assert pf.tan(pf.tensor([0.5], device=device)).shape == (1,)  # still usable


UNARY_GRADS = [
    ("acos", "acos", (-0.9, 0.9)), ("asin", "asin", (-0.9, 0.9)), ("atan", "atan", (-3, 3)),
    ("acosh", "acosh", (1.2, 4)), ("asinh", "asinh", (-3, 3)), ("atanh", "atanh", (-0.9, 0.9)),
    ("cosh", "cosh", (-2, 2)), ("sinh", "sinh", (-2, 2)), ("tan", "tan", (-1.2, 1.2)),
    ("expm1", "expm1", (-2, 2)), ("log1p", "log1p", (-0.8, 3)), ("log2", "log2", (0.2, 4)),
    ("log10", "log10", (0.2, 4)), ("floor", "floor", (-3, 3)), ("sign", "sign", (-3, 3)),
]


@pytest.mark.parametrize("fn,tfn,rng", UNARY_GRADS)
def test_unary_grads_match_torch(device, fn, tfn, rng):
    torch = pytest.importorskip("torch")
    x = rounded(np.random.uniform(*rng, size=(3, 4)), "float32")
    check_vs_torch(lambda a: getattr(pf, fn)(a), lambda a: getattr(torch, tfn)(a), [x], device)


@pytest.mark.parametrize("fn,tfn", [("atan2", "atan2"), ("hypot", "hypot"), ("logaddexp", "logaddexp"),
                                    ("copysign", "copysign"), ("remainder", "remainder")])
def test_binary_grads_match_torch(device, fn, tfn):
    torch = pytest.importorskip("torch")
    a = random_array((3, 4))
    b = random_array((4,), low=0.5, high=3)
    b[::2] *= -1
    check_vs_torch(lambda x, y: getattr(pf, fn)(x, y), lambda x, y: getattr(torch, tfn)(x, y), [a, b],
                   device, grad_mask=[True, fn != "copysign"])
