"""max_pool1d/2d/3d, avg_pool1d/2d/3d, adaptive_avg_pool1d/2d/3d and
adaptive_max_pool1d/2d/3d against
torch.nn.functional (float64 on the CPU, from the same values)."""
import numpy as np
import pytest

import pyflame as pf
from conftest import assert_close, make_tensor, random_array, rounded

torch = pytest.importorskip("torch")
F = torch.nn.functional

TOL = {"float32": (1e-5, 1e-6), "float16": (1e-3, 1e-3), "bfloat16": (1e-2, 1e-2), "float64": (1e-12, 0)}


def _check(fn, x, *args, dtype="float32", device=None, **kw):
    want = getattr(F, fn)(torch.from_numpy(np.asarray(x, np.float64)), *args, **kw).numpy()
    got = getattr(pf, fn)(make_tensor(x, dtype), *args, **kw)
    assert_close(got, want, dtype, *TOL[dtype], device=device)


# (kernel, stride, padding, dilation, ceil_mode)
MAX2D_CASES = [
    (2, None, 0, 1, False),
    (3, 2, 1, 1, False),
    (3, 2, 1, 1, True),
    ((3, 2), (2, 1), (1, 0), 1, False),
    (3, 3, 0, 1, True),
    (2, 1, 1, 2, False),
    (3, 2, 1, (2, 1), True),
    (4, 3, 2, 1, True),
]


@pytest.mark.parametrize("kernel,stride,padding,dilation,ceil_mode", MAX2D_CASES)
def test_max_pool2d_params(device, kernel, stride, padding, dilation, ceil_mode):
    x = random_array((2, 3, 10, 11), "float32")
    _check("max_pool2d", x, kernel, stride, padding, dilation, ceil_mode, device=device)


@pytest.mark.parametrize("kernel,stride,padding,dilation,ceil_mode", [
    (3, None, 0, 1, False), (4, 2, 2, 1, True), (3, 2, 1, 3, False), (2, 3, 1, 1, True)])
def test_max_pool1d_3d_params(device, kernel, stride, padding, dilation, ceil_mode):
    _check("max_pool1d", random_array((2, 3, 13), "float32"), kernel, stride, padding, dilation, ceil_mode,
           device=device)
    _check("max_pool3d", random_array((2, 2, 7, 8, 9), "float32"), kernel, stride, padding, dilation, ceil_mode,
           device=device)


# (kernel, stride, padding, ceil_mode, count_include_pad)
AVG_CASES = [
    (2, None, 0, False, True),
    (3, 2, 1, False, True),
    (3, 2, 1, False, False),
    (3, 2, 1, True, True),
    (3, 2, 1, True, False),
    ((2, 3), (1, 2), (1, 1), True, True),
    (4, 3, 2, True, False),
    (5, 1, 2, False, False),
]


@pytest.mark.parametrize("kernel,stride,padding,ceil_mode,count_include_pad", AVG_CASES)
def test_avg_pool2d_params(device, kernel, stride, padding, ceil_mode, count_include_pad):
    x = random_array((2, 3, 10, 11), "float32")
    _check("avg_pool2d", x, kernel, stride, padding, ceil_mode, count_include_pad, device=device)


@pytest.mark.parametrize("kernel,stride,padding,ceil_mode,count_include_pad", AVG_CASES[1:6])
def test_avg_pool1d_3d_params(device, kernel, stride, padding, ceil_mode, count_include_pad):
    k1 = kernel if isinstance(kernel, int) else kernel[0]
    s1 = stride if stride is None or isinstance(stride, int) else stride[0]
    p1 = padding if isinstance(padding, int) else padding[0]
    _check("avg_pool1d", random_array((2, 3, 13), "float32"), k1, s1, p1, ceil_mode, count_include_pad,
           device=device)
    _check("avg_pool3d", random_array((2, 2, 6, 7, 8), "float32"), k1, s1, p1, ceil_mode, count_include_pad,
           device=device)


