"""The vectorized math of the CPU kernels (backend/cpu/vec_math.h): lengths
that leave a partial vector, misaligned and strided views, special values,
and results that depend only on the value (never on its position), in both
instruction sets."""
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


_BASELINE_CHECK = r"""
import numpy as np, pyflame as pf
from pyflame import _core
x = np.linspace(-6, 6, 1037).astype(np.float32)
for name, ref in [("exp", np.exp), ("tanh", np.tanh), ("sin", np.sin)]:
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
