"""The vectorized math of the CPU kernels (backend/cpu/vec_math.h): lengths
that leave a partial vector, misaligned and strided views, special values,
and results that depend only on the value (never on its position), in both
instruction sets."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import pyflame as pf
from conftest import assert_close
from test_elementwise import UNARY

VEC_OPS = ["sqrt", "exp", "log", "sin", "cos", "tanh", "sigmoid", "gelu", "gelu_tanh", "silu", "erf"]
SIZES = [0, 1, 7, 8, 9, 17, 1025]


def _inputs(name, n, dtype):
    _, _, (lo, hi) = UNARY[name]
    return np.random.uniform(lo, hi, n).astype(dtype).astype(np.float64)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("name", VEC_OPS)
def test_unary_tails(device, name, n, dtype):
    fn, ref, _ = UNARY[name]
    x = _inputs(name, n, dtype)
    assert_close(fn(pf.tensor(x.astype(dtype))), ref(x), dtype)


@pytest.mark.parametrize("name", VEC_OPS)
def test_unary_same_value_same_result(device, name):
    # A value's result is the same alone, in a full vector, in the padded
    # tail and at any offset: what keeps fused and unfused bit-identical.
    fn, _, _ = UNARY[name]
    x = _inputs(name, 1025, "float32").astype(np.float32)
    whole = fn(pf.tensor(x)).numpy()
    for start, stop in [(1, 1025), (3, 1020), (1017, 1025), (5, 6)]:
        part = fn(pf.tensor(x)[start:stop]).numpy()
        np.testing.assert_array_equal(part, whole[start:stop])
    np.testing.assert_array_equal(fn(pf.tensor(x)[::3]).numpy(), whole[::3])


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name", VEC_OPS)
def test_unary_views(device, name, dtype):
    fn, ref, _ = UNARY[name]
    x = _inputs(name, (9, 131), "float32")
    t = pf.tensor(x.astype(np.float32)).astype(dtype)
    xs = t.astype("float64").numpy()
    assert_close(fn(t[1:, 3:]), ref(xs[1:, 3:]), dtype)  # offset rows, odd length
    assert_close(fn(t.T), ref(xs.T), dtype)  # strided
    assert_close(fn(t[:, ::2]), ref(xs[:, ::2]), dtype)


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 1e30, -1e30, 88.5, -88.5,
                    104.0, -104.0, 3.4e38, -3.4e38, 1e-45])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", VEC_OPS)
def test_unary_special_values(device, name, dtype):
    torch = pytest.importorskip("torch")
    fn, _, _ = UNARY[name]
    tfn = {"sqrt": torch.sqrt, "exp": torch.exp, "log": torch.log, "sin": torch.sin, "cos": torch.cos,
           "tanh": torch.tanh, "sigmoid": torch.sigmoid, "erf": torch.erf,
           "gelu": torch.nn.functional.gelu, "silu": torch.nn.functional.silu,
           "gelu_tanh": lambda v: torch.nn.functional.gelu(v, approximate="tanh")}[name]
    x = np.tile(SPECIAL.astype(dtype), 3)[:41]  # special values in full vectors and the tail
    got = fn(pf.tensor(x)).numpy().astype(np.float64)
    want = tfn(torch.from_numpy(x.astype(np.float64))).numpy()
    with np.errstate(over="ignore", invalid="ignore"):
        want = want.astype(dtype).astype(np.float64)  # float64 reference rounded to dtype
    keep = np.ones(x.shape, bool)
    if name in ("gelu", "gelu_tanh"):
        keep = ~np.isneginf(x)  # x * (1 + erf(-inf)) is -inf * 0: NaN here (as before), 0 in PyTorch
    if name in ("sin", "cos"):
        big = np.abs(x) > 1e5  # huge arguments: only the range is meaningful in float32
        assert np.all(np.abs(got[big & np.isfinite(x)]) <= 1)
        keep = ~big
    got, want = got[keep], want[keep]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    fin = np.isfinite(want)
    np.testing.assert_array_equal(got[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)])
    rtol = 2e-6 if dtype == "float32" else 1e-14
    np.testing.assert_allclose(got[fin], want[fin], rtol=rtol, atol=1e-37 if dtype == "float32" else 0)


def _ulps(got, want):
    want32 = want.astype(np.float32)
    return np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want32)).astype(np.float64)


def test_erf_ulps():
    # The float erf is our own (vec_math_impl.h): within 1.5 ulp of the exact value,
    # across both of its branches and the saturation to 1.
    x = np.concatenate([np.linspace(-4.5, 4.5, 200001), np.geomspace(1e-38, 4, 20001)]).astype(np.float32)
    want = np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))
    got = pf.erf(pf.tensor(x, device="cpu")).numpy()
    assert _ulps(got, want).max() <= 1.5
    assert _ulps(-pf.erf(pf.tensor(-x, device="cpu")).numpy(), want).max() <= 1.5  # odd


_BASELINE_CHECK = r"""
import numpy as np, pyflame as pf
from pyflame import _core
x = np.linspace(-6, 6, 1037).astype(np.float32)
import math
for name, ref in [("exp", np.exp), ("tanh", np.tanh), ("sin", np.sin), ("erf", np.vectorize(math.erf))]:
    got = getattr(pf, name)(pf.tensor(x)).numpy()
    np.testing.assert_allclose(got, ref(x.astype(np.float64)), rtol=3e-6, atol=1e-7)
    np.testing.assert_array_equal(getattr(pf, name)(pf.tensor(x)[5:12]).numpy(), got[5:12])
