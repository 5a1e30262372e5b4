"""Shared pieces of the property-based suite (tests/python/test_prop_*.py).

Hypothesis profiles: ``ci`` (the default) is derandomized, keeps no example
database and bounds max_examples so the whole suite stays cheap and
reproducible; ``dev`` draws fresh examples with more of them
(``HYPOTHESIS_PROFILE=dev``). ``PYFLAME_PROP_EXAMPLES`` overrides the count.

Inputs are drawn as NumPy arrays holding values exactly representable in the
PyFlame dtype under test (bfloat16 included), with NaN, infinities, signed
zeros and extremes mixed in; references are computed in float64 (or exactly,
for integers and bools) from those same values.
"""
import os
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import pyflame as pf
from conftest import ALL_DTYPES, FLOAT_DTYPES, NUMPY_OF, bf16_round, make_tensor

_EXAMPLES = int(os.environ.get("PYFLAME_PROP_EXAMPLES", "0")) or None
_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
           HealthCheck.function_scoped_fixture]
settings.register_profile("ci", max_examples=_EXAMPLES or 25, deadline=None, derandomize=True,
                          database=None, print_blob=True, suppress_health_check=_HEALTH)
settings.register_profile("dev", max_examples=_EXAMPLES or 300, deadline=None,
                          print_blob=True, suppress_health_check=_HEALTH)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

INT_LIMITS = {"int32": (-2**31, 2**31 - 1), "int64": (-2**63, 2**63 - 1)}
FLOAT_MAX = {"float32": float(np.finfo(np.float32).max), "float16": 65504.0,
             "bfloat16": bf16_round(np.float32(3.3895314e38)).item()}
# Comparison tolerances (rtol, atol) of results computed in each dtype against
# a float64 reference of the same inputs (one rounding plus the op's error).
TOL = {"float32": (2e-5, 1e-6), "float16": (2e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2)}

# Messages must never show C++ internals.
_CXX_LEAK = re.compile(r"std::|bad_alloc|bad_cast|vector|basic_string|__cxx|nanobind|"
                       r"Unable to cast|incompatible function arguments")


# ------------------------------------------------------------- strategies

def dtypes(kinds=ALL_DTYPES):
    return st.sampled_from(list(kinds))


def shapes(min_dims=0, max_dims=4, min_side=0, max_side=4):
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                            max_side=max_side)


def _float_elements(dtype, special):
    width = 16 if dtype == "float16" else 32
    return st.floats(allow_nan=special, allow_infinity=special, width=width,
                     allow_subnormal=special)


@st.composite
def arrays(draw, dtype, shape, special=True, low=None, high=None, finite_max=None):
    """A NumPy array of ``shape`` holding values of PyFlame ``dtype``: floats
    as float64 (NaN/Inf/extremes when ``special``), ints and bools exactly.
    ``low``/``high`` bound the values (finite ones only then); ``finite_max``
    bounds the finite values' magnitude but keeps NaN and the infinities."""
    if dtype == "bool":
        return draw(hnp.arrays(np.bool_, shape))
    if dtype in INT_LIMITS:
        lo, hi = INT_LIMITS[dtype]
        lo = lo if low is None else max(lo, int(low))
        hi = hi if high is None else min(hi, int(high))
        return draw(hnp.arrays(NUMPY_OF[dtype], shape, elements=st.integers(lo, hi)))
    if finite_max is not None:
        elements = st.one_of(st.floats(-finite_max, finite_max,
                                       width=16 if dtype == "float16" else 32),
                             st.sampled_from([np.nan, np.inf, -np.inf, -0.0]))
    elif low is not None or high is not None:
        elements = st.floats(low, high, width=16 if dtype == "float16" else 32)
    else:
        elements = _float_elements(dtype, special)
    x = draw(hnp.arrays(np.float16 if dtype == "float16" else np.float32, shape,
                        elements=elements))
    if dtype == "bfloat16":
        x = bf16_round(x).reshape(x.shape)  # (bf16_round makes 0-d arrays 1-d)
        if low is not None or high is not None:  # bounds must be bfloat16 numbers
            x = np.clip(x, low, high)
    return x.astype(np.float64)


