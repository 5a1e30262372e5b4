"""max_pool1d/2d/3d, avg_pool1d/2d/3d, adaptive_avg_pool1d/2d/3d and
adaptive_max_pool1d/2d/3d against
torch.nn.functional (float64 on the CPU, from the same values)."""
import itertools

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


# ---- max pooling's row kernel on the GPU (2- or 3-wide stride-2 x windows):
# results bit for bit against a NumPy model of the kernels' rule (taps in
# row-major window order from -inf, `v > m or v != v`: the window's last NaN
# wins, so NaN signs show the order), and GPU against CPU.

def _pool_out(n, k, s, p, d, ceil_mode):
    num = n + 2 * p - d * (k - 1) - 1
    o = (-(-num // s) if ceil_mode else num // s) + 1
    return o - 1 if ceil_mode and (o - 1) * s >= n + p else o


def _max_pool_model(x, k, s, p, d, ceil_mode):
    nsp = len(k)
    sp = x.shape[x.ndim - nsp:]
    outs = [_pool_out(sp[i], k[i], s[i], p[i], d[i], ceil_mode) for i in range(nsp)]
    m = np.full(x.shape[:x.ndim - nsp] + tuple(outs), -np.inf, x.dtype)
    for taps in itertools.product(*[range(kk) for kk in k]):
        v, valid = x, np.ones(outs, bool)
        for i, t in enumerate(taps):
            idx = np.arange(outs[i]) * s[i] - p[i] + t * d[i]
            v = np.take(v, np.clip(idx, 0, sp[i] - 1), axis=x.ndim - nsp + i)
            valid &= ((idx >= 0) & (idx < sp[i])).reshape([-1 if j == i else 1 for j in range(nsp)])
        v = np.where(valid, v, -np.inf).astype(x.dtype)
        with np.errstate(invalid="ignore"):
            m = np.where((v > m) | np.isnan(v), v, m)
    return m


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize])


