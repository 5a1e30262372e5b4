"""Elementwise arithmetic, math and activations against float64 NumPy."""
import math
import operator

import numpy as np
import pytest

import pyflame as pf
from conftest import FLOAT_DTYPES, INT_DTYPES, assert_close, make_tensor, random_array, rounded

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# name -> (pf function, float64 reference, input range)
UNARY = {
    "neg": (pf.neg, np.negative, (-5, 5)),
    "abs": (pf.abs, np.abs, (-5, 5)),
    "sqrt": (pf.sqrt, np.sqrt, (0.01, 9)),
    "exp": (pf.exp, np.exp, (-5, 5)),
    "log": (pf.log, np.log, (0.01, 20)),
    "sin": (pf.sin, np.sin, (-6, 6)),
    "cos": (pf.cos, np.cos, (-6, 6)),
    "tanh": (pf.tanh, np.tanh, (-4, 4)),
    "relu": (pf.relu, lambda x: np.maximum(x, 0), (-5, 5)),
    "sigmoid": (pf.sigmoid, _sigmoid, (-8, 8)),
    "gelu": (pf.gelu, _gelu, (-6, 6)),
    "gelu_tanh": (lambda x: pf.gelu(x, approximate="tanh"), _gelu_tanh, (-6, 6)),
    "silu": (pf.silu, lambda x: x * _sigmoid(x), (-8, 8)),
    "erf": (pf.erf, _erf, (-4, 4)),
}

# name -> (pf function, reference, range of a, range of b)
BINARY = {
    "add": (pf.add, np.add, (-10, 10), (-10, 10)),
    "sub": (pf.sub, np.subtract, (-10, 10), (-10, 10)),
    "mul": (pf.mul, np.multiply, (-10, 10), (-10, 10)),
    "div": (pf.div, np.true_divide, (-10, 10), (0.5, 4)),
    "pow": (pf.pow, np.power, (0.2, 3), (-2, 2.5)),
    "maximum": (pf.maximum, np.maximum, (-10, 10), (-10, 10)),
    "minimum": (pf.minimum, np.minimum, (-10, 10), (-10, 10)),
}


def _binary_inputs(name, shape_a, shape_b, dtype):
    _, _, ra, rb = BINARY[name]
    a = random_array(shape_a, dtype, *ra)
    b = random_array(shape_b, dtype, *rb)
    if name == "div":  # denominators of either sign, away from zero
        b = b * np.where(np.random.rand(*shape_b) < 0.5, -1, 1)
    return a, b


# ----------------------------------------------------------------- binary

@pytest.mark.parametrize("dtype", FLOAT_DTYPES + ["float64"])
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_float(device, name, dtype):
    fn, ref, _, _ = BINARY[name]
    a, b = _binary_inputs(name, (5, 7), (5, 7), dtype)
    out = fn(make_tensor(a, dtype), make_tensor(b, dtype))
    assert_close(out, ref(a, b), dtype, device=device)


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "maximum", "minimum", "pow"])
def test_binary_int(device, name, dtype):
    fn, ref = BINARY[name][:2]
    a = random_array((4, 6), dtype, -50, 50)
    b = random_array((4, 6), dtype, -50, 50)
    if name == "pow":
        a = random_array((4, 6), dtype, -6, 6)
        b = random_array((4, 6), dtype, 0, 7)
    out = fn(make_tensor(a), make_tensor(b))
    assert_close(out, ref(a, b), dtype, device=device)


def test_int_pow_large_exponent_wraps_like_numpy(device):
    a = random_array((10,), "int64", 2, 3)
    b = random_array((10,), "int64", 40, 62)
    assert_close(pf.pow(make_tensor(a), make_tensor(b)), np.power(a, b), "int64")


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_true_division_of_ints_gives_float32(device, dtype):
    a = random_array((6, 5), dtype, -100, 100)
    b = random_array((6, 5), dtype, 1, 9) * np.where(np.random.rand(6, 5) < 0.5, -1, 1).astype(dtype)
    ta, tb = make_tensor(a), make_tensor(b)
    assert_close(pf.div(ta, tb), a / b.astype(np.float64), "float32")
    assert_close(ta / tb, a / b.astype(np.float64), "float32")
    assert_close(ta / 4, a / 4.0, "float32")
    assert_close(7 / tb, 7.0 / b, "float32")