@pytest.mark.parametrize("fn,shape", [("avg_pool2d", (2, 3, 9, 8)), ("avg_pool3d", (1, 2, 5, 6, 7))])
def test_avg_pool_divisor_override(device, fn, shape):
    x = random_array(shape, "float32")
    _check(fn, x, 3, 2, 1, False, True, divisor_override=5, device=device)
    _check(fn, x, 2, ceil_mode=True, divisor_override=3, device=device)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_pool_low_precision(device, dtype):
    x = random_array((2, 4, 9, 10), dtype)
    _check("max_pool2d", x, 3, 2, 1, dtype=dtype, device=device)
    _check("max_pool2d", x, 3, 2, 1, 2, True, dtype=dtype, device=device)
    _check("avg_pool2d", x, 3, 2, 1, dtype=dtype, device=device)
    _check("avg_pool2d", x, 3, 2, 1, True, False, dtype=dtype, device=device)
    _check("max_pool1d", random_array((2, 3, 11), dtype), 2, dtype=dtype, device=device)
    _check("avg_pool3d", random_array((1, 2, 4, 5, 6), dtype), 2, dtype=dtype, device=device)
    _check("adaptive_avg_pool2d", x, (4, 3), dtype=dtype, device=device)


def test_max_pool_nan_and_inf(device):
    x = random_array((1, 2, 6, 6), "float32")
    x[0, 0, 1, 1] = np.nan
    x[0, 1, 4, 4] = np.inf
    x[0, 1, 0, 0] = -np.inf
    for args in ((2,), (3, 2, 1), (3, 1, 1, 2, True)):
        _check("max_pool2d", x, *args, device=device)


@pytest.mark.parametrize("kernel,stride,padding,dilation", [(2, 2, 0, 1), (3, 2, 1, 1), (5, 3, 2, 2), (3, 1, 0, 1)])
def test_max_pool_long_rows(device, kernel, stride, padding, dilation):
    # Rows longer than the CPU's output chunk, widths not a multiple of it,
    # NaN and infinities inside and at the edges of the interior windows.
    x = random_array((2, 3, 7, 301), "float32")
    x[0, 0, 3, 150] = np.nan
    x[0, 1, 2, 0] = np.nan
    x[1, 2, 5, 300] = np.inf
    x[1, 0, 4, 77] = -np.inf
    _check("max_pool2d", x, kernel, stride, padding, dilation, device=device)
    _check("max_pool2d", x[:, :, 1:, 3:], kernel, stride, padding, dilation, device=device)  # offset start
    _check("max_pool1d", x[0], kernel, stride, padding, dilation, device=device)
    for dtype in ("float64", "float16"):
        _check("max_pool2d", rounded(x, dtype), kernel, stride, padding, dilation, dtype=dtype, device=device)


def test_pool_unbatched_and_non_contiguous(device):
    x = random_array((3, 8, 9), "float32")
    _check("max_pool2d", x, 2, device=device)
    _check("avg_pool2d", x, 3, 2, 1, device=device)
    _check("max_pool1d", random_array((3, 10), "float32"), 3, 2, device=device)
    _check("adaptive_avg_pool2d", x, 4, device=device)
    big = random_array((2, 4, 10, 18), "float32")
    t = make_tensor(big)[:, ::2, :, ::2]
    xs = torch.from_numpy(big[:, ::2, :, ::2].copy())
    assert_close(pf.max_pool2d(t, 3, 2, 1), F.max_pool2d(xs, 3, 2, 1).numpy(), "float32", device=device)
    assert_close(pf.avg_pool2d(t, 2, 1, 1, True, False), F.avg_pool2d(xs, 2, 1, 1, True, False).numpy(), "float32")
    tt = pf.swapaxes(make_tensor(big), 2, 3)
    xt = torch.from_numpy(big.swapaxes(2, 3).copy())
    assert_close(pf.adaptive_avg_pool2d(tt, (3, 5)), F.adaptive_avg_pool2d(xt, (3, 5)).numpy(), "float32")


@pytest.mark.parametrize("output_size", [1, 3, (4, 5), (None, 2), (7, None), (10, 13), (12, 4)])
def test_adaptive_avg_pool2d(device, output_size):
    x = random_array((2, 3, 10, 11), "float32")
    _check("adaptive_avg_pool2d", x, output_size, device=device)


def test_adaptive_avg_pool_1d_3d(device):
    _check("adaptive_avg_pool1d", random_array((2, 3, 11), "float32"), 4, device=device)
    _check("adaptive_avg_pool1d", random_array((2, 3, 5), "float32"), 8, device=device)
    _check("adaptive_avg_pool3d", random_array((1, 2, 5, 6, 7), "float32"), (2, None, 3), device=device)
    _check("adaptive_avg_pool3d", random_array((1, 2, 5, 6, 7), "float32"), 1, device=device)


