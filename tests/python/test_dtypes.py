"""The dtypes float64, int8, int16 and uint8: promotion (checked against
torch.promote_types and NumPy), conversions, and each op family on the new
dtypes against NumPy or PyTorch, on every device under test."""
import math

import numpy as np
import pytest

import pyflame as pf
from conftest import assert_close, make_tensor, random_array

NEW = ["float64", "int8", "int16", "uint8"]
ALL = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
INTS = ["uint8", "int8", "int16"]


def torch_dtype(torch, name):
    return getattr(torch, "bool" if name == "bool" else name)


# ------------------------------------------------------------------ promotion

def test_promotion_table_matches_torch():
    torch = pytest.importorskip("torch")
    for a in ALL:
        for b in ALL:
            want = torch.promote_types(torch_dtype(torch, a), torch_dtype(torch, b))
            want = str(want).split(".")[1]
            assert str(pf.promote_types(a, b)) == want, (a, b)


def test_promotion_within_kinds_matches_numpy():
    # The Array API table inside a kind is NumPy's (NumPy has no bfloat16, and
    # differs from the standard across kinds).
    kinds = [["bool"], ["uint8", "int8", "int16", "int32", "int64"], ["float16", "float32", "float64"]]
    for kind in kinds:
        for a in kind:
            for b in kind:
                assert str(pf.promote_types(a, b)) == np.promote_types(a, b).name, (a, b)


@pytest.mark.parametrize("a,b", [("uint8", "int8"), ("uint8", "int64"), ("int8", "int16"),
                                 ("int16", "float16"), ("float32", "float64"), ("bool", "uint8"),
                                 ("int64", "float64"), ("bfloat16", "float64")])
def test_binary_ops_promote(device, a, b):
    torch = pytest.importorskip("torch")
    x = make_tensor(random_array((5,), a), a)
    y = make_tensor(random_array((5,), b), b)
    want = str(torch.promote_types(torch_dtype(torch, a), torch_dtype(torch, b))).split(".")[1]
    for out in (x + y, y * x, pf.maximum(x, y)):
        assert str(out.dtype) == want
    assert (x < y).dtype == pf.bool_


@pytest.mark.parametrize("dtype", NEW + ["float16"])
def test_python_scalars_stay_weak(device, dtype):
    torch = pytest.importorskip("torch")
    x = make_tensor(random_array((4,), dtype, 0, 5), dtype)
    tx = torch.zeros(4, dtype=torch_dtype(torch, dtype))
    for scalar in (3, 2.5, True):
        got = (x + scalar).dtype, (scalar * x).dtype
        want = str((tx + scalar).dtype).split(".")[1]
        assert str(got[0]) == want and str(got[1]) == want, (dtype, scalar)


def test_dtype_objects_and_info():
    assert pf.double is pf.float64 and pf.short is pf.int16
    for name in NEW:
        d = getattr(pf, name)
        assert str(d) == name and d.itemsize == np.dtype(name).itemsize
        assert d.is_floating_point == (name == "float64")
        assert d.is_signed == (name != "uint8")
    torch = pytest.importorskip("torch")
    for name in ("float16", "float32", "float64", "bfloat16"):
        f, t = pf.finfo(name), torch.finfo(getattr(torch, name))
        assert (f.bits, f.eps, f.max, f.min, f.smallest_normal, f.resolution) == \
            (t.bits, t.eps, t.max, t.min, t.smallest_normal, t.resolution), name
        if name != "bfloat16":
            n = np.finfo(name)
            assert (f.eps, f.max, f.smallest_normal) == (n.eps, n.max, n.smallest_normal)
    for name in INTS + ["int32", "int64"]:
        i, n = pf.iinfo(name), np.iinfo(name)
        assert (i.bits, i.min, i.max) == (n.bits, int(n.min), int(n.max))
    with pytest.raises(ValueError, match=r"^\[finfo\] .*int8"):
        pf.finfo(pf.int8)
    with pytest.raises(ValueError, match=r"^\[iinfo\] .*float64"):
        pf.iinfo("float64")


# ---------------------------------------------------------------- conversions