np.testing.assert_allclose(pf.sum(pf.tensor(x)).item(), x.astype(np.float64).sum(), atol=1e-3)
print(_core._cpu_vec_isa())
"""


def test_baseline_instruction_set():
    # PYFLAME_CPU_ISA=sse2 forces the kernels every x86-64 runs.
    env = dict(os.environ, PYFLAME_CPU_ISA="sse2")
    out = subprocess.run([sys.executable, "-c", _BASELINE_CHECK], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "sse2"


def _view(x, offset):
    """A view of x starting `offset` elements into a larger tensor (misaligned)."""
    pad = np.concatenate([np.zeros(offset, x.dtype), x.reshape(-1)])
    return pf.tensor(pad)[offset:].reshape(x.shape)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", SIZES + [70001])
def test_sum_mean_tails(device, n, dtype):
    x = np.random.uniform(-1, 2, n).astype(dtype)
    for off in (0, 3):
        t = _view(x, off)
        ref = x.astype(np.float64)
        assert_close(pf.sum(t), np.sum(ref), dtype, rtol=1e-6, atol=1e-6)
        if n:
            assert_close(pf.mean(t), np.mean(ref), dtype, rtol=1e-6, atol=1e-6)


def test_sum_special_values(device):
    x = np.random.rand(1030).astype(np.float32)
    for pos in (0, 517, 1029):  # in a full vector and in the tail
        for v, want in [(np.nan, np.nan), (np.inf, np.inf), (-np.inf, -np.inf)]:
            y = x.copy()
            y[pos] = v
            got = pf.sum(pf.tensor(y)).item()
            assert (np.isnan(got) if np.isnan(want) else got == want), (pos, v, got)
    if device == "cpu":  # GPU reductions accumulate in float32, as PyTorch's do
        y = np.full(1027, 3e38, np.float32)  # float partial sums would overflow; the CPU's double sum does not
        y[1::2] = -3e38
        assert_close(pf.sum(pf.tensor(y)), np.float64(y[0]), "float32", rtol=1e-6)


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("cols", [1, 7, 9, 1025])
def test_softmax_rows(device, cols):
    x = np.random.randn(5, cols).astype(np.float32) * 4
    t = _view(x, 1)
    assert_close(pf.softmax(t, -1), _softmax(x.astype(np.float64)), "float32")
    assert_close(pf.log_softmax(t, -1), np.log(_softmax(x.astype(np.float64))), "float32", atol=1e-5)


def test_softmax_special_values(device):
    x = np.random.randn(4, 1025).astype(np.float32)
    x[0, 1024] = np.nan  # in the tail: the row is NaN
    x[1, 3] = np.nan
    x[2, 5] = -np.inf  # an exact zero, the rest finite
    x[3, 7] = 1e30  # one value takes all
    got = pf.softmax(pf.tensor(x), -1).numpy()
    assert np.isnan(got[0]).all() and np.isnan(got[1]).all()
    assert got[2, 5] == 0 and np.isfinite(got[2]).all()
    np.testing.assert_allclose(got[2].sum(), 1, rtol=1e-5)
    assert got[3, 7] == 1 and (np.delete(got[3], 7) == 0).all()


@pytest.mark.parametrize("cols", [1, 7, 9, 1025])
def test_norm_rows(device, cols):
    # A mean far from zero: the variance must not lose the spread.
    x = (100 + np.random.randn(6, cols) * 0.1).astype(np.float32)
    w = np.random.rand(cols).astype(np.float32) + 0.5
    b = np.random.randn(cols).astype(np.float32)
    t = _view(x, 3)
    xd = x.astype(np.float64)
    mean, var = xd.mean(-1, keepdims=True), xd.var(-1, keepdims=True)
    ln = (xd - mean) / np.sqrt(var + 1e-5) * w + b
    assert_close(pf.layer_norm(t, (cols,), pf.tensor(w), pf.tensor(b), 1e-5), ln, "float32", rtol=1e-3, atol=1e-3)
    rms = xd / np.sqrt((xd * xd).mean(-1, keepdims=True) + 1e-6) * w
    assert_close(pf.rms_norm(t, pf.tensor(w), 1e-6), rms, "float32")
