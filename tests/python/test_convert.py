"""pf.tensor of any NumPy array: layouts, flags, byte orders and dtypes
convert (to the dtype the README's rules give) or are rejected clearly."""
import mmap

import numpy as np
import pytest

import pyflame as pf
from conftest import assert_close

# NumPy dtype -> the PyFlame dtype pf.tensor makes of it (as torch.tensor:
# NumPy float64 stays float64; unsigned types PyFlame lacks widen).
CONVERTED = [
    (np.bool_, "bool"), (np.int8, "int8"), (np.uint8, "uint8"), (np.int16, "int16"),
    (np.uint16, "int32"), (np.int32, "int32"), (np.uint32, "int64"), (np.int64, "int64"),
    (np.uint64, "int64"), (np.float16, "float16"), (np.float32, "float32"),
    (np.float64, "float64"),
]


def sample(np_dtype, shape):
    dt = np.dtype(np_dtype)
    if dt.kind == "b":
        return np.asarray(np.random.rand(*shape) < 0.5)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo, hi = max(info.min, -(2**31)), min(info.max, 2**31 - 1)
        return np.asarray(np.random.randint(lo, hi, size=shape, dtype=np.int64)).astype(dt)
    return np.asarray(np.random.uniform(-100, 100, size=shape)).astype(dt)


def expected_of(x, pf_dtype):
    return x.astype(np.dtype(pf_dtype))


@pytest.mark.parametrize("np_dtype,pf_dtype", CONVERTED)
def test_every_dtype_converts(device, np_dtype, pf_dtype):
    x = sample(np_dtype, (3, 5))
    assert_close(pf.tensor(x), expected_of(x, pf_dtype), pf_dtype, rtol=0, atol=0)


@pytest.mark.parametrize("np_dtype,pf_dtype", CONVERTED)
def test_read_only(device, np_dtype, pf_dtype):
    x = sample(np_dtype, (4, 3))
    ro = np.frombuffer(x.tobytes(), dtype=x.dtype).reshape(x.shape)
    assert not ro.flags.writeable
    assert_close(pf.tensor(ro), expected_of(x, pf_dtype), pf_dtype, rtol=0, atol=0)


def test_memory_mapped_npy(device, tmp_path):
    x = np.random.randn(6, 7).astype(np.float32)
    path = tmp_path / "x.npy"
    np.save(path, x)
    for mode in ("r", "c"):
        m = np.load(path, mmap_mode=mode)
        assert_close(pf.tensor(m), x, "float32", rtol=0, atol=0)
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        raw = np.frombuffer(mm, dtype=np.uint8)
        assert_close(pf.tensor(raw), raw, "uint8")
        del raw
        mm.close()


@pytest.mark.parametrize("make", [
    lambda x: x[::2, 1::3],          # strided
    lambda x: x[::-1],               # negative stride
    lambda x: x[:, ::-2],
    lambda x: x.T,                   # Fortran order
    lambda x: np.asfortranarray(x),
    lambda x: x[..., None][:, 2],    # 0 strides of a broadcast below
    lambda x: np.broadcast_to(x[:1], x.shape),
], ids=["strided", "neg0", "neg1", "T", "fortran", "slice", "broadcast"])
def test_layouts(device, make):
    x = np.random.randn(8, 9).astype(np.float32)
    v = make(x)
    assert_close(pf.tensor(v), np.ascontiguousarray(v), "float32", rtol=0, atol=0)


def test_read_only_non_contiguous(device):
    x = np.random.randn(5, 6)
    ro = np.frombuffer(x.tobytes(), dtype=np.float64).reshape(5, 6)[::-1, ::2]
    assert_close(pf.tensor(ro), ro, "float64", rtol=0, atol=0)


@pytest.mark.parametrize("code", ["f4", "f8", "i4", "i8", "f2", "u2", "i2"])
def test_non_native_byte_order(device, code):
    native = sample(np.dtype(code), (4, 4))
    swapped = native.astype(np.dtype(code).newbyteorder())
    assert swapped.dtype.byteorder not in ("=", "|")
    t = pf.tensor(swapped)
    np.testing.assert_array_equal(t.numpy(), native.astype(t.numpy().dtype))
    # Each byte order is its own entry of the conversion's dtype cache.
    n = pf.tensor(native)
    assert n.dtype == t.dtype
    np.testing.assert_array_equal(n.numpy(), t.numpy())


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4, 2), ()])
@pytest.mark.parametrize("np_dtype,pf_dtype", [(np.float64, "float64"), (np.bool_, "bool"),
                                               (np.uint16, "int32"), (np.int64, "int64")])
def test_zero_size_and_0d(device, shape, np_dtype, pf_dtype):
    x = sample(np_dtype, shape)
    assert_close(pf.tensor(x), expected_of(x, pf_dtype), pf_dtype, rtol=0, atol=0)


def test_float64_values_kept_python_floats_float32(device):
    # As torch.tensor: NumPy float64 data keeps its dtype and every bit;
    # Python floats give the default float32.
    x = np.array([1 / 3, 1e30, -2.5e-40, np.inf, -np.inf, np.nan, 3.4e39, 5e-324])
    t = pf.tensor(x)
    assert t.dtype == pf.float64
    np.testing.assert_array_equal(t.numpy(), x)
    assert pf.tensor(np.float64(1 / 3)).dtype == pf.float64
    with np.errstate(over="ignore"):
        t = pf.tensor(x.tolist())
        np.testing.assert_array_equal(t.numpy(), x.astype(np.float32))
    assert t.dtype == pf.float32


def test_unsigned_values_beyond_int64(device):
    ok = np.array([0, 2**63 - 1], dtype=np.uint64)
    np.testing.assert_array_equal(pf.tensor(ok).numpy(), ok.astype(np.int64))
    with pytest.raises(ValueError, match=r"^\[tensor\] .*does not fit int64"):
        pf.tensor(np.array([2**63], dtype=np.uint64))


@pytest.mark.parametrize("bad", [
    np.array([object(), 1], dtype=object),
    np.array([1 + 2j, 3j]),
    np.array([1 + 2j], dtype=np.complex64),
    np.array(["a", "bc"]),
    np.array([b"a"]),
    np.array(["2020-01-01"], dtype="datetime64[D]"),
    np.array([1], dtype="timedelta64[s]"),
    np.zeros(2, dtype=[("a", "f4"), ("b", "i4")]),
    np.zeros(2, dtype="V4"),
    np.zeros(2, dtype=np.longdouble) if np.dtype(np.longdouble) != np.float64 else np.zeros(2, "c8"),
], ids=["object", "complex128", "complex64", "str", "bytes", "datetime", "timedelta",
        "structured", "void", "longdouble"])
def test_unsupported_dtypes_rejected(device, bad):
    with pytest.raises(ValueError, match=r"^\[tensor\] .*dtype"):
        pf.tensor(bad)


def test_ragged_rejected():
    with pytest.raises(ValueError, match=r"^\[tensor\] "):
        pf.tensor([[1, 2], [3]])


def test_operators_take_read_only_arrays(device):
    x = np.random.randn(3, 4).astype(np.float32)
    ro = np.frombuffer(x.tobytes(), dtype=np.float32).reshape(3, 4)
    y = pf.ones(3, 4)
    assert_close(y + ro, 1 + x, "float32")
    assert_close(ro * y, x, "float32")


def test_source_array_not_aliased(device):
    x = np.random.randn(4).astype(np.float32)
    t = pf.tensor(x)
    before = x.copy()
    x[:] = 0
    np.testing.assert_array_equal(t.numpy(), before)