@pytest.mark.parametrize("dtype", NEW)
def test_numpy_round_trip_and_item(device, dtype):
    x = random_array((3, 4), dtype, -100, 100)
    t = pf.tensor(x)
    assert t.dtype == getattr(pf, dtype)
    got = t.numpy()
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, x)
    v = t[1, 2].item()
    assert type(v) is (float if dtype == "float64" else int) and v == x[1, 2]


def test_float64_item_keeps_every_bit(device):
    assert pf.tensor(np.float64(1 / 3)).item() == 1 / 3
    assert pf.tensor(np.array([2**60 + 1])).astype("int64").item() == 2**60 + 1


def _astype_values(src):
    """Values of dtype src that every target holds or converts the same way
    in NumPy and PyTorch: small non-negative integers and float fractions."""
    if src == "bool":
        return np.array([True, False, True])
    if src in ("float64", "float32", "float16"):
        return np.array([0.0, 1.75, 100.5, -0.5, 7.25, 126.9], dtype=src)
    return np.array([0, 1, 7, 100, 127], dtype=src)


@pytest.mark.parametrize("src", ["bool", "uint8", "int8", "int16", "int32", "int64", "float16",
                                 "float32", "float64"])
def test_astype_every_pair(device, src):
    x = _astype_values(src)
    t = pf.tensor(x)
    for dst in ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]:
        want = x.astype(dst)  # floats truncate toward zero
        assert_close(t.astype(dst), want, dst, rtol=0, atol=0)


def test_float_to_small_int_wraps_as_torch(device):
    torch = pytest.importorskip("torch")
    x = np.array([-1.0, -200.7, 300.2, 70000.9, -129.0, 255.5, 40000.0, -3e9, 5e9])
    for dst in INTS:
        want = torch.from_numpy(x).to(torch_dtype(torch, dst)).numpy()
        if dst != "uint8":  # PyTorch converts to int8/int16 directly (UB beyond int32)
            keep = np.abs(x) < 2**31
            want, got = want[keep], pf.tensor(x).astype(dst).numpy()[keep]
        else:
            got = pf.tensor(x).astype(dst).numpy()
        np.testing.assert_array_equal(got, want, err_msg=dst)
    nan = pf.tensor(np.array([np.nan, np.inf, -np.inf]))
    np.testing.assert_array_equal(nan.astype("uint8").numpy(), [0, 0, 0])


def test_float64_to_bool_sees_tiny_values(device):
    x = np.array([1e-300, 0.0, -5e-324, np.nan])
    np.testing.assert_array_equal(pf.tensor(x).astype("bool").numpy(), x.astype(bool))


@pytest.mark.parametrize("dtype", NEW)
def test_dlpack_with_torch(dtype):
    torch = pytest.importorskip("torch")
    x = random_array((3, 5), dtype, -50, 50)
    t = torch.from_numpy(x.copy())
    p = pf.from_dlpack(t)
    assert p.dtype == getattr(pf, dtype)
    np.testing.assert_array_equal(p.numpy(), x)
    back = torch.from_dlpack(p)
    assert back.dtype == torch_dtype(torch, dtype)
    np.testing.assert_array_equal(back.numpy(), x)


