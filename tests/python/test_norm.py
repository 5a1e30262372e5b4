"""layer_norm, group_norm and rms_norm against torch.nn.functional in float64
(rms_norm against a float64 NumPy reference), on every device."""
import numpy as np
import pytest

import pyflame as pf
from conftest import FLOAT_DTYPES, assert_close, make_tensor, random_array, rounded, t64, torch_or_skip


def _ref_layer_norm(x, ns, w=None, b=None, eps=1e-5):
    _, F = torch_or_skip()
    return F.layer_norm(t64(x), tuple(ns), t64(w), t64(b), eps).numpy()


def _ref_group_norm(x, g, w=None, b=None, eps=1e-5):
    _, F = torch_or_skip()
    return F.group_norm(t64(x), g, t64(w), t64(b), eps).numpy()


def _ref_rms_norm(x, w=None, eps=1e-6):
    x = np.asarray(x, dtype=np.float64)
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if w is None else y * np.asarray(w, dtype=np.float64)


F32 = dict(rtol=1e-5, atol=1e-5)


def _affine(n, with_w, with_b, dtype="float32"):
    shape = n if isinstance(n, tuple) else (n,)
    w = random_array(shape, dtype, -2, 2) if with_w else None
    b = random_array(shape, dtype, -1, 1) if with_b else None
    return w, b


def _t(a, dtype="float32"):
    return None if a is None else make_tensor(a, dtype)


# ------------------------------------------------------------------ layer_norm

# Row lengths reaching every GPU path: register-cached with 1, 2, 4 and 8 slots
# per thread (vectorized or not), and the generic path for long rows.
@pytest.mark.parametrize("cols", [1, 7, 64, 300, 1024, 3001, 4096, 12288, 20000])
@pytest.mark.parametrize("affine", [(False, False), (True, True)])
def test_layer_norm_row_lengths(device, cols, affine):
    x = random_array((3, cols), "float32", -3, 3)
    w, b = _affine(cols, *affine)
    out = pf.layer_norm(make_tensor(x), cols, _t(w), _t(b))
    assert_close(out, _ref_layer_norm(x, (cols,), w, b), "float32", device=device, **F32)


@pytest.mark.parametrize("shape,ns", [((2, 3, 8), (3, 8)), ((4, 5), (5,)), ((6,), (6,)),
                                      ((2, 2, 3, 4), (2, 3, 4)), ((3, 1), (1,))])
@pytest.mark.parametrize("affine", [(False, False), (True, False), (False, True), (True, True)])
def test_layer_norm_shapes_and_affine(device, shape, ns, affine):
    x = random_array(shape, "float32")
    w, b = _affine(tuple(ns), *affine)
    out = pf.layer_norm(make_tensor(x), ns, _t(w), _t(b))
    assert_close(out, _ref_layer_norm(x, ns, w, b), "float32", device=device, **F32)


@pytest.mark.parametrize("eps", [0.0, 1e-12, 1e-5, 0.1, 10.0])
def test_layer_norm_eps(device, eps):
    x = random_array((4, 33), "float32", -2, 2)
    assert_close(pf.layer_norm(make_tensor(x), (33,), eps=eps), _ref_layer_norm(x, (33,), eps=eps),
                 "float32", **F32)


def test_layer_norm_normalized_shape_forms(device):
    x = random_array((2, 3, 4), "float32")
    t = make_tensor(x)
    want = _ref_layer_norm(x, (4,))
    for ns in (4, (4,), [4], np.int64(4)):
        assert_close(pf.layer_norm(t, ns), want, "float32", **F32)
    assert_close(pf.layer_norm(t, [3, 4]), _ref_layer_norm(x, (3, 4)), "float32", **F32)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("cols", [40, 1024, 4096, 5000])
def test_layer_norm_dtypes(device, dtype, cols):
    x = random_array((3, cols), dtype, -3, 3)
    w, b = _affine(cols, True, True, dtype)
    out = pf.layer_norm(make_tensor(x, dtype), cols, _t(w, dtype), _t(b, dtype))
    assert_close(out, _ref_layer_norm(x, (cols,), w, b), dtype, device=device,
                 **(F32 if dtype == "float32" else {}))