def test_int_division_by_zero(device):
    a = np.array([3, -2, 0], dtype=np.int32)
    out = pf.div(make_tensor(a), make_tensor(np.zeros(3, np.int32))).numpy()
    assert out.dtype == np.float32
    assert out[0] == np.inf and out[1] == -np.inf and np.isnan(out[2])


BROADCAST_SHAPES = [
    ((3, 1), (1, 4)),
    ((2, 3, 4), (4,)),
    ((4,), (2, 3, 4)),
    ((5,), ()),
    ((), (2, 3)),
    ((2, 1, 3), (4, 1)),
    ((1,), (3, 1, 2)),
    ((2, 3, 1, 5), (3, 4, 1)),
]


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES, ids=str)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_broadcasting(device, name, shapes):
    fn, ref = BINARY[name][:2]
    a, b = _binary_inputs(name, *shapes, "float32")
    out = fn(make_tensor(a, "float32"), make_tensor(b, "float32"))
    assert_close(out, ref(a, b), "float32", device=device)


@pytest.mark.parametrize("shapes", [((2, 3), (3, 2)), ((4,), (5,)), ((2, 3, 4), (3, 1, 5))], ids=str)
def test_broadcasting_mismatch_raises(device, shapes):
    a, b = pf.zeros(shapes[0]), pf.zeros(shapes[1])
    with pytest.raises(ValueError, match=r"^\[add\] .*cannot be broadcast"):
        pf.add(a, b)
    with pytest.raises(ValueError, match=r"^\[mul\]"):
        a * b


def _views(base):
    """Pairs (pf view, NumPy view) of the same non-contiguous selections."""
    t = make_tensor(base, "float32")
    return [
        ("transposed", t.T, base.T),
        ("permuted", t.transpose(1, 0, 2), base.transpose(1, 0, 2)),
        ("step_slices", t[::2, 1::2], base[::2, 1::2]),
        ("negative_steps", t[::-1, :, ::-2], base[::-1, :, ::-2]),
        ("int_index", t[:, 1], base[:, 1]),
        ("broadcast", pf.broadcast_to(t[:, :1], (4, 5, 6)), np.broadcast_to(base[:, :1], (4, 5, 6))),
    ]


@pytest.mark.parametrize("name", list(BINARY))
def test_binary_non_contiguous(device, name):
    fn, ref, ra, rb = BINARY[name]
    base_a = random_array((4, 5, 6), "float32", *ra)
    base_b = random_array((4, 5, 6), "float32", *rb)
    for (what, ta, na), (_, tb, nb) in zip(_views(base_a), _views(base_b)):
        if name == "div":
            nb = np.where(np.abs(nb) < 0.5, 1.0, nb)
            tb = make_tensor(nb, "float32") if what == "broadcast" else pf.where(
                pf.abs(tb) < 0.5, 1.0, tb)
        assert_close(fn(ta, tb), ref(na, nb), "float32")
        # a non-contiguous operand with a contiguous one
        c = random_array(na.shape, "float32", *rb)
        if name == "div":
            c = np.where(np.abs(c) < 0.5, 1.0, c)
        assert_close(fn(ta, make_tensor(c, "float32")), ref(na, c), "float32")


@pytest.mark.parametrize("name", ["exp", "sin", "abs", "gelu", "sigmoid"])
def test_unary_non_contiguous(device, name):
    fn, ref, (lo, hi) = UNARY[name]
    base = random_array((4, 5, 6), "float32", lo, hi)
    for what, t, n in _views(base):
        assert_close(fn(t), ref(n), "float32")


