"""DLPack both ways: Tensor.__dlpack__ / __dlpack_device__ and pf.from_dlpack,
with NumPy and PyTorch on the CPU, and PyTorch (CUDA/ROCm), CuPy and JAX on
the GPU. Zero-copy is shown by writing through one side and reading through
the other."""
import ctypes
import gc
import os

import numpy as np
import pytest

import pyflame as pf
from conftest import EVERY_DTYPE, bf16_round

torch = pytest.importorskip("torch")

TORCH_OF = {"bool": torch.bool, "int32": torch.int32, "int64": torch.int64,
            "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
            "float64": torch.float64, "int8": torch.int8, "int16": torch.int16,
            "uint8": torch.uint8}


def _version(v):
    return tuple(int(p) for p in v.split("+")[0].split(".")[:2])


# DLPack's bool (kDLBool, DLPack 0.8) is read and written by NumPy >= 1.25
# and PyTorch >= 2.0; older ones refuse it.
NUMPY_BOOL = _version(np.__version__) >= (1, 25)
TORCH_BOOL = _version(torch.__version__) >= (2, 0)
NUMPY_DTYPES = (["bool"] if NUMPY_BOOL else []) + ["int32", "int64", "float16", "float32"]
TORCH_DTYPES = [d for d in EVERY_DTYPE if d != "bool" or TORCH_BOOL]

_capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_valid.restype = ctypes.c_int


def capsule_name_is(capsule, name):
    return bool(_capsule_valid(capsule, name.encode()))


def random_values(dtype, shape):
    if dtype == "bool":
        return np.asarray(np.random.rand(*shape) < 0.5)
    if dtype in ("int8", "int16", "int32", "int64", "uint8"):
        hi = 100 if dtype in ("int8", "uint8") else 1000
        lo = 0 if dtype == "uint8" else -hi
        return np.asarray(np.random.randint(lo, hi, size=shape)).astype(dtype)
    x = np.asarray(np.random.randn(*shape)).astype(np.float32)
    if dtype == "bfloat16":
        return bf16_round(x).reshape(shape)
    return x.astype(dtype)


def pf_tensor(x, dtype, device="cpu"):
    t = pf.tensor(np.asarray(x, dtype=np.float32) if dtype == "bfloat16" else x, device=device)
    return t.astype(dtype) if dtype == "bfloat16" else t


def torch_values(y):
    """A torch tensor's values as NumPy (bfloat16 widened to float32)."""
    y = y.detach().cpu()
    return (y.float() if y.dtype == torch.bfloat16 else y).numpy()


# ------------------------------------------------------------- export: CPU

def test_dlpack_device_cpu():
    assert pf.ones(2).__dlpack_device__() == (1, 0)


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_numpy_reads_tensor(dtype):
    x = random_values(dtype, (3, 4))
    t = pf.tensor(x)
    a = np.from_dlpack(t)
    assert a.dtype == x.dtype
    np.testing.assert_array_equal(a, x)


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_torch_shares_tensor_memory(dtype):
    x = random_values(dtype, (4, 5))
    t = pf_tensor(x, dtype)
    y = torch.from_dlpack(t)
    assert y.dtype == TORCH_OF[dtype] and tuple(y.shape) == (4, 5)
    np.testing.assert_array_equal(torch_values(y), x)
    # Zero-copy: a write through torch is seen by the tensor.
    y[1, 2] = True if dtype == "bool" else 7
    expected = np.array(x, copy=True)
    expected[1, 2] = True if dtype == "bool" else 7
    np.testing.assert_array_equal(t.numpy(), expected.astype(t.numpy().dtype))


def test_lazy_tensor_is_evaluated_before_export():
    a, b = np.random.randn(3, 3).astype(np.float32), np.random.randn(3, 3).astype(np.float32)
    t = pf.tensor(a) @ pf.tensor(b) + 1
    assert not t.is_evaluated
    y = torch.from_dlpack(t)
    np.testing.assert_allclose(y.numpy(), a @ b + 1, rtol=1e-5, atol=1e-5)


def test_export_outlives_the_tensor():
    x = np.random.randn(1000).astype(np.float32)
    t = pf.tensor(x)
    y = torch.from_dlpack(t)
    del t
    gc.collect()
    pf.randn(1000).eval()  # fresh allocations must not reuse the memory
    np.testing.assert_array_equal(y.numpy(), x)


