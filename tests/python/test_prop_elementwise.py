"""Property tests: elementwise unary and binary ops (broadcasting, weak
scalars, every dtype, NaN/Inf and extremes), comparisons, where and clamp,
against NumPy (float64 reference rounded to the result dtype, integers
exactly) and PyTorch for the result dtype and the ops NumPy lacks."""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import pyflame as pf
from prop_common import (FLOAT_DTYPES, INT_LIMITS, arrays, broadcastable_pair, check, dtypes,
                         raises_clean, round_to, shapes, still_usable, to_pf)

torch = pytest.importorskip("torch")
TORCH_DT = {"bool": torch.bool, "int32": torch.int32, "int64": torch.int64,
            "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
PF_OF_TORCH = {v: k for k, v in TORCH_DT.items()}


def result_dtype(*operands):
    """PyTorch's result dtype for tensors of these PyFlame dtypes (str) and
    Python scalars (the project follows its promotion rules)."""
    args = [torch.zeros((), dtype=TORCH_DT[o]) if isinstance(o, str) else o for o in operands]
    return PF_OF_TORCH[torch.result_type(*args)] if len(args) == 2 else PF_OF_TORCH[args[0].dtype]


def _as(x, dtype):
    """Values of x (float64 or ints) converted to dtype's NumPy carrier."""
    if dtype in INT_LIMITS:
        return np.asarray(x).astype(np.int64 if dtype == "int64" else np.int32)
    if dtype == "bool":
        return np.asarray(x).astype(bool)
    return np.asarray(x, dtype=np.float64)


def _torch(x, dtype):
    """A float64 (floats) or exact (ints, bools) torch tensor of x."""
    return torch.from_numpy(np.array(_as(x, dtype)))


# ------------------------------------------------------------------ unary

_NUMPY_UNARY = {"neg": np.negative, "abs": np.abs, "sqrt": np.sqrt, "exp": np.exp,
                "log": np.log, "sin": np.sin, "cos": np.cos, "tanh": np.tanh}
_TORCH_UNARY = {"relu": torch.relu, "sigmoid": torch.sigmoid, "silu": torch.nn.functional.silu,
                "erf": torch.erf, "gelu": torch.nn.functional.gelu}
_INT_OK = ("neg", "abs", "relu")


@pytest.mark.parametrize("op", sorted(_NUMPY_UNARY) + sorted(_TORCH_UNARY))
@given(data=st.data())
def test_unary(device, op, data):
    dtype = data.draw(dtypes(), "dtype")
    x = data.draw(arrays(dtype, data.draw(shapes(), "shape")), "x")
    t = to_pf(x, dtype)
    fn = getattr(pf, op)
    if dtype == "bool" and op in _INT_OK:
        raises_clean(ValueError, fn, t)  # torch refuses neg/abs of bool as well
        return
    out_dtype = dtype if (op in _INT_OK or dtype in FLOAT_DTYPES) else "float32"
    if out_dtype != dtype:  # integers and bools convert to float32 first
        x = round_to(np.asarray(x, dtype=np.float64), out_dtype)
    if op in _NUMPY_UNARY:
        with np.errstate(all="ignore"):
            if out_dtype in INT_LIMITS:  # two's complement wrap, as NumPy and torch
                want = _NUMPY_UNARY[op](_as(x, dtype))
            else:
                want = _NUMPY_UNARY[op](np.asarray(x, dtype=np.float64))
    else:
        want = _TORCH_UNARY[op](_torch(x, out_dtype)).numpy()
    # Transcendental functions of huge arguments lose relative accuracy in
    # float32 arithmetic; the absolute error stays within a few float32 ulps.
    check(fn(t), want, out_dtype, atol=1e-5 if out_dtype == "float32" else None)


@given(data=st.data())
def test_gelu_tanh(device, data):
    dtype = data.draw(dtypes(FLOAT_DTYPES), "dtype")
    x = data.draw(arrays(dtype, data.draw(shapes(), "shape")), "x")
    want = torch.nn.functional.gelu(_torch(x, dtype), approximate="tanh").numpy()
    check(pf.gelu(to_pf(x, dtype), "tanh"), want, dtype, atol=1e-5 if dtype == "float32" else None)


# ----------------------------------------------------------------- binary

_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
           "pow": np.power, "maximum": np.maximum, "minimum": np.minimum}
