"""Half-precision convolution (float16, bfloat16): the output and the
gradients of input, weight and bias against float64 torch on the CPU (from
the same rounded values), on every device. On the GPU, per-group channel
counts that are multiples of 8 take the DNN library's channels-last (NHWC)
path (backend/rocm/dnn.h) and the others its NCHW one; the cases cover both,
with groups, stride, padding, dilation, 1x1 and 1-d problems, transposed
convolution and channels-last (permuted) inputs. On NVIDIA those 16-bit
problems run through cuDNN's graph API, row-major as given (its engines
convert the layout) or, where it builds no such plan, channels-last after our
transposes (PYFLAME_CUDNN_GRAPH=0: the transposes and the legacy API, checked
in a fresh process). Errors are measured against
the largest reference value of each result: a 16-bit value rounds relative to
its own magnitude, and a wrong layout is off by the whole scale."""
import os
import subprocess
import sys

import numpy as np
import pytest

import pyflame as pf
from conftest import random_array
from gradcheck import pf_grads, torch_grads

torch = pytest.importorskip("torch")
F = torch.nn.functional

# Largest error over the largest |reference|: a few roundings of the result
# (float16 2^-11, bfloat16 2^-8) with fp32 accumulation.
TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.5e-2}

# (fn, in channels, out channels, spatial size, kernel, kwargs)
CASES = [
    ("conv2d", 16, 16, (10, 9), 3, dict(padding=1)),
    ("conv2d", 16, 32, (11, 11), 3, dict(stride=2, padding=1, groups=2)),
    ("conv2d", 8, 16, (9, 10), (3, 2), dict(padding=(2, 1), dilation=(2, 1))),
    ("conv2d", 16, 8, (7, 8), 1, dict()),
    ("conv2d", 3, 16, (9, 9), 3, dict(padding=1)),  # C=3: the NCHW path
    ("conv2d", 16, 16, (8, 8), 3, dict(padding=1, groups=16)),  # depthwise: NCHW
    ("conv2d", 24, 12, (6, 7), 3, dict(stride=(1, 2))),  # K/groups=12: NCHW
    ("conv1d", 16, 24, (20,), 5, dict(stride=2, padding=2)),
    ("conv_transpose2d", 16, 16, (6, 7), 3, dict(stride=2, padding=1, output_padding=1)),
    ("conv_transpose1d", 8, 16, (9,), 4, dict(stride=3, groups=2)),
]


def _case_id(c):
    return f"{c[0]}-c{c[1]}k{c[2]}-{'-'.join(f'{k}{v}' for k, v in c[5].items())}"