@pytest.mark.parametrize("view", [
    lambda t: t.T,
    lambda t: t[1:, ::2],
    lambda t: t[2],
    lambda t: pf.broadcast_to(t[:1], (5, 6)),
    lambda t: t[:, 3:4],
], ids=["transpose", "slice", "row", "broadcast", "column"])
def test_views_export_their_strides(view):
    x = np.random.randn(5, 6).astype(np.float32)
    v = view(pf.tensor(x))
    y = torch.from_dlpack(v)
    np.testing.assert_array_equal(y.numpy(), v.numpy())


def test_view_export_shares_the_base_buffer():
    x = np.random.randn(4, 6).astype(np.float32)
    base = pf.tensor(x)
    v = base.T[2:, 1:3]          # strides (1, 6), offset into base
    y = torch.from_dlpack(v)
    assert tuple(y.stride()) == (1, 6)
    y[0, 0] = 42.0               # element (1, 2) of base
    x[1, 2] = 42.0
    np.testing.assert_array_equal(base.numpy(), x)


def test_negative_strides_to_numpy():
    x = np.random.randn(7, 3).astype(np.float32)
    v = pf.tensor(x)[::-2]
    a = np.from_dlpack(v)
    np.testing.assert_array_equal(a, x[::-2])


@pytest.mark.parametrize("shape", [(0,), (2, 0, 3), ()])
@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_zero_size_and_0d_export(shape, dtype):
    x = random_values(dtype, shape)
    y = torch.from_dlpack(pf_tensor(x, dtype))
    assert tuple(y.shape) == shape and y.dtype == TORCH_OF[dtype]
    np.testing.assert_array_equal(torch_values(y), x)


def test_capsule_flavors():
    t = pf.randn(3)
    assert capsule_name_is(t.__dlpack__(), "dltensor")
    assert capsule_name_is(t.__dlpack__(max_version=(0, 8)), "dltensor")
    c = t.__dlpack__(max_version=(1, 0))
    assert capsule_name_is(c, "dltensor_versioned")
    u = pf.from_dlpack(c)
    assert capsule_name_is(c, "used_dltensor_versioned")
    np.testing.assert_array_equal(u.numpy(), t.numpy())
    legacy = t.__dlpack__()
    pf.from_dlpack(legacy)
    assert capsule_name_is(legacy, "used_dltensor")
    with pytest.raises(BufferError, match=r"^\[from_dlpack\] "):
        pf.from_dlpack(legacy)  # consumed


def test_export_copy_and_device_arguments():
    x = np.random.randn(4).astype(np.float32)
    t = pf.tensor(x)
    copied = pf.from_dlpack(t.__dlpack__(copy=True))
    shared = pf.from_dlpack(t.__dlpack__(copy=False, dl_device=(1, 0)))
    torch.from_dlpack(t)[0] = 99.0
    assert copied.numpy()[0] == x[0]
    assert shared.numpy()[0] == 99.0


def test_export_argument_errors():
    t = pf.ones(2)
    with pytest.raises(ValueError, match=r"^\[__dlpack__\] .*stream"):
        t.__dlpack__(stream=5)
    with pytest.raises(ValueError, match=r"^\[__dlpack__\] .*max_version"):
        t.__dlpack__(max_version="1.0")
    with pytest.raises(ValueError, match=r"^\[__dlpack__\] .*copy"):
        t.__dlpack__(copy="yes")
    with pytest.raises(BufferError, match=r"^\[__dlpack__\] .*device"):
        t.__dlpack__(dl_device=(2, 0))
    with pytest.raises(TypeError):
        t.__dlpack__(None)  # keyword-only
    t.__dlpack__(stream=-1)  # no synchronization: accepted on the CPU