_OPERATOR = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
             "div": lambda a, b: a / b, "pow": lambda a, b: a ** b}


def _binary_reference(op, a, b, t):
    """op of a and b (already in dtype t's values) as t computes it."""
    with np.errstate(all="ignore"):
        if t in INT_LIMITS or t == "bool":
            a, b = _as(a, t), _as(b, t)
            if t == "bool" and op in ("add", "mul"):
                return (a | b) if op == "add" else (a & b)
            return _BINARY[op](a, b)
        return _BINARY[op](np.asarray(a, np.float64), np.asarray(b, np.float64))


def _promoted(x, src, t):
    """x's values as dtype t holds them (a float32 operand in a float16
    result is rounded first, as the op casts its inputs)."""
    if t in FLOAT_DTYPES and src != t:
        return round_to(np.asarray(x, dtype=np.float64), t)
    return x


@pytest.mark.parametrize("op", sorted(_BINARY))
@given(data=st.data())
def test_binary_broadcasting(device, op, data):
    da, db = data.draw(dtypes(), "dtype_a"), data.draw(dtypes(), "dtype_b")
    sa, sb = data.draw(broadcastable_pair(), "shapes")
    a, b = data.draw(arrays(da, sa), "a"), data.draw(arrays(db, sb), "b")
    t = result_dtype(da, db)
    if op == "div" and t not in FLOAT_DTYPES:
        t = "float32"
    if t == "bool" and op in ("sub", "pow"):
        raises_clean(ValueError, getattr(pf, op), to_pf(a, da), to_pf(b, db))
        return
    if op == "pow" and t in INT_LIMITS and (np.asarray(b) < 0).any():
        # NumPy raises for negative integer powers of integers; tested below.
        b = np.abs(np.asarray(b).astype(np.int64)).astype(np.asarray(b).dtype) % 63
    want = _binary_reference(op, _promoted(a, da, t), _promoted(b, db, t), t)
    out = getattr(pf, op)(to_pf(a, da), to_pf(b, db))
    check(out, want, t)
    if op in _OPERATOR:
        check(_OPERATOR[op](to_pf(a, da), to_pf(b, db)), want, t)


def _scalars(kind):
    if kind == "bool":
        return st.booleans()
    if kind == "int":
        return st.integers(-2**31, 2**31 - 1)
    return st.floats(allow_nan=True, allow_infinity=True, width=32)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow"])
@given(data=st.data())
def test_weak_scalars(device, op, data):
    """tensor op scalar and scalar op tensor: the scalar adopts the tensor's
    dtype unless its kind is higher (torch's rule)."""
    dtype = data.draw(dtypes(), "dtype")
    kind = data.draw(st.sampled_from(["bool", "int", "float"]), "kind")
    s = data.draw(_scalars(kind), "scalar")
    x = data.draw(arrays(dtype, data.draw(shapes(), "shape")), "x")
    t = result_dtype(dtype, s)
    if op == "div" and t not in FLOAT_DTYPES:
        t = "float32"
    if t in INT_LIMITS:  # keep the scalar in range of the integer result
        lo, hi = INT_LIMITS[t]
        if not lo <= int(s) <= hi:
            return
    tx = to_pf(x, dtype)
    for reflected in (False, True):
        a, b = (s, tx) if reflected else (tx, s)
        na, nb = (s, x) if reflected else (x, s)
        if t == "bool" and op in ("sub", "pow"):
            raises_clean(ValueError, _OPERATOR[op], a, b)
            continue
        if op == "pow" and t in INT_LIMITS and (np.asarray(nb) < 0).any():
            continue  # integers to negative integer powers: test_int_pow_negative_scalar_raises
        # The scalar takes the result dtype before the op (as NumPy 2 does;
        # torch keeps it in float32, which differs where it under/overflows).
        ns = round_to(np.float64(s), t) if t in FLOAT_DTYPES else s
        na, nb = (ns, _promoted(x, dtype, t)) if reflected else (_promoted(x, dtype, t), ns)
        want = np.asarray(_binary_reference(op, na, nb, t))
        check(_OPERATOR[op](a, b), want, t)


def test_int_pow_negative_scalar_raises(device):
    raises_clean(ValueError, lambda: pf.tensor([2, 3]) ** -1)