def _arrays(case, dtype):
    fn, cin, cout, size, k, kw = case
    nsp = len(size)
    k = (k,) * nsp if isinstance(k, int) else k
    g = kw.get("groups", 1)
    wshape = (cin, cout // g) if fn.startswith("conv_transpose") else (cout, cin // g)
    fan_in = (cin // g) * int(np.prod(k))
    x = random_array((2, cin) + size, dtype, -1, 1)
    w = random_array(wshape + k, dtype, -fan_in ** -0.5, fan_in ** -0.5)
    b = random_array((cout,), dtype, -1, 1)
    return x, w, b


def _assert_scaled_close(got, want, dtype, what):
    scale = max(float(np.abs(want).max()), 1e-3)
    err = float(np.abs(got - want).max())
    assert err <= TOL[dtype] * scale, f"{what}: max error {err:.3g} against a scale of {scale:.3g} ({dtype})"


def _check(pf_fn, torch_fn, arrays, device, dtype):
    out_ref, _ = torch_grads(torch_fn, arrays)
    cot = np.random.uniform(-1, 1, size=out_ref.shape)
    cot = pf.tensor(cot.astype(np.float32)).astype(dtype).astype("float64").numpy()  # as pf sees it
    out_ref, ref = torch_grads(torch_fn, arrays, cot)
    out, got = pf_grads(pf_fn, arrays, device, cot, dtype)
    _assert_scaled_close(out, out_ref, dtype, "output")
    for i, (g, r) in enumerate(zip(got, ref)):
        _assert_scaled_close(g, r, dtype, f"gradient of input {i}")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_conv_half_forward_and_grads(device, case, dtype):
    fn, kw = case[0], case[5]
    _check(lambda x, w, b: getattr(pf, fn)(x, w, b, **kw), lambda x, w, b: getattr(F, fn)(x, w, b, **kw),
           _arrays(case, dtype), device, dtype)


@pytest.mark.parametrize("dtype,fn,size", [("float16", "conv2d", (9, 8)), ("bfloat16", "conv2d", (9, 8)),
                                           ("bfloat16", "conv1d", (13,)), ("float16", "conv3d", (4, 5, 3)),
                                           ("float32", "conv2d", (7, 6))])
def test_conv_channels_last_input(device, dtype, fn, size):
    # x is held (N, *spatial, C) and given as its (N, C, *spatial)
    # permutation, as a channels-last tensor of PyTorch is: the convolution
    # and its weight gradient read it as it is (float32 and 3-d convert it
    # for the NCHW path on the GPU); the input gradient flows back through
    # the permutation.
    x, w, b = _arrays((fn, 16, 32, size, 3, {}), dtype)
    nd = x.ndim
    to_nhwc = (0,) + tuple(range(2, nd)) + (1,)
    to_nchw = (0, nd - 1) + tuple(range(1, nd - 1))
    kw = dict(stride=2, padding=1)
    _check(lambda x, w, b: getattr(pf, fn)(pf.transpose(x, to_nchw), w, b, **kw),
           lambda x, w, b: getattr(F, fn)(x.permute(*to_nchw), w, b, **kw),
           [np.ascontiguousarray(x.transpose(to_nhwc)), w, b], device, dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_conv_half_chain_and_repeat(device, dtype):
    # Two layers back to back (the second reads the first's converted
    # output), evaluated twice: the second run takes its algorithms from the
    # tuning cache.
    x, w1, _ = _arrays(("conv2d", 16, 16, (8, 8), 3, {}), dtype)
    _, w2, _ = _arrays(("conv2d", 16, 8, (8, 8), 3, {}), dtype)

    def f(lib):
        conv, relu = (pf.conv2d, pf.relu) if lib is pf else (F.conv2d, torch.relu)
        return lambda x, w1, w2: conv(relu(conv(x, w1, padding=1)), w2, padding=1)

    for _ in range(2):
        _check(f(pf), f(torch), [x, w1, w2], device, dtype)


def _graph_stats():
    from pyflame.backend.rocm import dnn_graph_stats
    return dnn_graph_stats()


def _graph_expected():
    # Whether 16-bit channels-last convolutions should reach cuDNN's graph
    # API in this process (see src/backend/rocm/dnn.h).
    return (pf._core.gpu_platform() == "nvidia" and os.environ.get("PYFLAME_CUDNN_GRAPH") != "0"
            and os.environ.get("PYFLAME_CONV_LAYOUT") != "nchw")


def test_conv_graph_stats_query():
    s = _graph_stats()
    assert set(s) == {"enabled", "plans_built", "plans_failed", "runs", "last_failure"}
    assert s["enabled"] == (pf._core.gpu_platform() == "nvidia" and os.environ.get("PYFLAME_CUDNN_GRAPH") != "0")
    if not s["enabled"]:
        assert (s["plans_built"], s["plans_failed"], s["runs"]) == (0, 0, 0)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_conv_half_graph_path(gpu_device, dtype):
    # A problem of its own (no plan from another test): the forward pass and
    # both gradients build one plan each through the graph API and run it;
    # the second evaluation runs the cached plans. Where the path is off
    # (AMD, PYFLAME_CUDNN_GRAPH=0, NCHW forced) nothing goes through it.
    case = ("conv2d", 24, 16, (12, 11), 3, dict(padding=1, stride=(1, 2)))
    kw = case[5]
    runs = []
    for _ in range(2):
        before = _graph_stats()
        _check(lambda x, w: pf.conv2d(x, w, **kw), lambda x, w: F.conv2d(x, w, **kw),
               list(_arrays(case, dtype)[:2]), gpu_device, dtype)
        after = _graph_stats()
        runs.append({k: after[k] - before[k] for k in ("plans_built", "plans_failed", "runs")})
    if not _graph_expected():
        assert runs == [{"plans_built": 0, "plans_failed": 0, "runs": 0}] * 2, runs
        return
    why = _graph_stats()["last_failure"]
    # One plan per direction (a plan built always runs or raises).
    assert runs[0]["plans_built"] == 3 and runs[0]["plans_failed"] == 0 and runs[0]["runs"] >= 3, (runs, why)
    assert runs[1] == dict(runs[0], plans_built=0), (runs, why)


def _rerun_in_fresh_process(gpu_device, **env_vars):
    # Settings are read once per process: this file's cases again in a
    # fresh one under env_vars.
    env = dict(os.environ, PYFLAME_TEST_DEVICES=gpu_device, **env_vars)
    out = subprocess.run([sys.executable, "-m", "pytest", os.path.basename(__file__), "-q", "-x",
                          "-p", "no:cacheprovider", "-k", "not fresh_process"],
                         env=env, cwd=os.path.dirname(os.path.abspath(__file__)), capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


@pytest.mark.parametrize("layout", ["nhwc", "nchw"])
def test_conv_forced_layout_fresh_process(gpu_device, layout):
    # Every GPU convolution channels-last (float32, odd channel counts and
    # depthwise included, which the library may reject: then the NCHW path
    # must take over) or none.
    _rerun_in_fresh_process(gpu_device, PYFLAME_CONV_LAYOUT=layout)


def test_conv_cudnn_legacy_api_fresh_process(gpu_device):
    # PYFLAME_CUDNN_GRAPH=0: the 16-bit channels-last problems through
    # cuDNN's legacy API (test_conv_half_graph_path checks nothing reaches
    # the graph API), with the same results.
    _rerun_in_fresh_process(gpu_device, PYFLAME_CUDNN_GRAPH="0")