# Lengths around the GPU map's tiles (a block moves 2048 bytes per operand and steps over
# tiles when the grid is smaller than their count) and its per-element tail; an offset view
# starts off the 16-byte vector boundary (the indexed kernel) or on the next one.
TILE_SIZES = [1, 3, 5, 511, 1024, 1027, 4096 + 9, 3 * 2048 + 1, (1 << 22) + 3]


def _offset_view(x, offset, dtype):
    """x as a view starting `offset` elements into a larger tensor."""
    pad = np.concatenate([np.zeros(offset, x.dtype), x])
    return make_tensor(pad, dtype)[offset:]


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int8"])
@pytest.mark.parametrize("n", TILE_SIZES)
def test_binary_vector_tiles(device, n, dtype):
    if n > 100000 and dtype != "float32":
        pytest.skip("one large length is enough")
    a = random_array((n,), dtype, -10, 10)
    b = random_array((n,), dtype, -10, 10)
    want = rounded(a + b, dtype) if dtype != "int8" else (a.astype(np.int64) + b).astype(np.int8)
    assert_close(make_tensor(a, dtype) + make_tensor(b, dtype), want, dtype, rtol=0, atol=0)
    for off_a, off_b in ((1, 0), (0, 3), (2, 2), (4, 8)):
        got = _offset_view(a, off_a, dtype) + _offset_view(b, off_b, dtype)
        assert_close(got, want, dtype, rtol=0, atol=0)


@pytest.mark.parametrize("n", TILE_SIZES)
def test_unary_vector_tiles(device, n):
    x = random_array((n,), "float32", -6, 6)
    for off in (0, 1, 4):
        t = _offset_view(x, off, "float32")
        assert_close(pf.relu(t), np.maximum(x, 0), "float32", rtol=0, atol=0)
        assert_close(pf.exp(t), np.exp(x), "float32")
    # A broadcast operand (stride 0) beside a contiguous one, and a Python scalar.
    s = random_array((1,), "float32", -2, 2)
    assert_close(make_tensor(x) * make_tensor(s), x * s, "float32")
    assert_close(make_tensor(x) - 0.5, x - 0.5, "float32")


@pytest.mark.parametrize("n", [5, 4096 + 9, (1 << 20) + 7])
def test_astype_vector_tiles(device, n):
    # Packs of unequal widths: 1-byte in / 4-byte out, 4-byte in / 2-byte out.
    u = np.random.randint(0, 256, n).astype(np.uint8)
    assert_close(make_tensor(u).astype("float32"), u.astype(np.float64), "float32", rtol=0, atol=0)
    x = random_array((n,), "float32", -100, 100)
    assert_close(make_tensor(x).astype("float16"), x.astype(np.float16), "float16", rtol=0, atol=0)


@pytest.mark.parametrize("shapes", [((0,), (0,)), ((2, 0, 3), (3,)), ((0, 3), (1, 3)), ((4, 0), ())],
                         ids=str)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_empty(device, name, shapes):
    fn, ref = BINARY[name][:2]
    a, b = np.zeros(shapes[0]), np.ones(shapes[1])
    assert_close(fn(make_tensor(a, "float32"), make_tensor(b, "float32")), ref(a, b), "float32")


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_empty(device, name):
    fn, ref, _ = UNARY[name]
    x = np.zeros((3, 0))
    assert_close(fn(make_tensor(x, "float32")), ref(x), "float32")


# -------------------------------------------------------------- promotion

@pytest.mark.parametrize("da,db,want", [
    ("int32", "int64", "int64"),
    ("bool", "int32", "int32"),
    ("int32", "float16", "float16"),
    ("int64", "bfloat16", "bfloat16"),
    ("float16", "bfloat16", "float32"),
    ("float16", "float32", "float32"),
    ("bool", "float32", "float32"),
])
def test_tensor_tensor_promotion(device, da, db, want):
    a = random_array((3, 4), da, 0, 5)
    b = random_array((3, 4), db, 0, 5)
    for x, y in ((a, b), (b, a)):
        tx, ty = make_tensor(x, da if x is a else db), make_tensor(y, db if y is b else da)
        out = pf.add(tx, ty)
        assert_close(out, x.astype(np.float64) + y.astype(np.float64), want)
        assert_close(pf.mul(tx, ty), x.astype(np.float64) * y.astype(np.float64), want)