def test_save_load_new_dtypes(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    arrays = {d: random_array((2, 3), d, -60, 60) for d in NEW}
    path = tmp_path / "t.safetensors"
    pf.save({d: pf.tensor(a) for d, a in arrays.items()}, path)
    loaded = pf.load(path)
    raw = st.load_file(str(path))  # an independent reader
    for d, a in arrays.items():
        assert loaded[d].dtype == getattr(pf, d)
        np.testing.assert_array_equal(loaded[d].numpy(), a)
        np.testing.assert_array_equal(raw[d], a)
    other = tmp_path / "np.safetensors"
    st.save_file({d: a for d, a in arrays.items()}, str(other))
    for d, t in pf.load(other).items():
        assert t.dtype == getattr(pf, d)
        np.testing.assert_array_equal(t.numpy(), arrays[d])


# ---------------------------------------------------------------- elementwise

@pytest.mark.parametrize("dtype", INTS)
def test_int_arithmetic_wraps_as_numpy(device, dtype):
    info = np.iinfo(dtype)
    a = np.random.randint(info.min, int(info.max) + 1, size=(4, 33)).astype(dtype)
    b = np.random.randint(info.min, int(info.max) + 1, size=(33,)).astype(dtype)
    ta, tb = pf.tensor(a), pf.tensor(b)
    with np.errstate(over="ignore"):
        for got, want in [(ta + tb, a + b), (ta - tb, a - b), (ta * tb, a * b), (-ta, -a),
                          (pf.abs(ta), np.abs(a)), (pf.maximum(ta, tb), np.maximum(a, b)),
                          (pf.minimum(ta, tb), np.minimum(a, b))]:
            assert_close(got, want, dtype)
    for got, want in [(ta < tb, a < b), (ta == tb, a == b), (ta >= tb, a >= b)]:
        assert_close(got, want, "bool")
    assert_close(ta / tb.astype("float32").clamp(min=1), a / np.maximum(b, 1).astype(np.float32),
                 "float32")
    assert_close(pf.pow(ta, pf.tensor(np.array([0, 1, 2, 3], dtype=dtype)).reshape(4, 1)),
                 a ** np.array([0, 1, 2, 3], dtype=dtype).reshape(4, 1), dtype)


def test_int_true_division_gives_float32(device):
    a = np.array([7, -7, 100], dtype=np.int8)
    b = np.array([2, 2, -3], dtype=np.int8)
    assert_close(pf.tensor(a) / pf.tensor(b), (a / b).astype(np.float32), "float32")
    u = np.array([255, 3], dtype=np.uint8)
    assert_close(pf.tensor(u) / 2, (u / 2).astype(np.float32), "float32")


def test_float64_unary_in_double_precision(device):
    torch = pytest.importorskip("torch")
    x = np.random.uniform(0.1, 3.0, size=(257,))
    t, tt = pf.tensor(x), torch.from_numpy(x)
    cases = [(pf.exp, torch.exp), (pf.log, torch.log), (pf.sqrt, torch.sqrt), (pf.sin, torch.sin),
             (pf.cos, torch.cos), (pf.tanh, torch.tanh), (pf.sigmoid, torch.sigmoid),
             (pf.erf, torch.erf), (pf.silu, torch.nn.functional.silu),
             (pf.gelu, torch.nn.functional.gelu)]
    for f, g in cases:
        assert_close(f(t), g(tt).numpy(), "float64", rtol=1e-13, atol=1e-15)
    assert_close(pf.pow(t, t), x ** x, "float64", rtol=1e-13, atol=0)
    # A float32 computation would miss this: 1 + 1e-12 rounds to 1 in float32.
    assert_close(pf.log(pf.tensor(np.array([1 + 1e-12]))), np.log([1 + 1e-12]), "float64",
                 rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", NEW)
def test_where_and_clamp(device, dtype):
    x = random_array((6, 7), dtype, -20, 20)
    y = random_array((7,), dtype, -20, 20)
    c = np.random.rand(6, 7) < 0.5
    t = pf.tensor(x)
    assert_close(pf.where(pf.tensor(c), t, pf.tensor(y)), np.where(c, x, y), dtype)
    lo = 0 if dtype == "uint8" else -5
    assert_close(t.clamp(min=lo, max=9), np.clip(x, lo, 9), dtype)


# ----------------------------------------------------------------- reductions

@pytest.mark.parametrize("dtype", INTS)
def test_int_reductions(device, dtype):
    torch = pytest.importorskip("torch")
    info = np.iinfo(dtype)
    x = np.random.randint(info.min, int(info.max) + 1, size=(5, 300)).astype(dtype)
    t, tt = pf.tensor(x), torch.from_numpy(x)
    s = t.sum(1)
    assert s.dtype == pf.int64 and str(tt.sum(1).dtype) == "torch.int64"
    assert_close(s, x.sum(1, dtype=np.int64), "int64")
    assert_close(t.sum(), x.sum(dtype=np.int64), "int64")
    assert_close(t.max(1), x.max(1), dtype)
    assert_close(t.min(0), x.min(0), dtype)
    assert_close(t.mean(1), x.mean(1), "float32")
    assert_close(pf.argmax(t, 1), x.argmax(1), "int64")


def test_float64_reductions_in_double(device):
    x = np.random.randn(7, 1000) + 1e6  # a float32 sum would round away the fraction
    t = pf.tensor(x)
    # float32 accumulation would be off by ~1e-7; any double summation order is within 1e-12.
    assert_close(t.sum(1), x.sum(1), "float64", rtol=1e-12, atol=0)
    assert_close(t.mean(0), x.mean(0), "float64", rtol=1e-12, atol=0)
    assert_close(t.max(1), x.max(1), "float64", rtol=0, atol=0)
    assert_close(t.prod(0)[:3], np.prod(x[:, :3], axis=0), "float64", rtol=1e-13, atol=0)


def test_float64_softmax(device):
    torch = pytest.importorskip("torch")
    x = np.random.randn(9, 300) * 10
    t, tt = pf.tensor(x), torch.from_numpy(x)
    assert_close(pf.softmax(t, -1), torch.softmax(tt, -1).numpy(), "float64", rtol=1e-12, atol=1e-15)
    assert_close(pf.log_softmax(t, 0), torch.log_softmax(tt, 0).numpy(), "float64", rtol=1e-12,
                 atol=1e-13)


# -------------------------------------------------------------- shape, index

@pytest.mark.parametrize("dtype", NEW)
def test_shape_and_index_ops(device, dtype):
    x = random_array((4, 6), dtype, -30, 30)
    t = pf.tensor(x)
    assert_close(t.T, x.T, dtype)
    assert_close(t.reshape(3, 8), x.reshape(3, 8), dtype)
    assert_close(t[1:, ::2], x[1:, ::2], dtype)
    assert_close(pf.concat([t, t[:1]], 0), np.concatenate([x, x[:1]], 0), dtype)
    assert_close(pf.stack([t, t], 1), np.stack([x, x], 1), dtype)
    idx = np.array([3, 0, 0, 2])
    assert_close(pf.index_select(t, 0, pf.tensor(idx)), x[idx], dtype)
    g = np.random.randint(0, 6, size=(4, 3))
    assert_close(pf.gather(t, 1, pf.tensor(g)), np.take_along_axis(x, g, 1), dtype)
    assert_close(pf.broadcast_to(t[:1], (3, 6)), np.broadcast_to(x[:1], (3, 6)), dtype)


@pytest.mark.parametrize("dtype", NEW)
def test_sort_family(device, dtype):
    x = random_array((3, 50), dtype, -40, 40)
    t = pf.tensor(x)
    order = np.argsort(x, axis=1, kind="stable")
    assert_close(pf.argsort(t, 1), order, "int64")
    assert_close(pf.sort(t, 1)[0], np.sort(x, axis=1), dtype)
    want_cs = np.cumsum(x, 1) if dtype == "float64" else np.cumsum(x.astype(np.int64), 1)
    assert_close(pf.cumsum(t, 1), want_cs, "float64" if dtype == "float64" else "int64")


def test_small_int_indices_are_refused(device):
    x = pf.tensor(np.arange(5.0))
    with pytest.raises(ValueError, match=r"^\[index_select\] .*int32 or int64.*uint8"):
        pf.index_select(x, 0, pf.tensor(np.array([1], dtype=np.uint8)))


# ------------------------------------------------------------------- creation

@pytest.mark.parametrize("dtype", NEW)
def test_creation(device, dtype):
    assert_close(pf.zeros(2, 3, dtype=dtype), np.zeros((2, 3), dtype), dtype)
    assert_close(pf.ones(4, dtype=dtype), np.ones(4, dtype), dtype)
    assert_close(pf.full((2,), 7, dtype=dtype), np.full(2, 7, dtype), dtype)
    assert_close(pf.arange(0, 20, 3, dtype=dtype), np.arange(0, 20, 3, dtype=dtype), dtype)
    assert_close(pf.eye(3, 4, 1, dtype=dtype), np.eye(3, 4, 1, dtype=dtype), dtype)


@pytest.mark.parametrize("dtype", INTS)
def test_full_and_randint_check_the_range(device, dtype):
    info = np.iinfo(dtype)
    with pytest.raises(ValueError, match=r"^\[full\] .*" + dtype):
        pf.full((2,), int(info.max) + 1, dtype=dtype)
    with pytest.raises(ValueError, match=r"^\[randint\] .*" + dtype):
        pf.randint(int(info.min), int(info.max) + 2, (3,), dtype=dtype)
    r = pf.randint(int(info.min), int(info.max) + 1, (4000,), dtype=dtype).numpy()
    assert r.dtype == np.dtype(dtype) and info.min <= r.min() and r.max() <= info.max
    if info.bits == 8:  # 4000 draws of 256 values reach both ends
        assert r.min() == info.min and r.max() == info.max


def test_float64_random_draws_use_double_precision(device):
    pf.manual_seed(3)
    u = pf.rand(20000, dtype="float64").numpy()
    n = pf.randn(20000, dtype=pf.float64).numpy()
    assert u.dtype == np.float64 and 0 <= u.min() and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.01 and abs(n.mean()) < 0.03 and abs(n.std() - 1) < 0.03
    # float32-precision draws would all be exact in float32.
    assert np.mean(u.astype(np.float32).astype(np.float64) != u) > 0.9
    assert np.mean(n.astype(np.float32).astype(np.float64) != n) > 0.9


# --------------------------------------------------------------------- matmul

def test_float64_matmul(device):
    a = np.random.randn(3, 37, 65)
    b = np.random.randn(65, 29)
    got = pf.matmul(pf.tensor(a), pf.tensor(b))
    assert_close(got, a @ b, "float64", rtol=1e-12, atol=1e-12)
    assert_close(pf.matmul(pf.tensor(a).transpose(0, 2, 1)[0], pf.tensor(a)[1]), a[0].T @ a[1],
                 "float64", rtol=1e-12, atol=1e-12)
    v = np.random.randn(65)
    assert_close(pf.tensor(a)[0] @ pf.tensor(v), a[0] @ v, "float64", rtol=1e-12, atol=1e-12)
    assert_close(pf.tensor(v) @ pf.tensor(b), v @ b, "float64", rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", INTS)
def test_small_int_matmul_wraps_as_numpy(device, dtype):
    info = np.iinfo(dtype)
    a = np.random.randint(info.min, int(info.max) + 1, size=(2, 5, 9)).astype(dtype)
    b = np.random.randint(info.min, int(info.max) + 1, size=(9, 4)).astype(dtype)
    assert_close(pf.tensor(a) @ pf.tensor(b), a @ b, dtype)


def test_mixed_float_matmul_promotes(device):
    a = np.random.randn(4, 5).astype(np.float32)
    b = np.random.randn(5, 3)
    got = pf.tensor(a) @ pf.tensor(b)
    assert_close(got, a.astype(np.float64) @ b, "float64", rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------- nn, DNN

def test_conv_float64_is_refused(device):
    x = pf.tensor(np.random.randn(1, 2, 5, 5))
    w = pf.tensor(np.random.randn(3, 2, 3, 3))
    with pytest.raises(ValueError, match=r"^\[conv2d\] float64 is not supported"):
        pf.conv2d(x, w)


def test_float64_pooling_and_norms(device):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x = np.random.randn(2, 3, 8, 8)
    t, tt = pf.tensor(x), torch.from_numpy(x)
    assert_close(pf.max_pool2d(t, 2), F.max_pool2d(tt, 2).numpy(), "float64")
    assert_close(pf.avg_pool2d(t, 2), F.avg_pool2d(tt, 2).numpy(), "float64")
    ln = pf.layer_norm(t, [8])
    assert ln.dtype == pf.float64
    # Norms compute in float32 arithmetic: float32 precision.
    assert_close(ln, F.layer_norm(tt, [8]).numpy(), "float64", rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------- autograd

def test_float64_gradients(device):
    x = np.random.uniform(-2, 2, size=(5, 4))
    w = np.random.randn(4, 3)
    tx = pf.tensor(x, requires_grad=True)
    tw = pf.tensor(w, requires_grad=True)
    loss = (pf.tanh(tx @ tw) * pf.exp(tx[:, :3])).sum()
    loss.backward()
    assert tx.grad.dtype == pf.float64 and tw.grad.dtype == pf.float64
    torch = pytest.importorskip("torch")
    rx = torch.tensor(x, requires_grad=True)
    rw = torch.tensor(w, requires_grad=True)
    (torch.tanh(rx @ rw) * torch.exp(rx[:, :3])).sum().backward()
    assert_close(tx.grad, rx.grad.numpy(), "float64", rtol=1e-12, atol=1e-12)
    assert_close(tw.grad, rw.grad.numpy(), "float64", rtol=1e-12, atol=1e-12)
    assert math.isclose(loss.item(), float((np.tanh(x @ w) * np.exp(x[:, :3])).sum()), rel_tol=1e-12)