def test_array_copy_false_is_a_view():
    x = np.random.randn(3, 4).astype(np.float32)
    t = pf.tensor(x)
    view = t.__array__(copy=False)
    np.testing.assert_array_equal(view, x)
    torch.from_dlpack(t)[0, 0] = 123.0
    assert view[0, 0] == 123.0  # the same memory
    assert t.__array__(dtype=np.float32, copy=False)[0, 0] == 123.0
    with pytest.raises(ValueError, match=r"^\[__array__\] .*copy=False"):
        t.__array__(dtype=np.float64, copy=False)
    with pytest.raises(ValueError, match=r"^\[__array__\] .*bfloat16"):
        t.astype(pf.bfloat16).__array__(copy=False)
    copied = t.__array__(copy=True)
    copied[0, 0] = -1
    assert t.numpy()[0, 0] == 123.0


# ------------------------------------------------------------- import: CPU

@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_from_numpy_shares_memory(dtype):
    x = random_values(dtype, (3, 4))
    t = pf.from_dlpack(x)
    assert str(t.dtype) == dtype and t.device == "cpu" and t.is_evaluated
    np.testing.assert_array_equal(t.numpy(), x)
    x[0, 0] = not x[0, 0] if dtype == "bool" else 11
    assert t.numpy()[0, 0] == x[0, 0]


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_from_torch_shares_memory(dtype):
    x = random_values(dtype, (5, 2))
    y = torch.tensor(np.asarray(x, dtype=np.float32)).to(TORCH_OF[dtype]) \
        if dtype == "bfloat16" else torch.from_numpy(x.copy())
    t = pf.from_dlpack(y)
    assert str(t.dtype) == dtype
    np.testing.assert_array_equal(np.asarray(t.astype("float32").numpy() if dtype == "bfloat16"
                                             else t.numpy()), torch_values(y))
    y[4, 1] = True if dtype == "bool" else 3
    got = t.astype("float32").numpy() if dtype == "bfloat16" else t.numpy()
    assert got[4, 1] == (True if dtype == "bool" else 3)


def test_import_outlives_the_producer():
    x = np.random.randn(2000).astype(np.float32)
    keep = x.copy()
    t = pf.from_dlpack(x)
    del x
    gc.collect()
    np.random.randn(2000)  # churn NumPy's allocator
    np.testing.assert_array_equal(t.numpy(), keep)
    y = torch.randn(300)
    keep_y = y.numpy().copy()
    u = pf.from_dlpack(y)
    del y
    gc.collect()
    torch.randn(300)
    np.testing.assert_array_equal(u.numpy(), keep_y)


@pytest.mark.parametrize("make", [
    lambda x: x[::-1],
    lambda x: x[:, ::-3],
    lambda x: x[2:, 1:],       # byte offset into the buffer
    lambda x: x.T,
    lambda x: x[1:5:2, ::2],
    lambda x: np.lib.stride_tricks.as_strided(x[2], (6, 7), (0, 4)),  # zero strides
], ids=["neg0", "neg1", "offset", "transpose", "strided", "broadcast"])
def test_import_layouts(make):
    x = np.random.randn(6, 7).astype(np.float32)
    v = make(x)
    t = pf.from_dlpack(v)
    assert tuple(t.shape) == v.shape
    np.testing.assert_array_equal(t.numpy(), v)
    # The tensor works in ops and shares memory with x.
    np.testing.assert_allclose((t * 2 + 1).numpy(), v * 2 + 1, rtol=1e-6)
    x += 1
    np.testing.assert_array_equal(t.numpy(), make(x))


def _random_view(x, rng):
    """A random strided view of x: per axis a slice with a random (possibly
    negative) step, then a random axis permutation."""
    if x.ndim == 0:
        return x
    index = []
    for n in x.shape:
        step = int(rng.choice([1, 2, 3, -1, -2]))
        a, b = sorted(int(v) for v in rng.integers(0, n + 1, size=2))
        index.append(slice(a, b, step) if step > 0 else slice(b - 1 if b else None,
                                                                  a - 1 if a else None, step))
    v = x[tuple(index)]
    return v.transpose(rng.permutation(v.ndim))