@pytest.mark.parametrize("dtype,scalar,want", [
    ("int64", 2, "int64"),
    ("int32", 3, "int32"),
    ("int32", 0.5, "float32"),
    ("int64", -1.25, "float32"),
    ("float16", 1.0, "float16"),
    ("float16", 3, "float16"),
    ("bfloat16", 2.5, "bfloat16"),
    ("float32", 7, "float32"),
    ("bool", 1, "int64"),
    ("bool", 0.5, "float32"),
    ("int32", True, "int32"),
])
def test_python_scalars_are_weakly_typed(device, dtype, scalar, want):
    x = random_array((2, 5), dtype, -5, 5)
    t = make_tensor(x, dtype)
    xs = x.astype(np.float64)
    s = float(scalar)
    cases = [
        (t + scalar, xs + s), (scalar + t, s + xs),
        (t * scalar, xs * s), (scalar * t, s * xs),
        (pf.add(t, scalar), xs + s), (pf.add(scalar, t), s + xs),
        (pf.maximum(t, scalar), np.maximum(xs, s)),
    ]
    if dtype != "bool":
        cases += [(t - scalar, xs - s), (scalar - t, s - xs)]
    for out, ref in cases:
        assert_close(out, ref, want, device=device)


def test_scalar_operand_stays_on_tensor_device(device):
    t = make_tensor(random_array((3,), "float32"), "float32")
    for out in (t + 1, 2.0 * t, t / 3, pf.maximum(t, 0.0), 1 - t):
        assert out.device == t.device


def test_large_python_int_scalar_exact(device):
    x = random_array((4,), "int64", -100, 100)
    big = 2**53 + 1
    assert_close(make_tensor(x) + big, x + big, "int64")
    assert_close(big - make_tensor(x), big - x, "int64")


def test_numpy_array_operand(device):
    a = random_array((3, 4), "float32")
    b = random_array((3, 4), "float32")
    t = make_tensor(a, "float32")
    # A float64 NumPy operand is a float64 tensor (as in PyTorch): float64
    # results; a list of Python floats is float32.
    for out, ref in ((t + b, a + b), (b + t, b + a), (b * t, b * a), (b - t, b - a),
                     (pf.add(a, b), a + b)):
        assert isinstance(out, pf.Tensor)
        assert_close(out, ref, "float64")
    assert_close(pf.sub(a.tolist(), t), a - a, "float32")
    assert_close(t + b.astype(np.float32), a + b, "float32")


# --------------------------------------------------------------- operators

def test_python_operators(device):
    a = random_array((3, 4), "float32", 0.5, 3)
    b = random_array((3, 4), "float32", 0.5, 3)
    ta, tb = make_tensor(a, "float32"), make_tensor(b, "float32")
    for op in (operator.add, operator.sub, operator.mul, operator.truediv, operator.pow):
        assert_close(op(ta, tb), op(a, b), "float32")
        assert_close(op(ta, 2.5), op(a, 2.5), "float32")
        assert_close(op(1.5, tb), op(1.5, b), "float32")
    assert_close(-ta, -a, "float32")
    assert_close(abs(make_tensor(a - 2, "float32")), np.abs(a - 2), "float32")


def test_bool_arithmetic(device):
    a = np.random.rand(10) < 0.5
    b = np.random.rand(10) < 0.5
    ta, tb = make_tensor(a), make_tensor(b)
    assert_close(ta + tb, a | b, "bool")  # as NumPy: bool + bool is a logical or
    assert_close(ta * tb, a & b, "bool")
    assert_close(pf.maximum(ta, tb), a | b, "bool")
    with pytest.raises(ValueError, match=r"^\[sub\]"):
        ta - tb
    for fn in (pf.neg, pf.abs):
        with pytest.raises(ValueError, match=r"^\[(neg|abs)\]"):
            fn(ta)