def test_bool_scalar_arithmetic_matches_torch(device):
    x = np.array([True, False])
    for s in (True, 2, 2.5):
        got = pf.tensor(x) * s
        want = torch.from_numpy(x) * s
        assert str(got.dtype) == PF_OF_TORCH[want.dtype]
        np.testing.assert_array_equal(got.numpy(), want.numpy())


# ---------------------------------------------------- comparisons, where, clamp

_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
        "gt": np.greater, "ge": np.greater_equal}


@pytest.mark.parametrize("op", sorted(_CMP))
@given(data=st.data())
def test_comparisons(device, op, data):
    da, db = data.draw(dtypes(), "dtype_a"), data.draw(dtypes(), "dtype_b")
    sa, sb = data.draw(broadcastable_pair(), "shapes")
    a, b = data.draw(arrays(da, sa), "a"), data.draw(arrays(db, sb), "b")
    t = result_dtype(da, db)  # operands compare in their promoted dtype
    pa, pb = _as(_promoted(a, da, t), t), _as(_promoted(b, db, t), t)
    want = _CMP[op](pa, pb)
    check(getattr(pf, op)(to_pf(a, da), to_pf(b, db)), want, "bool")


@given(data=st.data())
def test_where(device, data):
    shapes3 = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, min_side=0,
                                                          max_side=3), "shapes")
    sc, sa, sb = shapes3.input_shapes
    da, db = data.draw(dtypes(), "dtype_a"), data.draw(dtypes(), "dtype_b")
    c = data.draw(arrays("bool", sc), "cond")
    a, b = data.draw(arrays(da, sa), "a"), data.draw(arrays(db, sb), "b")
    t = result_dtype(da, db)
    want = np.where(c, _as(_promoted(a, da, t), t), _as(_promoted(b, db, t), t))
    check(pf.where(to_pf(c, "bool"), to_pf(a, da), to_pf(b, db)), want, t)


@given(data=st.data())
def test_clamp(device, data):
    dtype = data.draw(dtypes(["int32", "int64"] + FLOAT_DTYPES), "dtype")
    x = data.draw(arrays(dtype, data.draw(shapes(), "shape")), "x")
    bound = st.one_of(st.none(), st.integers(-100, 100).map(float),
                      st.floats(-1e4, 1e4, width=16))
    lo, hi = data.draw(bound, "lo"), data.draw(bound, "hi")
    if lo is None and hi is None:
        raises_clean(ValueError, pf.clamp, to_pf(x, dtype), None, None)
        return
    if dtype in INT_LIMITS:  # integer clamps take integer bounds here
        lo = None if lo is None else float(math.floor(lo))
        hi = None if hi is None else float(math.floor(hi))
    ref = torch.clamp(_torch(x, dtype), None if lo is None else (int(lo) if dtype in INT_LIMITS
                                                                   else lo),
                      None if hi is None else (int(hi) if dtype in INT_LIMITS else hi))
    check(pf.clamp(to_pf(x, dtype), lo, hi), ref.numpy(), dtype)


# ------------------------------------------------------------- bad inputs

@given(data=st.data())
def test_non_broadcastable_shapes_raise(device, data):
    sa = data.draw(shapes(min_dims=1, max_dims=3, min_side=2), "a")
    sb = list(sa)
    i = data.draw(st.integers(0, len(sb) - 1), "axis")
    sb[i] = sb[i] + data.draw(st.integers(1, 3), "extra")
    a, b = pf.zeros(sa), pf.zeros(sb)
    for op in ("add", "mul", "maximum", "lt", "pow"):
        raises_clean(ValueError, getattr(pf, op), a, b)
    raises_clean(ValueError, pf.where, pf.zeros(sa, dtype="bool"), a, b)
    still_usable()


@pytest.mark.parametrize("bad", [None, "a", object(), [1, "x"], {"a": 1}])
def test_bad_operands_raise(device, bad):
    x = pf.ones(3)
    for op in ("add", "mul", "pow", "maximum", "eq", "where_a", "exp", "clamp"):
        if op == "exp":
            call = lambda: pf.exp(bad)  # noqa: E731
        elif op == "clamp":
            call = lambda: pf.clamp(bad, 0.0, 1.0)  # noqa: E731
        elif op == "where_a":
            call = lambda: pf.where(pf.ones(3, dtype="bool"), bad, x)  # noqa: E731
        else:
            call = lambda: getattr(pf, op)(x, bad)  # noqa: E731
        raises_clean((TypeError, ValueError), call)
    still_usable()
