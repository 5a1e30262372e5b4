"""Property tests: creation ops (zeros, ones, full, arange, eye, rand, randn,
randint, zeros_like/ones_like) against NumPy over shapes (0-d and zero-size
included) and dtypes; sizes near the 64-bit limits must raise the project's
ValueError (or OutOfMemoryError for a size that fits but cannot be
allocated), never crash.

Inputs that could crash the process run in a child process (``isolated``),
so a crash fails the one case instead of ending the test session."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pyflame as pf
from prop_common import FLOAT_DTYPES, INT_LIMITS, check, dtypes, raises_clean, shapes

NP_OF = {"bool": np.bool_, "int32": np.int32, "int64": np.int64, "float16": np.float16,
         "bfloat16": np.float32, "float32": np.float32}


@given(data=st.data())
def test_zeros_ones_full(device, data):
    dtype = data.draw(dtypes(), "dtype")
    shape = data.draw(shapes(), "shape")
    check(pf.zeros(shape, dtype=dtype), np.zeros(shape, NP_OF[dtype]), dtype)
    check(pf.ones(*shape, dtype=dtype), np.ones(shape, NP_OF[dtype]), dtype)
    if dtype in INT_LIMITS:
        lo, hi = INT_LIMITS[dtype]
        value = data.draw(st.integers(lo, hi), "value")
    elif dtype == "bool":
        value = data.draw(st.booleans(), "value")
    else:
        value = data.draw(st.floats(allow_nan=True, allow_infinity=True, width=32), "value")
    want = np.full(shape, value, dtype=np.float64 if dtype in FLOAT_DTYPES else NP_OF[dtype])
    check(pf.full(shape, value, dtype=dtype), want, dtype)
    like = pf.full(shape, value, dtype=dtype)
    check(pf.zeros_like(like), np.zeros(shape, NP_OF[dtype]), dtype)
    check(pf.ones_like(like), np.ones(shape, NP_OF[dtype]), dtype)


def test_full_nan_int_raises(device):
    raises_clean(ValueError, pf.full, (2,), float("nan"), dtype=pf.int32)


@given(data=st.data())
def test_arange(device, data):
    ints = data.draw(st.booleans(), "ints")
    if ints:
        start = data.draw(st.integers(-50, 50), "start")
        stop = data.draw(st.integers(-50, 50), "stop")
        step = data.draw(st.integers(-7, 7).filter(bool), "step")
        check(pf.arange(start, stop, step), np.arange(start, stop, step), "int64")
        check(pf.arange(stop), np.arange(stop), "int64")
    else:
        start = data.draw(st.floats(-100, 100), "start")
        stop = data.draw(st.floats(-100, 100), "stop")
        step = data.draw(st.floats(0.25, 9) | st.floats(-9, -0.25), "step")
        want = np.arange(start, stop, step)
        out = pf.arange(start, stop, step)
        # The length is NumPy's ceil((stop - start) / step); values float32.
        check(out, want, "float32", rtol=1e-5, atol=1e-4)
    raises_clean(ValueError, pf.arange, 0, 10, 0)
    for bad in (float("nan"), float("inf")):
        raises_clean(ValueError, pf.arange, 0, bad)


def test_arange_tiny_step(device):
    raises_clean(ValueError, pf.arange, 0.0, 1.0, 1e-19)


@given(data=st.data())
def test_eye(device, data):
    dtype = data.draw(dtypes(), "dtype")
    n = data.draw(st.integers(0, 6), "n")
    m = data.draw(st.one_of(st.none(), st.integers(0, 6)), "m")
    k = data.draw(st.integers(-7, 7), "k")
    check(pf.eye(n, m, k, dtype=dtype), np.eye(n, m, k, dtype=NP_OF[dtype]), dtype)
    bad = data.draw(st.integers(-5, -1), "negative")
    raises_clean(ValueError, pf.eye, n, bad)  # NumPy: negative dimensions are not allowed
    raises_clean(ValueError, pf.eye, bad)


@given(data=st.data())
def test_random(device, data):
    shape = data.draw(shapes(max_side=5), "shape")
    dtype = data.draw(dtypes(FLOAT_DTYPES), "dtype")
    u = pf.rand(shape, dtype=dtype)
    assert tuple(u.shape) == shape and str(u.dtype) == dtype
    v = u.numpy().astype(np.float64)
    assert ((v >= 0) & (v <= 1)).all()  # [0, 1); rounding to 16 bits may reach 1
    z = pf.randn(*shape, dtype=dtype).numpy().astype(np.float64)
    assert z.shape == shape and np.isfinite(z).all()
    lo = data.draw(st.integers(-2**40, 2**40), "low")
    hi = lo + data.draw(st.integers(1, 2**20), "span")
    r = pf.randint(lo, hi, shape)
    assert str(r.dtype) == "int64" and tuple(r.shape) == shape
    rv = r.numpy()
    assert ((rv >= lo) & (rv < hi)).all()
    raises_clean(ValueError, pf.randint, 5, 5, shape)
    raises_clean(ValueError, pf.randint, 0, 2**40, (2,), dtype="int32")


# ------------------------------------------------- sizes near the 64-bit limit

# Shapes whose element count exceeds int64: each creation op, reshape and
# broadcast_to must raise ValueError at the call (nothing is evaluated). They
# run isolated too: the unchecked products are undefined behaviour (UBSan).
_OVERFLOW_SHAPES = [(2**31, 2**32), (2**62, 4), (2**40, 2**40), (3 * 2**61, 2, 2),
                    (2, 2**63 - 1), (7, 2**32, 2**31 + 1)]
_OVERFLOW_CALLS = {"zeros": "pf.zeros({s})", "ones": "pf.ones(*{s})", "full": "pf.full({s}, 1.0)",
                   "rand": "pf.rand({s})", "randn": "pf.randn({s})",
                   "randint": "pf.randint(0, 9, {s})",
                   "broadcast_to": "pf.broadcast_to(pf.ones(1), {s})",
                   "reshape": "pf.reshape(pf.zeros(0), {s})",
                   "reshape_minus_one": "pf.reshape(pf.zeros(6), (-1,) + {s})"}


# Each case is evaluated in a child process: "ok" cases must give the stated
# value, the others must raise the stated error type (by name) with a
# message starting with the function name in brackets.
_ISOLATED = {
    "zeros_2_62_sum": ("pf.zeros(2**62).sum().item()", "ValueError"),
    "ones_2_40_squared": ("pf.ones(2**40, 2**40).sum().item()", "ValueError"),
    "eye_2_31": ("pf.eye(2**31).numpy()", "ValueError|OutOfMemoryError"),
    "arange_2_62": ("pf.arange(0, 2**62).sum().item()", "ValueError|OutOfMemoryError"),
    "broadcast_add": ("(pf.broadcast_to(pf.ones(1), (2**62,)) + 1).sum().item()",
                      "ValueError|OutOfMemoryError"),
    "rand_2_62": ("pf.rand(2**62).sum().item()", "ValueError|OutOfMemoryError"),
    "randint_2_62": ("pf.randint(0, 5, (2**62,)).sum().item()", "ValueError|OutOfMemoryError"),
    "concat_big": ("pf.concat([pf.broadcast_to(pf.ones(1), (2**62,))] * 4).sum().item()",
                   "ValueError"),
    "reshape_empty_to_huge": ("pf.zeros(0).reshape(2**62, 4)", "ValueError"),
    "zeros_int64_max_bytes": ("pf.zeros(2**61, dtype=pf.int64).numpy()", "ValueError"),
    "alloc_too_big": ("pf.zeros(2**50).numpy()", "OutOfMemoryError|ValueError"),
    "getitem_2_63": ("pf.ones(3)[2**63]", "IndexError"),
    # torch gives a zero gradient (a CPU scatter-add once divided by the empty extent).
    "gather_grad_empty_index": (
        "pf.grad(pf.gather((x := pf.ones((2, 3), requires_grad=True)), 0, "
        "pf.zeros((0, 3), dtype=pf.int64)), x, pf.zeros((0, 3))).numpy()", "ok"),
}
_ISOLATED.update({f"{op}_{'x'.join(str(d) for d in shape)}": (code.format(s=shape), "ValueError")
                  for shape in _OVERFLOW_SHAPES for op, code in _OVERFLOW_CALLS.items()})
_CHILD = textwrap.dedent("""
    import json, sys
    import pyflame as pf
    pf.set_device(sys.argv[1])
    for name, code in json.loads(sys.stdin.read()):
        print("START", name, flush=True)
        try:
            eval(code)
            print("RESULT", json.dumps([name, "ok", ""]), flush=True)
        except BaseException as e:
            print("RESULT", json.dumps([name, type(e).__name__, str(e)[:300]]), flush=True)