# ----------------------------------------------------------------- unary

@pytest.mark.parametrize("dtype", FLOAT_DTYPES + ["float64"])
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_float(device, name, dtype):
    fn, ref, (lo, hi) = UNARY[name]
    x = random_array((6, 9), dtype, lo, hi)
    assert_close(fn(make_tensor(x, dtype)), ref(x), dtype, device=device)


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_int(device, name, dtype):
    fn, ref, (lo, hi) = UNARY[name]
    lo, hi = max(lo, -20), min(hi, 20)
    x = random_array((3, 7), dtype, math.ceil(lo), math.floor(hi))
    if name in ("neg", "abs", "relu"):  # stay integers
        assert_close(fn(make_tensor(x)), ref(x), dtype)
    else:  # computed in float32
        assert_close(fn(make_tensor(x)), ref(x.astype(np.float64)), "float32")


@pytest.mark.parametrize("name", ["sigmoid", "silu", "gelu", "gelu_tanh", "tanh", "exp", "relu"])
def test_activations_extreme_inputs(device, name):
    fn, ref, _ = UNARY[name]
    x = rounded(np.concatenate([[-1e4, -100.0, -30.0, -10.0, 0.0, 10.0, 30.0, 100.0, 1e4],
                                np.random.uniform(-50, 50, 16)]), "float32")
    with np.errstate(over="ignore"):
        want = ref(x)
    if name == "exp":
        want = np.where(want > np.finfo(np.float32).max, np.inf, want)
    assert_close(fn(make_tensor(x, "float32")), want, "float32")


def test_gelu_approximate_argument(device):
    x = random_array((50,), "float32", -4, 4)
    t = make_tensor(x, "float32")
    assert_close(pf.gelu(t, approximate="none"), _gelu(x), "float32")
    assert_close(t.gelu(approximate="tanh"), _gelu_tanh(x), "float32")
    # The two differ: a test of one against the other's formula would fail.
    assert np.abs(_gelu(x) - _gelu_tanh(x)).max() > 1e-4
    with pytest.raises(ValueError, match=r"^\[gelu\]"):
        pf.gelu(t, approximate="fast")


def test_math_special_values(device):
    x = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan], dtype=np.float32)
    t = make_tensor(x)
    with np.errstate(all="ignore"):
        assert_close(pf.sqrt(t), np.sqrt(x), "float32")
        assert_close(pf.log(t), np.log(x), "float32")
        assert_close(pf.exp(t), np.exp(x), "float32")
        assert_close(pf.tanh(t), np.tanh(x), "float32")
        assert_close(pf.abs(t), np.abs(x), "float32")


# ------------------------------------------------------------------- NaN

@pytest.mark.parametrize("dtype", FLOAT_DTYPES + ["float64"])
def test_nan_propagation(device, dtype):
    a = random_array((40,), dtype)
    b = random_array((40,), dtype)
    a[np.random.rand(40) < 0.3] = np.nan
    b[np.random.rand(40) < 0.3] = np.nan
    a[0], b[0] = np.nan, 1.0  # both positions, whatever the draw
    a[1], b[1] = 1.0, np.nan
    ta, tb = make_tensor(a, dtype), make_tensor(b, dtype)
    want_max, want_min = np.maximum(a, b), np.minimum(a, b)
    assert np.isnan(want_max).sum() >= 2
    assert_close(pf.maximum(ta, tb), want_max, dtype)
    assert_close(pf.minimum(ta, tb), want_min, dtype)
    assert_close(pf.maximum(tb, ta), np.maximum(b, a), dtype)
    assert_close(pf.relu(ta), np.where(np.isnan(a), np.nan, np.maximum(a, 0)), dtype)
    assert_close(pf.maximum(ta, 0.0), np.maximum(a, 0.0), dtype)
