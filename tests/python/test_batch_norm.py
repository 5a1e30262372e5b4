"""batch_norm against torch.nn.functional.batch_norm (float64 on the CPU):
inference with running statistics, training with batch statistics and the
in-place running-statistics update."""
import numpy as np
import pytest

import pyflame as pf
from conftest import assert_close, make_tensor, random_array

torch = pytest.importorskip("torch")
F = torch.nn.functional

TOL = {"float32": (1e-5, 1e-5), "float16": (2e-3, 2e-3), "bfloat16": (1e-2, 2e-2)}


def _t(a):
    return None if a is None else torch.from_numpy(np.array(a, dtype=np.float64))


def _params(C, affine=True):
    w = random_array((C,), "float32", 0.5, 2.0) if affine else None
    b = random_array((C,), "float32", -1, 1) if affine else None
    rm = random_array((C,), "float32", -1, 1)
    rv = random_array((C,), "float32", 0.5, 2.0)
    return w, b, rm, rv


@pytest.mark.parametrize("shape", [(6, 4), (3, 5, 7), (2, 3, 5, 6), (2, 3, 3, 4, 5)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_inference(device, shape, affine):
    x = random_array(shape, "float32")
    w, b, rm, rv = _params(shape[1], affine)
    want = F.batch_norm(_t(x), _t(rm), _t(rv), _t(w), _t(b), False, 0.1, 1e-3).numpy()
    rmt, rvt = make_tensor(rm), make_tensor(rv)
    out = pf.batch_norm(make_tensor(x), rmt, rvt, None if w is None else make_tensor(w),
                        None if b is None else make_tensor(b), eps=1e-3)
    assert_close(out, want, "float32", *TOL["float32"], device=device)
    np.testing.assert_array_equal(rmt.numpy(), rm.astype(np.float32))  # untouched in inference
    np.testing.assert_array_equal(rvt.numpy(), rv.astype(np.float32))


@pytest.mark.parametrize("shape", [(8, 4), (4, 3, 9), (3, 4, 5, 6), (2, 2, 3, 4, 5)])
@pytest.mark.parametrize("momentum", [0.1, 0.5])
def test_batch_norm_training_updates_running_stats(device, shape, momentum):
    x = random_array(shape, "float32", -2, 3)
    w, b, rm, rv = _params(shape[1])
    trm, trv = _t(rm), _t(rv)
    want = F.batch_norm(_t(x), trm, trv, _t(w), _t(b), True, momentum, 1e-5).numpy()
    rmt, rvt = make_tensor(rm), make_tensor(rv)
    handle_m, handle_v = rmt, rvt
    out = pf.batch_norm(make_tensor(x), rmt, rvt, make_tensor(w), make_tensor(b), training=True,
                        momentum=momentum)
    assert_close(out, want, "float32", 1e-4, 1e-4, device=device)
    # The caller's handles now hold the updated statistics (unbiased variance).
    assert handle_m is rmt and handle_v is rvt
    assert_close(rmt, trm.numpy(), "float32", 1e-5, 1e-6, device=device)
    assert_close(rvt, trv.numpy(), "float32", 1e-5, 1e-6, device=device)


def test_batch_norm_training_repeated_steps(device):
    C = 3
    rmt, rvt = pf.zeros((C,)), pf.ones((C,))
    trm, trv = torch.zeros(C, dtype=torch.float64), torch.ones(C, dtype=torch.float64)
    for step in range(3):
        x = random_array((4, C, 5), "float32", -1 + step, 2 + step)
        want = F.batch_norm(_t(x), trm, trv, None, None, True, 0.2, 1e-5).numpy()
        out = pf.batch_norm(make_tensor(x), rmt, rvt, training=True, momentum=0.2)
        assert_close(out, want, "float32", 1e-4, 1e-4)
    assert_close(rmt, trm.numpy(), "float32", 1e-5, 1e-6)
    assert_close(rvt, trv.numpy(), "float32", 1e-5, 1e-6)


def test_batch_norm_training_without_running_stats(device):
    x = random_array((5, 3, 4), "float32")
    want = F.batch_norm(_t(x), None, None, None, None, True, 0.1, 1e-5).numpy()
    assert_close(pf.batch_norm(make_tensor(x), None, None, training=True), want, "float32", 1e-4, 1e-4,
                 device=device)


def test_batch_norm_training_large_offset_channels(device):
    # A large mean per channel: the two-pass variance stays accurate.
    x = random_array((16, 3, 32, 32), "float32") + np.array([0.0, 100.0, -1000.0])[None, :, None, None]
    w, b, rm, rv = _params(3)
    trm, trv = _t(rm), _t(rv)
    want = F.batch_norm(_t(x), trm, trv, _t(w), _t(b), True, 0.1, 1e-5).numpy()
    rmt, rvt = make_tensor(rm), make_tensor(rv)
    out = pf.batch_norm(make_tensor(x), rmt, rvt, make_tensor(w), make_tensor(b), training=True)
    assert_close(out, want, "float32", 1e-3, 1e-3, device=device)
    assert_close(rmt, trm.numpy(), "float32", 1e-5, 1e-4)
    assert_close(rvt, trv.numpy(), "float32", 1e-4, 1e-4)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("training", [False, True])
def test_batch_norm_low_precision(device, dtype, training):
    x = random_array((4, 3, 6, 5), dtype)
    w, b, rm, rv = _params(3)
    trm, trv = _t(rm), _t(rv)
    want = F.batch_norm(_t(x), trm, trv, _t(w), _t(b), training, 0.1, 1e-5).numpy()
    rmt, rvt = make_tensor(rm), make_tensor(rv)  # float32 running stats, as mixed precision keeps them
    out = pf.batch_norm(make_tensor(x, dtype), rmt, rvt, make_tensor(w), make_tensor(b), training=training)
    assert_close(out, want, dtype, *TOL[dtype], device=device)
    assert str(rmt.dtype) == "float32"
    assert_close(rmt, trm.numpy(), "float32", 1e-4, 1e-4)
    assert_close(rvt, trv.numpy(), "float32", 1e-4, 1e-4)
    # 16-bit running statistics keep their dtype
    rmh = make_tensor(rm, dtype)
    pf.batch_norm(make_tensor(x, dtype), rmh, make_tensor(rv, dtype), training=True)
    assert str(rmh.dtype) == dtype


def test_batch_norm_non_contiguous(device):
    big = random_array((6, 4, 10), "float32")
    x = pf.swapaxes(make_tensor(big), 0, 2)[::2]  # (5, 4, 6) view
    xn = big.swapaxes(0, 2)[::2]
    w, b, rm, rv = _params(4)
    rmb = random_array((8,), "float32", -1, 1)
    rmt = make_tensor(rmb)[::2]  # a strided running-mean view
    trm, trv = _t(rmb[::2]), _t(rv)
    want = F.batch_norm(_t(xn), trm, trv, _t(w), _t(b), True, 0.1, 1e-5).numpy()
    rvt = make_tensor(rv)
    out = pf.batch_norm(x, rmt, rvt, make_tensor(w), make_tensor(b), training=True)
    assert_close(out, want, "float32", 1e-4, 1e-4, device=device)
    assert_close(rmt, trm.numpy(), "float32", 1e-5, 1e-6)
    assert_close(rvt, trv.numpy(), "float32", 1e-5, 1e-6)


def _raises(call, match=""):
    with pytest.raises(ValueError, match=r"^\[batch_norm\]" + match):
        call()


def test_batch_norm_bad_inputs(device):
    x = pf.randn((4, 3, 5))
    rm, rv = pf.zeros((3,)), pf.ones((3,))
    bn = pf.batch_norm
    _raises(lambda: bn(pf.randn((3,)), rm, rv), ".*at least 2 axes")
    _raises(lambda: bn(x, pf.zeros((4,)), rv), ".*running_mean")
    _raises(lambda: bn(x, rm, pf.ones((3, 1))), ".*running_var")
    _raises(lambda: bn(x, rm, rv, pf.ones((2,))), ".*weight")
    _raises(lambda: bn(x, rm, rv, None, pf.ones((4,))), ".*bias")
    _raises(lambda: bn(x, None, None), ".*required")
    _raises(lambda: bn(x, rm, None, training=True), ".*together")
    _raises(lambda: bn(pf.randn((1, 3)), rm, rv, training=True), ".*more than 1 value per channel")
    _raises(lambda: bn(x.astype("int32"), rm, rv), ".*floating")
    _raises(lambda: bn(x, rm.astype("int64"), rv), ".*floating")
    _raises(lambda: bn(x, rm, rv, eps=-1.0), ".*eps")
    _raises(lambda: bn(x, rm, rv, training=True, momentum=None), ".*momentum")
    _raises(lambda: bn(x, np.zeros(3, np.float32), np.ones(3, np.float32), training=True), ".*pf.Tensor")
    assert rm.numpy().tolist() == [0, 0, 0]  # nothing updated by the failed calls
    # still usable
    xs = random_array((4, 3, 5), "float32")
    want = F.batch_norm(_t(xs), None, None, None, None, True).numpy()
    assert_close(bn(make_tensor(xs), None, None, training=True), want, "float32", 1e-4, 1e-4)