""")

_results = {}


def _run_isolated(device):
    """Runs every case in child processes (restarting after a crash) and
    returns {name: (kind, message)}, kind 'crash:<rc>' for a dead child."""
    if device in _results:
        return _results[device]
    todo = list(_ISOLATED.items())
    out = {}
    env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") or "detect_leaks=0")
    while todo:
        cases = [(n, c) for n, (c, _) in todo]
        proc = subprocess.run([sys.executable, "-c", _CHILD, device], input=json.dumps(cases),
                              capture_output=True, text=True, timeout=600, env=env)
        started = None
        for line in proc.stdout.splitlines():
            if line.startswith("START "):
                started = line.split(" ", 1)[1]
            elif line.startswith("RESULT "):
                name, kind, msg = json.loads(line.split(" ", 1)[1])
                out[name] = (kind, msg)
                started = None
        if started is not None:
            out[started] = (f"crash:{proc.returncode}", proc.stderr[-2000:])
        done = set(out)
        if proc.returncode != 0 and started is None and not [n for n, _ in todo if n in done]:
            raise RuntimeError(f"child failed before any case: {proc.stderr[-2000:]}")
        todo = [(n, v) for n, v in todo if n not in done]
    _results[device] = out
    return out


@pytest.mark.parametrize("case", list(_ISOLATED))
def test_huge_sizes_isolated(device, case):
    kind, msg = _run_isolated(device)[case]
    code, want = _ISOLATED[case]
    assert not kind.startswith("crash"), f"{code} crashed the process ({kind}): {msg}"
    assert kind in want.split("|"), f"{code}: {kind}: {msg} (expected {want})"
    if kind == "ok":
        return
    assert msg.lstrip("'\"").startswith("["), f"{code}: message {msg!r}"
    assert "std::" not in msg and "vector" not in msg, f"{code}: C++ internals in {msg!r}"