def _specials(x, seed=0):
    """NaNs of both signs (some windows get several), infinities, a -inf plane."""
    r = np.random.default_rng(seed)
    flat = x.reshape(-1)
    n = flat.size
    flat[r.choice(n, max(1, n // 40), replace=False)] = np.nan
    flat[r.choice(n, max(1, n // 40), replace=False)] = -np.nan
    flat[r.choice(n, max(1, n // 50), replace=False)] = np.inf
    flat[r.choice(n, max(1, n // 50), replace=False)] = -np.inf
    x.reshape((-1,) + x.shape[-2:])[0] = -np.inf
    return x


def _check_model(fn, t, k, s, p, d, ceil_mode, device):
    got = getattr(pf, fn)(t, k, s, p, d, ceil_mode)
    want = _max_pool_model(t.numpy(), k, s, p, d, ceil_mode)
    assert got.device.split(":")[0] == device.split(":")[0]
    assert tuple(got.shape) == want.shape
    _same_bits(got.numpy(), want, device)
    if device != "cpu":
        cpu = getattr(pf, fn)(t.to("cpu"), k, s, p, d, ceil_mode)
        _same_bits(got.numpy(), cpu.numpy(), device)


def _same_bits(got, want, device):
    """Bit for bit, except that NVIDIA's float -> float16 conversion gives
    every NaN one canonical pattern (the order is then seen in float32,
    bfloat16 and float64): there a NaN need only be a NaN."""
    if got.dtype == np.float16 and device != "cpu":
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan)
        got, want = np.where(nan, 0, got).astype(got.dtype), np.where(nan, 0, want).astype(want.dtype)
    np.testing.assert_array_equal(_bits(got), _bits(want))


# (shape, kernel, stride, padding, dilation, ceil_mode): odd widths, tails,
# ceil_mode windows past the end, 3x3 s2 p1, window heights and y dilation
# the row kernel takes, and (last) an x dilation it leaves to the generic one.
ROW_CASES = [
    ((2, 3, 8, 56), (2, 2), (2, 2), (0, 0), (1, 1), False),
    ((3, 5, 8, 57), (2, 2), (2, 2), (0, 0), (1, 1), False),
    ((3, 5, 9, 57), (2, 2), (2, 2), (0, 0), (1, 1), True),
    ((2, 3, 6, 7), (2, 2), (2, 2), (0, 0), (1, 1), False),
    ((2, 3, 7, 7), (2, 2), (2, 2), (1, 1), (1, 1), True),
    ((2, 4, 9, 16), (3, 3), (2, 2), (1, 1), (1, 1), False),
    ((2, 3, 11, 57), (3, 3), (2, 2), (1, 1), (1, 1), True),
    ((2, 3, 12, 33), (3, 3), (2, 2), (0, 0), (1, 1), True),
    ((1, 2, 7, 64), (3, 2), (1, 2), (1, 0), (1, 1), False),
    ((1, 2, 10, 40), (2, 3), (3, 2), (1, 1), (2, 1), False),
    ((1, 2, 10, 40), (2, 2), (2, 2), (0, 1), (1, 2), False),
]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("shape,k,s,p,d,ceil_mode", ROW_CASES)
def test_max_pool_row_kernel(device, dtype, shape, k, s, p, d, ceil_mode):
    x = _specials(random_array(shape, dtype))
    _check_model("max_pool2d", make_tensor(x, dtype), k, s, p, d, ceil_mode, device)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_max_pool_row_kernel_views(device, dtype):
    x = _specials(random_array((2, 3, 10, 58), dtype), 1)
    t = make_tensor(x, dtype)
    # Odd widths from a sliced view (made contiguous), and a row-major view
    # one element into its buffer: no row is 16-byte aligned.
    for v in (t[..., 1:], t[..., 3:], t[:, 1:, 2:]):
        _check_model("max_pool2d", v, (2, 2), (2, 2), (0, 0), (1, 1), False, device)
        _check_model("max_pool2d", v, (3, 3), (2, 2), (1, 1), (1, 1), True, device)
    flat = make_tensor(x.reshape(-1), dtype)
    for off in (1, 2, 3):
        v = flat[off:off + 2 * 3 * 10 * 56].reshape(2, 3, 10, 56)
        assert v._layout[1] == off
        _check_model("max_pool2d", v, (2, 2), (2, 2), (0, 0), (1, 1), False, device)
    xs = torch.from_numpy(np.asarray(x[..., 1:], np.float64))
    assert_close(pf.max_pool2d(t[..., 1:], 2), F.max_pool2d(xs, 2).numpy(), dtype, 0, 0, device=device)


def test_max_pool_row_kernel_1d_3d(device):
    x = _specials(random_array((3, 4, 6, 5, 37), "float32"), 2)
    t = make_tensor(x)
    _check_model("max_pool1d", t[0, 0], (2,), (2,), (0,), (1,), False, device)
    _check_model("max_pool1d", t[0, 0], (3,), (2,), (1,), (1,), True, device)
    _check_model("max_pool3d", t, (1, 2, 2), (1, 2, 2), (0, 0, 0), (1, 1, 1), False, device)
    _check_model("max_pool3d", t, (1, 3, 3), (1, 2, 2), (0, 1, 1), (1, 1, 1), True, device)
    _check_model("max_pool3d", t, (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), False, device)


def test_max_pool_row_kernel_all_neg_inf(device):
    t = pf.full((2, 3, 6, 9), float("-inf"))
    for args in ((2,), (3, 2, 1), (3, 2, 1, 1, True)):
        got = pf.max_pool2d(t, *args).numpy()
        assert np.all(np.isneginf(got)), got


def test_max_pool_row_kernel_many_planes(gpu_device):
    # More (plane, row) chunks than one grid covers (a grid-stride pass), N*C
    # in the hundreds; GPU only (34 MB; the CPU path is the one above).
    device = gpu_device
    x = random_array((8, 64, 128, 130), "float32")
    x[3, 7, 5, 9] = np.nan
    x[7, 63, 127, 129] = np.nan
    _check_model("max_pool2d", make_tensor(x), (2, 2), (2, 2), (0, 0), (1, 1), False, device)
    _check_model("max_pool2d", make_tensor(x[:, :8]), (3, 3), (2, 2), (1, 1), (1, 1), False, device)