def axis_of(ndim, allow_invalid=False):
    """An axis for an ndim-d tensor, negative ones included (and out-of-range
    ones when ``allow_invalid``)."""
    lo, hi = (-ndim - 2, ndim + 1) if allow_invalid else (-max(ndim, 1), max(ndim, 1) - 1)
    return st.integers(lo, hi)


def broadcastable_pair(min_dims=0, max_dims=4, max_side=3, min_side=0):
    """Two shapes that broadcast together (NumPy's rules, size-0 axes included
    unless min_side > 0)."""
    return hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=min_dims, max_dims=max_dims,
                                             min_side=min_side, max_side=max_side).map(
        lambda s: s.input_shapes)


# ------------------------------------------------------------ comparisons

def to_pf(x, dtype):
    return make_tensor(x, dtype)


def round_to(x, dtype):
    """float64 values rounded to a PyFlame float dtype (the reference's last
    step: the result is stored in that dtype)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype == "float16":
            return x.astype(np.float16).astype(np.float64)
        if dtype == "bfloat16":
            return bf16_round(x.astype(np.float32)).astype(np.float64).reshape(x.shape)
        if dtype == "float32":
            return x.astype(np.float32).astype(np.float64)
    return x


def check(t, expected, dtype, rtol=None, atol=None):
    """``t`` (a PyFlame tensor) equals ``expected`` (NumPy): same shape and
    dtype; floats within tolerance (NaN where NaN, same infinities), others
    exactly."""
    assert isinstance(t, pf.Tensor), type(t)
    assert str(t.dtype) == dtype, f"dtype {t.dtype}, expected {dtype}"
    expected = np.asarray(expected)
    assert tuple(t.shape) == expected.shape, f"shape {tuple(t.shape)}, expected {expected.shape}"
    got = t.numpy()
    assert got.shape == expected.shape
    if dtype in TOL:
        r, a = TOL[dtype]
        r, a = r if rtol is None else rtol, a if atol is None else atol  # atol may be an array
        exp = round_to(expected, dtype)
        with np.errstate(invalid="ignore"):
            got = got.astype(np.float64)
        ok = np.isclose(got, exp, rtol=r, atol=a, equal_nan=True) | (got == exp)
        if not ok.all():
            bad = np.argwhere(~ok)[:5] if ok.ndim else [()]
            rows = [f"  at {tuple(i)}: got {got[tuple(i)]!r}, expected {exp[tuple(i)]!r}"
                    for i in bad]
            raise AssertionError(f"{int((~ok).sum())} of {ok.size} values differ "
                                 f"(rtol={r}, atol max={np.max(a)}):\n" + "\n".join(rows))
    else:
        np.testing.assert_array_equal(got, expected.astype(got.dtype))


def clean_error(exc_info, types):
    """The exception is one of ``types``, its message starts with the function
    name in brackets and names no C++ internals."""
    e = exc_info.value
    assert isinstance(e, types), f"{type(e).__name__}: {e}"
    msg = str(e)
    assert not _CXX_LEAK.search(msg), f"C++ internals in the message: {msg!r}"
    assert re.match(r"^['\"]?\[[\w.]+\] ", msg), f"message does not start with '[fn] ': {msg!r}"
    return msg


def raises_clean(types, call, *args, **kwargs):
    """call(*args) raises one of ``types`` with a clean message, also when the
    error only shows at evaluation."""
    with pytest.raises(Exception) as info:
        out = call(*args, **kwargs)
        if isinstance(out, pf.Tensor):
            out.numpy()
        elif isinstance(out, (list, tuple)):
            pf.eval(*[o for o in out if isinstance(o, pf.Tensor)])
    return clean_error(info, types)


def still_usable():
    """A fresh computation after an error gives the right answer."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal((pf.tensor(x) * 2 + 1).sum(0).numpy(), (x * 2 + 1).sum(0))


__all__ = ["ALL_DTYPES", "FLOAT_DTYPES", "INT_LIMITS", "FLOAT_MAX", "TOL", "arrays", "assume",
           "axis_of", "broadcastable_pair", "check", "clean_error", "dtypes", "raises_clean",
           "round_to", "shapes", "still_usable", "to_pf"]