def test_layer_norm_mixed_affine_dtypes(device):
    # 16-bit input with float32 affine (mixed precision) and the reverse.
    x = random_array((4, 64), "bfloat16")
    w, b = _affine(64, True, True, "float32")
    assert_close(pf.layer_norm(make_tensor(x, "bfloat16"), 64, _t(w), _t(b)),
                 _ref_layer_norm(x, (64,), w, b), "bfloat16")
    x = random_array((4, 64), "float32")
    w, b = _affine(64, True, True, "float16")
    assert_close(pf.layer_norm(make_tensor(x), 64, _t(w, "float16"), _t(b, "float16")),
                 _ref_layer_norm(x, (64,), w, b), "float32", **F32)


def test_layer_norm_non_contiguous(device):
    x = random_array((6, 8, 5), "float32")
    t = make_tensor(x)
    for tv, xv in ((t.T, x.T), (t[::2, :, ::-1], x[::2, :, ::-1]), (t[:, 1:7], x[:, 1:7]),
                   (pf.broadcast_to(t[:1], (3, 8, 5)), np.broadcast_to(x[:1], (3, 8, 5)))):
        ns = tuple(xv.shape[-2:])
        assert_close(pf.layer_norm(tv, ns), _ref_layer_norm(xv, ns), "float32", **F32)
    # Non-contiguous weight and bias.
    wb = random_array((2, 5), "float32")
    wt = make_tensor(wb)
    assert_close(pf.layer_norm(t, 5, wt[0, ::-1], wt[1, ::-1]),
                 _ref_layer_norm(x, (5,), wb[0, ::-1], wb[1, ::-1]), "float32", **F32)


def test_layer_norm_unaligned_views(device):
    # Contiguous views at odd element offsets (no 16-byte alignment).
    flat = random_array((1 + 3 * 4096,), "float32")
    x = flat[1:].reshape(3, 4096)
    t = pf.reshape(make_tensor(flat)[1:], (3, 4096))
    wfull = random_array((4097,), "float32")
    w = wfull[1:]
    out = pf.layer_norm(t, 4096, make_tensor(wfull)[1:], None)
    assert_close(out, _ref_layer_norm(x, (4096,), w), "float32", **F32)
    assert_close(pf.rms_norm(t, make_tensor(wfull)[1:]), _ref_rms_norm(x, w), "float32", **F32)


def test_layer_norm_constant_rows_and_offsets(device):
    x = np.zeros((4, 256))
    x[1] = 7.0
    x[2] = rounded(np.random.uniform(-1, 1, 256) + 50.0, "float32")  # large mean, small spread
    x[3] = rounded(np.random.uniform(-1e-3, 1e-3, 256), "float32")
    w, b = _affine(256, True, True)
    out = pf.layer_norm(make_tensor(x, "float32"), 256, _t(w), _t(b))
    assert_close(out, _ref_layer_norm(x, (256,), w, b), "float32", rtol=1e-4, atol=1e-4)
    got = out.numpy()
    np.testing.assert_allclose(got[:2], np.broadcast_to(b, (2, 256)), rtol=0, atol=1e-6)


def test_layer_norm_nonfinite(device):
    x = random_array((3, 16), "float32")
    x[0, 3] = np.nan
    x[1, 0] = np.inf
    out = pf.layer_norm(make_tensor(x), 16).numpy()
    assert np.isnan(out[0]).all() and np.isnan(out[1]).all()
    np.testing.assert_allclose(out[2], _ref_layer_norm(x[2:], (16,))[0], rtol=1e-5, atol=1e-5)


def test_layer_norm_empty(device):
    assert_close(pf.layer_norm(pf.zeros((0, 5)), 5), np.zeros((0, 5)), "float32")
    assert_close(pf.layer_norm(pf.zeros((3, 0)), 0), np.zeros((3, 0)), "float32")
    assert_close(pf.group_norm(pf.zeros((0, 4, 3)), 2), np.zeros((0, 4, 3)), "float32")
    assert_close(pf.rms_norm(pf.zeros((0, 8))), np.zeros((0, 8)), "float32")