@pytest.mark.parametrize("trial", range(40))
def test_random_layouts_both_ways(trial, rng):
    ndim = int(rng.integers(0, 5))
    shape = tuple(int(n) for n in rng.integers(0, 6, size=ndim))
    x = np.asarray(rng.standard_normal(shape), dtype=np.float32)
    v = _random_view(x, rng)
    t = pf.from_dlpack(v)                    # import with NumPy's strides
    np.testing.assert_array_equal(t.numpy(), v)
    np.testing.assert_array_equal((t + 0).numpy(), v)
    # Export a PyFlame view of its own (positive strides: torch has no others).
    base = pf.tensor(x)
    perm = rng.permutation(ndim) if ndim else None
    w = pf.transpose(base, *perm) if ndim else base
    ref = np.transpose(x, perm) if ndim else x
    if ndim and w.shape[0] > 1:
        w, ref = w[1::2], ref[1::2]
    y = torch.from_dlpack(w)
    np.testing.assert_array_equal(y.numpy(), ref)


def test_import_torch_views():
    y = torch.randn(5, 8)
    v = y.t()[2:, 1:4]
    t = pf.from_dlpack(v)
    np.testing.assert_array_equal(t.numpy(), v.numpy())
    y.add_(1)
    np.testing.assert_array_equal(t.numpy(), v.numpy())


@pytest.mark.parametrize("shape", [(0,), (3, 0), ()])
def test_import_zero_size_and_0d(shape):
    x = np.asarray(np.random.randn(*shape)).astype(np.float32)
    t = pf.from_dlpack(x)
    assert tuple(t.shape) == shape
    np.testing.assert_array_equal(t.numpy(), x)
    np.testing.assert_array_equal((t + 1).numpy(), (x + 1).astype(np.float32))


@pytest.mark.parametrize("np_dtype,pf_dtype", [(np.uint16, "int32"), (np.uint32, "int64")])
def test_import_converts_like_pf_tensor(np_dtype, pf_dtype):
    x = (np.random.randn(4, 3) * 50).astype(np_dtype)
    t = pf.from_dlpack(x)
    assert str(t.dtype) == pf_dtype
    np.testing.assert_array_equal(t.numpy(), x.astype(pf_dtype))
    with pytest.raises(ValueError, match=r"^\[from_dlpack\] .*copy=False"):
        pf.from_dlpack(x, copy=False)


def test_import_unsupported_dtypes():
    for bad in (np.array([1 + 1j]), np.array([1j], dtype=np.complex64)):
        with pytest.raises(BufferError, match=r"^\[from_dlpack\] unsupported dtype complex"):
            pf.from_dlpack(bad)
    with pytest.raises(BufferError, match=r"^\[from_dlpack\] unsupported dtype complex"):
        pf.from_dlpack(torch.zeros(2, dtype=torch.complex64))


def test_import_copy_argument():
    x = np.random.randn(6).astype(np.float32)
    copied = pf.from_dlpack(x, copy=True)
    shared = pf.from_dlpack(x, copy=False)
    before = x.copy()
    x[:] = 0
    np.testing.assert_array_equal(copied.numpy(), before)
    np.testing.assert_array_equal(shared.numpy(), x)


def test_import_errors():
    with pytest.raises(AttributeError, match=r"^\[from_dlpack\] "):
        pf.from_dlpack([1, 2, 3])
    with pytest.raises(ValueError, match=r"^\[from_dlpack\] "):
        pf._core._dlpack_import(object())


def test_pf_round_trip_and_device_argument():
    t = pf.randn(3, 4)
    same = pf.from_dlpack(t)
    c = pf.from_dlpack(t, copy=True)
    ref = t.numpy()
    np.testing.assert_array_equal(c.numpy(), ref)
    np.testing.assert_array_equal(same.numpy(), ref)
    torch.from_dlpack(t)[0, 0] = 5.0
    ref[0, 0] = 5.0
    np.testing.assert_array_equal(same.numpy(), ref)
    assert c.numpy()[0, 0] != 5.0
    x = np.random.randn(3).astype(np.float32)
    np.testing.assert_array_equal(pf.from_dlpack(x, device="cpu").numpy(), x)


def test_bfloat16_round_trip_through_torch():
    y = torch.randn(64).to(torch.bfloat16)
    t = pf.from_dlpack(y)
    assert t.dtype == pf.bfloat16
    back = torch.from_dlpack(t)
    assert back.dtype == torch.bfloat16
    assert torch.equal(back, y)
    assert back.data_ptr() == y.data_ptr()  # the same memory, both ways