@pytest.mark.parametrize("fn,shape,size", [("adaptive_max_pool1d", (2, 3, 11), 4),
                                           ("adaptive_max_pool2d", (2, 3, 10, 11), (4, None)),
                                           ("adaptive_max_pool2d", (3, 7, 5), (9, 2)),
                                           ("adaptive_max_pool3d", (1, 2, 5, 6, 7), (2, 3, 3))])
def test_adaptive_max_pool(device, fn, shape, size):
    x = random_array(shape, "float32")
    x.reshape(-1)[3] = np.nan
    _check(fn, x, size, device=device)


def test_pool_large_planes(device):
    # Many planes and big windows (the DNN-library path on the GPU).
    x = random_array((4, 16, 33, 35), "float32")
    _check("max_pool2d", x, 3, 2, 1, device=device)
    _check("avg_pool2d", x, 3, 2, 1, device=device)
    _check("avg_pool2d", x, 2, 2, device=device)


def _raises(fn_name, call, match=""):
    with pytest.raises(ValueError, match=r"^\[" + fn_name + r"\]" + match):
        call()


def test_pool_bad_inputs(device):
    x = pf.randn((2, 3, 8, 8))
    _raises("max_pool2d", lambda: pf.max_pool2d(x, 0), ".*kernel_size")
    _raises("max_pool2d", lambda: pf.max_pool2d(x, 2, stride=0), ".*stride")
    _raises("max_pool2d", lambda: pf.max_pool2d(x, 2, padding=-1), ".*padding")
    _raises("max_pool2d", lambda: pf.max_pool2d(x, 3, padding=2), ".*half")
    _raises("max_pool2d", lambda: pf.max_pool2d(x, 2, dilation=0), ".*dilation")
    _raises("max_pool2d", lambda: pf.max_pool2d(x, 9), ".*larger than the padded input")
    _raises("max_pool2d", lambda: pf.max_pool2d(x, 5, dilation=2), ".*larger than the padded input")
    _raises("max_pool2d", lambda: pf.max_pool2d(x, (2, 2, 2)), ".*kernel_size")
    _raises("max_pool2d", lambda: pf.max_pool2d(pf.randn((8,)), 2), ".*input")
    _raises("max_pool2d", lambda: pf.max_pool2d(pf.randn((1, 1, 1, 4, 4)), 2), ".*input")
    _raises("max_pool2d", lambda: pf.max_pool2d(x.astype("int32"), 2), ".*floating")
    _raises("max_pool2d", lambda: pf.max_pool2d(x, 2, return_indices=True), ".*return_indices")
    _raises("max_pool2d", lambda: pf.max_pool2d(pf.zeros((1, 3, 0, 4)), 1), ".*non-empty")
    _raises("avg_pool2d", lambda: pf.avg_pool2d(x, 2, padding=2), ".*half")
    _raises("avg_pool2d", lambda: pf.avg_pool2d(x, 10), ".*larger than the padded input")
    _raises("avg_pool2d", lambda: pf.avg_pool2d(x, 2, divisor_override=0), ".*divisor_override")
    _raises("avg_pool2d", lambda: pf.avg_pool2d(x, 2.5), ".*kernel_size")
    _raises("avg_pool1d", lambda: pf.avg_pool1d(pf.randn((2, 3, 8)), 2, stride=-1), ".*stride")
    _raises("avg_pool3d", lambda: pf.avg_pool3d(x, 2, stride=(1, 1)), ".*stride")
    _raises("max_pool1d", lambda: pf.max_pool1d(pf.randn((2, 3, 4)), 3, dilation=2), ".*larger")
    _raises("adaptive_avg_pool2d", lambda: pf.adaptive_avg_pool2d(x, (2, 2, 2)), ".*output_size")
    _raises("adaptive_avg_pool2d", lambda: pf.adaptive_avg_pool2d(x, -1), ".*non-negative")
    _raises("adaptive_avg_pool2d", lambda: pf.adaptive_avg_pool2d(pf.randn((4, 4)), 2), ".*input")
    _raises("adaptive_max_pool2d", lambda: pf.adaptive_max_pool2d(x, 2, return_indices=True), ".*return_indices")
    _raises("adaptive_avg_pool1d", lambda: pf.adaptive_avg_pool1d(pf.randn((2, 3, 4)).astype("int64"), 2),
            ".*floating")
    # still usable
    _check("max_pool2d", random_array((1, 2, 5, 5), "float32"), 2, device=device)