def test_layer_norm_errors(device):
    x = pf.zeros((2, 3, 4))
    with pytest.raises(ValueError, match=r"^\[layer_norm\] normalized_shape \(3,\) does not match"):
        pf.layer_norm(x, 3)
    with pytest.raises(ValueError, match=r"^\[layer_norm\] normalized_shape \(1,2,3,4\)"):
        pf.layer_norm(x, (1, 2, 3, 4))
    with pytest.raises(ValueError, match=r"^\[layer_norm\] normalized_shape must have at least one"):
        pf.layer_norm(x, ())
    with pytest.raises(ValueError, match=r"^\[layer_norm\] normalized_shape must be an int"):
        pf.layer_norm(x, "4")
    with pytest.raises(ValueError, match=r"^\[layer_norm\] normalized_shape must be an int"):
        pf.layer_norm(x, (4.0,))
    with pytest.raises(ValueError, match=r"^\[layer_norm\] weight must have shape \(4,\), got \(3,\)"):
        pf.layer_norm(x, 4, pf.ones(3))
    with pytest.raises(ValueError, match=r"^\[layer_norm\] bias must have shape \(3,4\)"):
        pf.layer_norm(x, (3, 4), None, pf.ones(4))
    with pytest.raises(ValueError, match=r"^\[layer_norm\] weight must be a floating-point"):
        pf.layer_norm(x, 4, pf.ones(4, dtype=pf.int32))
    with pytest.raises(ValueError, match=r"^\[layer_norm\] expected a floating-point input, got int64"):
        pf.layer_norm(pf.zeros((2, 4), dtype=pf.int64), 4)
    with pytest.raises(ValueError, match=r"^\[layer_norm\] eps must be"):
        pf.layer_norm(x, 4, eps=-1e-5)
    with pytest.raises(ValueError, match=r"^\[layer_norm\] eps must be"):
        pf.layer_norm(x, 4, eps=float("nan"))
    # Still usable afterwards.
    assert_close(pf.layer_norm(pf.ones((2, 4)), 4), np.zeros((2, 4)), "float32")


def test_norm_device_mismatch(gpu_device):
    x = pf.zeros((2, 4), device=gpu_device)
    with pytest.raises(ValueError, match=r"^\[layer_norm\] tensors are on different devices"):
        pf.layer_norm(x, 4, pf.ones(4, device="cpu"))
    with pytest.raises(ValueError, match=r"^\[rms_norm\] tensors are on different devices"):
        pf.rms_norm(x, pf.ones(4, device="cpu"))
    # NumPy weights follow the input's device.
    w = random_array((4,), "float32")
    assert_close(pf.rms_norm(x, w), np.zeros((2, 4)), "float32", device=gpu_device)


# ------------------------------------------------------------------ group_norm

@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((2, 6, 5), 1), ((2, 6, 5), 6),
                                          ((3, 4), 2), ((2, 8, 4, 4), 4), ((1, 4, 2, 3, 2), 2),
                                          ((2, 32, 40, 40), 8)])
@pytest.mark.parametrize("affine", [(False, False), (True, True), (True, False)])
def test_group_norm(device, shape, groups, affine):
    x = random_array(shape, "float32")
    w, b = _affine(shape[1], *affine)
    out = pf.group_norm(make_tensor(x), groups, _t(w), _t(b))
    assert_close(out, _ref_group_norm(x, groups, w, b), "float32", device=device, **F32)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_group_norm_dtypes_and_eps(device, dtype):
    x = random_array((2, 8, 3, 5), dtype)
    w, b = _affine(8, True, True, dtype)
    for eps in (1e-5, 0.5):
        out = pf.group_norm(make_tensor(x, dtype), 4, _t(w, dtype), _t(b, dtype), eps=eps)
        assert_close(out, _ref_group_norm(x, 4, w, b, eps), dtype, device=device,
                     **(F32 if dtype == "float32" else {}))


def test_group_norm_non_contiguous(device):
    x = random_array((4, 6, 3, 5), "float32")
    t = make_tensor(x)
    xv, tv = x.transpose(0, 1, 3, 2)[::2], pf.swapaxes(t, 2, 3)[::2]
    assert_close(pf.group_norm(tv, 3), _ref_group_norm(xv, 3), "float32", **F32)