def test_imported_tensor_in_autograd():
    x = np.random.randn(4, 3).astype(np.float32)
    t = pf.from_dlpack(x)
    w = pf.tensor(np.random.randn(3, 2).astype(np.float32), requires_grad=True)
    (t @ w).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), x.sum(0)[:, None].repeat(2, 1), rtol=1e-5)


@pytest.mark.skipif(tuple(int(v) for v in np.__version__.split(".")[:2]) < (2, 1),
                    reason="NumPy < 2.1 exports no versioned (read-only) capsules")
def test_read_only_flag_round_trip():
    x = np.arange(6, dtype=np.float32)
    x.flags.writeable = False
    t = pf.from_dlpack(x)
    np.testing.assert_array_equal(t.numpy(), x)
    a = np.from_dlpack(t)  # a versioned capsule, flagged read-only
    assert not a.flags.writeable
    with pytest.raises(BufferError):
        t.__dlpack__(copy=False)  # a legacy capsule cannot say read-only
    y = torch.from_dlpack(t.__dlpack__())  # legacy: a writable copy
    y[0] = 5
    assert x[0] == 0


# ------------------------------------------- the capsule ABI, read with ctypes
# An independent definition of DLPack 1.x's structs (dlpack.h), to check what
# PyFlame writes and to produce capsules no local library makes (read-only).

class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", DELETER)]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_get_pointer.restype = ctypes.c_void_p
_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_new_capsule.restype = ctypes.py_object


def read_capsule(capsule):
    if capsule_name_is(capsule, "dltensor_versioned"):
        return DLManagedTensorVersioned.from_address(_get_pointer(capsule, b"dltensor_versioned"))
    return DLManagedTensor.from_address(_get_pointer(capsule, b"dltensor"))


def test_exported_capsule_fields():
    x = np.random.randn(4, 6).astype(np.float32)
    t = pf.tensor(x)
    v = t.T[1:]                                          # shape (5, 4), strides (1, 6)
    cap = v.__dlpack__(max_version=(1, 3))
    m = read_capsule(cap)
    assert (m.major, m.minor) == (1, 1) and m.flags == 0
    d = m.dl_tensor
    assert (d.device.device_type, d.device.device_id) == (1, 0)
    assert (d.dtype.code, d.dtype.bits, d.dtype.lanes) == (2, 32, 1)
    assert d.ndim == 2 and [d.shape[i] for i in range(2)] == [5, 4]
    assert [d.strides[i] for i in range(2)] == [1, 6]
    first = ctypes.c_float.from_address(d.data + d.byte_offset).value
    assert first == x[0, 1]
    codes = {"bool": (6, 8), "int32": (0, 32), "int64": (0, 64), "float16": (2, 16),
             "bfloat16": (4, 16), "float32": (2, 32)}
    for name, (code, bits) in codes.items():
        dt = read_capsule(pf.zeros(2, dtype=name).__dlpack__()).dl_tensor.dtype
        assert (dt.code, dt.bits, dt.lanes) == (code, bits, 1), name