def test_group_norm_errors(device):
    x = pf.zeros((2, 6, 4))
    with pytest.raises(ValueError, match=r"^\[group_norm\] the number of channels \(6\) must be "
                                         r"divisible by num_groups \(4\)"):
        pf.group_norm(x, 4)
    with pytest.raises(ValueError, match=r"^\[group_norm\] num_groups must be positive"):
        pf.group_norm(x, 0)
    with pytest.raises(ValueError, match=r"^\[group_norm\] expected an input of shape \(N, C, \*\)"):
        pf.group_norm(pf.zeros((6,)), 2)
    with pytest.raises(ValueError, match=r"^\[group_norm\] weight must have shape \(6,\), got \(3,\)"):
        pf.group_norm(x, 3, pf.ones(3))
    with pytest.raises(ValueError, match=r"^\[group_norm\] bias must have shape \(6,\), got \(6,1\)"):
        pf.group_norm(x, 3, None, pf.ones((6, 1)))
    with pytest.raises(ValueError, match=r"^\[group_norm\] expected a floating-point input"):
        pf.group_norm(pf.zeros((2, 6), dtype=pf.int32), 3)
    assert_close(pf.group_norm(pf.ones((2, 6, 4)), 3), np.zeros((2, 6, 4)), "float32")


# -------------------------------------------------------------------- rms_norm

@pytest.mark.parametrize("shape", [(3, 1), (4, 7), (2, 3, 64), (5,), (3, 1000), (2, 4096),
                                   (2, 12288), (2, 20000)])
@pytest.mark.parametrize("with_w", [False, True])
def test_rms_norm(device, shape, with_w):
    x = random_array(shape, "float32")
    w = random_array(shape[-1:], "float32") if with_w else None
    out = pf.rms_norm(make_tensor(x), _t(w))
    assert_close(out, _ref_rms_norm(x, w), "float32", device=device, **F32)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("cols", [24, 2048, 3000])
def test_rms_norm_dtypes(device, dtype, cols):
    x = random_array((3, cols), dtype)
    w = random_array((cols,), dtype, -2, 2)
    out = pf.rms_norm(make_tensor(x, dtype), _t(w, dtype))
    assert_close(out, _ref_rms_norm(x, w), dtype, device=device, **(F32 if dtype == "float32" else {}))


def test_rms_norm_eps_and_non_contiguous(device):
    x = random_array((5, 6), "float32", -1e-3, 1e-3)  # eps matters at this scale
    t = make_tensor(x)
    for eps in (0.0, 1e-6, 1e-3):
        assert_close(pf.rms_norm(t, eps=eps), _ref_rms_norm(x, eps=eps), "float32", rtol=1e-5, atol=1e-5)
    assert_close(pf.rms_norm(t.T), _ref_rms_norm(x.T), "float32", **F32)
    assert_close(pf.rms_norm(t[::-1, 1::2]), _ref_rms_norm(x[::-1, 1::2]), "float32", **F32)
    assert_close(pf.rms_norm(pf.zeros((2, 3)), eps=1e-6), np.zeros((2, 3)), "float32")


def test_rms_norm_errors(device):
    with pytest.raises(ValueError, match=r"^\[rms_norm\] expected at least a 1-d input"):
        pf.rms_norm(pf.tensor(1.0))
    with pytest.raises(ValueError, match=r"^\[rms_norm\] weight must have shape \(4,\), got \(2,4\)"):
        pf.rms_norm(pf.zeros((2, 4)), pf.ones((2, 4)))
    with pytest.raises(ValueError, match=r"^\[rms_norm\] expected a floating-point input, got bool"):
        pf.rms_norm(pf.zeros((2, 4), dtype=pf.bool_))
    with pytest.raises(ValueError, match=r"^\[rms_norm\] eps must be"):
        pf.rms_norm(pf.zeros((2, 4)), eps=-1.0)
    assert_close(pf.rms_norm(pf.full((2, 4), 3.0), eps=0.0), np.ones((2, 4)), "float32")