def make_versioned_capsule(arr, read_only, deleted):
    """A DLPack 1.x capsule over a NumPy array, made by hand; ``deleted``
    counts deleter calls."""
    shape = (ctypes.c_int64 * arr.ndim)(*arr.shape)
    strides = (ctypes.c_int64 * arr.ndim)(*(s // arr.itemsize for s in arr.strides))
    m = DLManagedTensorVersioned()
    m.major, m.minor, m.flags = 1, 0, 1 if read_only else 0
    m.dl_tensor.data = arr.ctypes.data
    m.dl_tensor.device = DLDevice(1, 0)
    m.dl_tensor.ndim = arr.ndim
    m.dl_tensor.dtype = DLDataType(2, 32, 1)
    m.dl_tensor.shape, m.dl_tensor.strides = shape, strides
    keep = [arr, shape, strides, m]

    @DELETER
    def deleter(_):
        deleted.append(True)
        keep.clear()
    m.deleter = deleter
    keep.append(deleter)
    _keepalive.append(deleter)  # the callback must outlive its own call
    return _new_capsule(ctypes.addressof(m), b"dltensor_versioned", None)


_keepalive = []


def test_handmade_capsule_lifetime_and_read_only():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    deleted = []
    t = pf.from_dlpack(make_versioned_capsule(x, True, deleted))
    np.testing.assert_array_equal(t.numpy(), x)
    y = t[1:] * 2
    assert not deleted
    x[2, 3] = -1  # shared: seen through the tensor
    np.testing.assert_array_equal(y.numpy(), x[1:] * 2)
    # Read-only: a versioned export says so; a legacy export is a writable copy.
    m = read_capsule(t.__dlpack__(max_version=(1, 0)))
    assert m.flags & 1
    with pytest.raises(BufferError, match=r"^\[__dlpack__\] read-only"):
        t.__dlpack__(copy=False)
    c = torch.utils.dlpack.from_dlpack(t.__dlpack__())  # legacy capsule: a copy
    c[0, 0] = 100
    assert x[0, 0] == 0
    # The producer's deleter runs once the last tensor using the memory goes.
    view = t[1:]
    del t, c, m, y
    gc.collect()
    assert not deleted  # the view still uses it
    np.testing.assert_array_equal(view.numpy(), x[1:])
    del view
    gc.collect()
    assert deleted == [True]


def test_handmade_capsule_writable():
    x = np.zeros(5, dtype=np.float32)
    deleted = []
    t = pf.from_dlpack(make_versioned_capsule(x, False, deleted))
    assert read_capsule(t.__dlpack__(max_version=(1, 0))).flags == 0
    torch.from_dlpack(t)[2] = 7
    assert x[2] == 7
    del t
    gc.collect()
    assert deleted == [True]


# ------------------------------------------------------------------- GPU

def _torch_cuda():
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without a GPU")
    return torch


def test_gpu_export_import_torch(gpu_device):
    _torch_cuda()
    for dtype in TORCH_DTYPES:
        x = random_values(dtype, (33, 17))
        t = pf_tensor(x, dtype, device=gpu_device)
        assert t.__dlpack_device__()[0] in (2, 10)
        y = torch.from_dlpack(t)
        assert y.is_cuda and y.dtype == TORCH_OF[dtype]
        np.testing.assert_array_equal(torch_values(y), x)
        u = pf.from_dlpack(y)
        assert u.device.startswith("rocm") and str(u.dtype) == dtype
        got = u.astype("float32").numpy() if dtype == "bfloat16" else u.numpy()
        np.testing.assert_array_equal(got, x)


def test_gpu_zero_copy_both_ways(gpu_device):
    _torch_cuda()
    t = pf.randn(1000, device=gpu_device).eval()
    y = torch.from_dlpack(t)
    y.mul_(0).add_(3)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(t.numpy(), np.full(1000, 3, np.float32))
    z = torch.randn(500, device="cuda")
    u = pf.from_dlpack(z)
    z.fill_(-2)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(u.numpy(), np.full(500, -2, np.float32))
    assert y.data_ptr() == torch.from_dlpack(t).data_ptr()


def test_gpu_stream_handshake_export(gpu_device):
    """Long pending PyFlame work, then an immediate read on torch streams:
    the consumer's stream waits for it."""
    _torch_cuda()
    a = pf.randn(2048, 2048, device=gpu_device)
    x = a
    for _ in range(8):
        x = pf.tanh(x @ a) * 0.5
    x.eval()  # queued, not finished
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        y = torch.from_dlpack(x).clone()  # torch passes its current stream
    side.synchronize()
    default_read = torch.from_dlpack(x).sum()
    ref = x.numpy()
    np.testing.assert_array_equal(y.cpu().numpy(), ref)
    np.testing.assert_allclose(default_read.item(), ref.sum(dtype=np.float64), rtol=1e-3, atol=1.0)


def test_gpu_stream_handshake_import(gpu_device):
    _torch_cuda()
    z = torch.randn(4096, 4096, device="cuda")
    for _ in range(4):
        z = torch.tanh(z @ z) * 0.5  # queued on torch's stream
    u = pf.from_dlpack(z)  # torch orders its work before PyFlame's stream
    got = (u * 2).numpy()
    np.testing.assert_array_equal(got, (z * 2).cpu().numpy())


def test_gpu_lifetime(gpu_device):
    _torch_cuda()
    z = torch.randn(1 << 20, device="cuda")
    ref = z.cpu().numpy()
    u = pf.from_dlpack(z)
    del z
    gc.collect()
    torch.randn(1 << 20, device="cuda")  # would reuse the block if it were freed
    np.testing.assert_array_equal(u.numpy(), ref)
    t = pf.randn(1 << 20, device=gpu_device)
    y = torch.from_dlpack(t)
    ref_t = t.numpy()
    del t
    gc.collect()
    pf.randn(1 << 20, device=gpu_device).eval()
    np.testing.assert_array_equal(y.cpu().numpy(), ref_t)


def test_gpu_views(gpu_device):
    _torch_cuda()
    x = np.random.randn(6, 9).astype(np.float32)
    base = pf.tensor(x, device=gpu_device)
    v = base.T[1:, 2:7]
    y = torch.from_dlpack(v)
    np.testing.assert_array_equal(y.cpu().numpy(), v.numpy())
    z = torch.from_numpy(x).cuda().t()[::2]
    np.testing.assert_array_equal(pf.from_dlpack(z).numpy(), z.cpu().numpy())


def test_gpu_unsupported_dtype(gpu_device):
    _torch_cuda()
    with pytest.raises(BufferError, match=r"^\[from_dlpack\] unsupported dtype complex"):
        pf.from_dlpack(torch.zeros(3, dtype=torch.complex64, device="cuda"))


def test_gpu_float64_round_trip(gpu_device):
    _torch_cuda()
    z = torch.randn(7, dtype=torch.float64, device="cuda")
    t = pf.from_dlpack(z)
    assert t.dtype == pf.float64 and str(t.device).startswith("rocm")
    np.testing.assert_array_equal(t.numpy(), z.cpu().numpy())
    np.testing.assert_array_equal(torch.from_dlpack(t * 2.0).cpu().numpy(), (z * 2).cpu().numpy())


def test_gpu_export_to_cpu_device(gpu_device):
    x = np.random.randn(5).astype(np.float32)
    t = pf.tensor(x, device=gpu_device)
    c = pf.from_dlpack(t.__dlpack__(dl_device=(1, 0), max_version=(1, 0)))
    assert c.device == "cpu"
    np.testing.assert_array_equal(c.numpy(), x)
    with pytest.raises(BufferError, match=r"^\[__dlpack__\] .*copy=False"):
        t.__dlpack__(dl_device=(1, 0), copy=False)


def test_gpu_device_argument(gpu_device):
    x = np.random.randn(7).astype(np.float32)
    g = pf.from_dlpack(x, device=gpu_device)
    assert g.device.startswith("rocm")
    x[:] = 0  # copied when imported
    assert np.abs(g.numpy()).sum() > 0
    with pytest.raises(ValueError, match=r"^\[from_dlpack\] .*copy=False"):
        pf.from_dlpack(x, device=gpu_device, copy=False)
    back = pf.from_dlpack(g, device="cpu")
    np.testing.assert_array_equal(back.numpy(), g.numpy())


def test_gpu_cupy(gpu_device):
    cp = pytest.importorskip("cupy")
    x = np.random.randn(40, 3).astype(np.float32)
    t = pf.tensor(x, device=gpu_device)
    c = cp.from_dlpack(t)
    np.testing.assert_array_equal(cp.asnumpy(c), x)
    d = cp.arange(12, dtype=cp.int32).reshape(3, 4)[:, ::2]
    u = pf.from_dlpack(d)
    np.testing.assert_array_equal(u.numpy(), cp.asnumpy(d))
    d[:] = 5
    cp.cuda.Device().synchronize()
    np.testing.assert_array_equal(u.numpy(), np.full((3, 2), 5, np.int32))


def test_gpu_jax(gpu_device):
    # JAX would otherwise take most of the GPU's memory when it starts.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX without a GPU")
    x = np.random.randn(8, 4).astype(np.float32)
    t = pf.tensor(x, device=gpu_device)
    j = jnp.from_dlpack(t)
    np.testing.assert_array_equal(np.asarray(j), x)
    k = jnp.arange(10, dtype=jnp.float32) * 2
    u = pf.from_dlpack(k)
    np.testing.assert_array_equal(u.numpy(), np.arange(10, dtype=np.float32) * 2)
