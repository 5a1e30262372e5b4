"""Creation ops: tensor/asarray, zeros/ones/full, arange, eye, random draws."""
import numpy as np
import pytest

import pyflame as pf
from conftest import assert_close, device_kind

# NumPy input dtype -> PyFlame dtype it becomes.
DTYPE_MAP = [
    (np.float64, "float64"),
    (np.float32, "float32"),
    (np.float16, "float16"),
    (np.int64, "int64"),
    (np.int32, "int32"),
    (np.int16, "int16"),
    (np.int8, "int8"),
    (np.uint8, "uint8"),
    (np.uint16, "int32"),
    (np.bool_, "bool"),
]


def _sample(np_dtype, shape):
    if np_dtype == np.bool_:
        return np.random.rand(*shape) < 0.5
    if np.issubdtype(np_dtype, np.integer):
        info = np.iinfo(np_dtype)
        lo, hi = max(int(info.min), -1000), min(int(info.max), 1000)
        return np.random.randint(lo, hi + 1, size=shape).astype(np_dtype)
    return np.random.randn(*shape).astype(np_dtype)


# ------------------------------------------------------------ tensor / asarray

@pytest.mark.parametrize("np_dtype,pf_dtype", DTYPE_MAP)
@pytest.mark.parametrize("fn", [pf.tensor, pf.asarray])
def test_from_numpy_dtype_mapping(device, fn, np_dtype, pf_dtype):
    x = _sample(np_dtype, (3, 5))
    t = fn(x)
    assert t.device.startswith(device_kind(device))
    assert_close(t, x, pf_dtype, rtol=0, atol=0)


@pytest.mark.parametrize("shape", [(), (0,), (1,), (7,), (2, 0, 3), (2, 3, 4)])
def test_from_numpy_shapes(device, shape):
    x = np.asarray(np.random.randn(*shape))
    t = pf.tensor(x, device=device)
    assert t.shape == shape
    assert t.ndim == len(shape)
    assert t.size == x.size
    assert_close(t, x, "float64", rtol=0, atol=0, device=device)  # as torch.tensor: kept


def test_from_python_lists(device):
    ints = np.random.randint(-100, 100, size=(3, 4))
    assert_close(pf.tensor(ints.tolist()), ints, "int64", device=device)
    floats = np.random.randn(2, 3)
    assert_close(pf.tensor(floats.tolist()), floats.astype(np.float32), "float32", rtol=0, atol=0)
    bools = (np.random.rand(5) < 0.5)
    assert_close(pf.tensor(bools.tolist()), bools, "bool")
    mixed = [1, 2.5, True]  # NumPy promotes to float64 -> float32
    assert_close(pf.tensor(mixed), np.array(mixed, dtype=np.float32), "float32")


def test_from_python_scalars(device):
    v = float(np.random.randn())
    t = pf.tensor(v)
    assert t.shape == ()
    assert_close(t, np.float32(v), "float32", rtol=0, atol=0)
    i = int(np.random.randint(-1000, 1000))
    assert_close(pf.tensor(i), np.int64(i), "int64")
    assert_close(pf.tensor(True), np.bool_(True), "bool")
    assert_close(pf.tensor(np.float64(v)), np.float64(v), "float64", rtol=0, atol=0)
    assert_close(pf.tensor(np.int32(i)), np.int32(i), "int32")


def test_from_non_contiguous_numpy(device):
    base = np.random.randn(6, 8)
    for view in (base.T, base[::2, 1::3], base[::-1, ::-2], np.broadcast_to(base[0], (3, 8))):
        assert_close(pf.tensor(view), view, "float64", rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32", "int64", "bool"])
def test_tensor_with_dtype(device, dtype):
    x = np.random.randint(-5, 6, size=(4, 3))
    t = pf.tensor(x, dtype=dtype)
    expected = x.astype(bool) if dtype == "bool" else x
    assert_close(t, expected, dtype, rtol=0, atol=0)


def test_tensor_from_tensor(device):
    x = np.random.randn(3, 2).astype(np.float32)
    a = pf.tensor(x)
    b = pf.tensor(a, dtype="float16")
    assert_close(b, x.astype(np.float16), "float16", rtol=0, atol=0)
    assert_close(pf.asarray(a), x, "float32", rtol=0, atol=0)


def test_tensor_large_ints_exact(device):
    x = np.array([2**53 + 1, -(2**62) - 3, 2**63 - 1, -(2**63)], dtype=np.int64)
    assert_close(pf.tensor(x), x, "int64")
    assert_close(pf.tensor(x.tolist()), x, "int64")


def test_tensor_uint64_out_of_range_raises():
    with pytest.raises(ValueError, match=r"^\[tensor\]"):
        pf.tensor(np.array([2**63 + 5], dtype=np.uint64))


# --------------------------------------------------------- zeros/ones/full

@pytest.mark.parametrize("dtype", [None, "float32", "float16", "bfloat16", "int32", "int64", "bool"])
def test_zeros_ones(device, dtype):
    shape = tuple(np.random.randint(0, 5, size=np.random.randint(0, 4)))
    want = "float32" if dtype is None else dtype
    np_dt = bool if want == "bool" else np.float64
    assert_close(pf.zeros(*shape, dtype=dtype), np.zeros(shape, np_dt), want, device=device)
    assert_close(pf.ones(shape, dtype=dtype), np.ones(shape, np_dt), want, device=device)
    assert_close(pf.zeros(shape, dtype=dtype, device=device), np.zeros(shape, np_dt), want,
                 device=device)


def test_zeros_like_ones_like(device):
    x = pf.tensor(np.random.randint(0, 9, size=(2, 3)).astype(np.int32))
    assert_close(pf.zeros_like(x), np.zeros((2, 3)), "int32", device=device)
    assert_close(pf.ones_like(x, dtype="float16"), np.ones((2, 3)), "float16", device=device)


def test_full(device):
    v = float(np.random.uniform(-10, 10))
    assert_close(pf.full((2, 3), v), np.full((2, 3), v, np.float32), "float32", rtol=0, atol=0)
    i = int(np.random.randint(-10**6, 10**6))
    assert_close(pf.full((4,), i), np.full((4,), i), "int64")
    assert_close(pf.full(3, True), np.ones(3, bool), "bool")
    assert_close(pf.full((2, 2), v, dtype="float16"), np.full((2, 2), v, np.float16), "float16",
                 rtol=0, atol=0)
    assert_close(pf.full((2, 2), i, dtype="int32"), np.full((2, 2), i, np.int32), "int32")
    big = 2**62 + 1  # not representable in float64
    assert_close(pf.full((2,), big), np.full((2,), big, np.int64), "int64")


# ---------------------------------------------------------------- arange

@pytest.mark.parametrize("args", [(7,), (2, 9), (-5, 11, 3), (10, -4, -2), (5, 5), (5, 1)])
def test_arange_int(device, args):
    args = tuple(a + int(np.random.randint(0, 3)) * (1 if i < 2 else 0)
                 for i, a in enumerate(args))
    assert_close(pf.arange(*args), np.arange(*args), "int64", device=device)


@pytest.mark.parametrize("args", [(0.0, 1.0, 0.1), (-2.5, 3.0, 0.5), (3.0, -1.0, -0.25),
                                  (0, 5, 0.5), (1.5,)])
def test_arange_float(device, args):
    t = pf.arange(*args)
    assert_close(t, np.arange(*args, dtype=np.float64), "float32", atol=1e-6)


def test_arange_dtype(device):
    assert_close(pf.arange(0, 10, 2, dtype="float16"), np.arange(0, 10, 2), "float16")
    assert_close(pf.arange(6, dtype="int32"), np.arange(6), "int32")
    assert_close(pf.arange(3, dtype="float32"), np.arange(3.0), "float32")


def test_arange_bad_args():
    with pytest.raises(ValueError, match=r"^\[arange\]"):
        pf.arange(0, 5, 0)
    with pytest.raises(ValueError, match=r"^\[arange\]"):
        pf.arange(0, float("inf"), 1.0)


# ------------------------------------------------------------------- eye

@pytest.mark.parametrize("n,m,k", [(1, None, 0), (4, None, 0), (3, 5, 0), (5, 3, 0), (4, 6, 2),
                                   (4, 6, -1), (3, 3, 5), (3, 3, -5), (0, 3, 0), (3, 0, 0)])
def test_eye(device, n, m, k):
    assert_close(pf.eye(n, m, k=k), np.eye(n, m, k=k), "float32", device=device)


@pytest.mark.parametrize("dtype", ["int32", "int64", "bool", "float16", "bfloat16"])
def test_eye_dtype(device, dtype):
    ref = np.eye(3, 4, k=1)
    assert_close(pf.eye(3, 4, 1, dtype=dtype), ref.astype(bool) if dtype == "bool" else ref, dtype)


# ---------------------------------------------------------------- random

@pytest.mark.parametrize("fn", ["rand", "randn", "randint"])
def test_random_same_seed_same_numbers(device, fn):
    def draw():
        if fn == "randint":
            return pf.randint(-50, 50, (64,)).numpy()
        return getattr(pf, fn)(64).numpy()

    seed = int(np.random.randint(0, 2**31))
    pf.manual_seed(seed)
    a1, a2 = draw(), draw()
    pf.manual_seed(seed)
    b1, b2 = draw(), draw()
    np.testing.assert_array_equal(a1, b1)
    np.testing.assert_array_equal(a2, b2)
    assert not np.array_equal(a1, a2), "consecutive draws repeat"
    pf.manual_seed(seed + 1)
    c1 = draw()
    assert not np.array_equal(a1, c1), "different seeds give the same numbers"


def test_random_same_numbers_on_every_device(device):
    seed = int(np.random.randint(0, 2**31))
    pf.manual_seed(seed)
    here = pf.randn(100, device=device).numpy()
    pf.manual_seed(seed)
    cpu = pf.randn(100, device="cpu").numpy()
    np.testing.assert_allclose(here, cpu, rtol=1e-5, atol=1e-5)  # device math may differ by ulps


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_rand_statistics(device, dtype):
    n = 20000
    t = pf.rand(n, dtype=dtype)
    assert t.dtype == getattr(pf, dtype) and t.shape == (n,)
    assert t.device.startswith(device_kind(device))
    x = t.numpy().astype(np.float64)
    assert x.min() >= 0.0 and x.max() < 1.0
    assert x.min() < 0.005 and x.max() > 0.995  # the whole range is reached
    assert abs(x.mean() - 0.5) < 0.01  # ~5 standard errors
    assert abs(x.std() - np.sqrt(1 / 12)) < 0.01
    # roughly uniform: every tenth of [0, 1) gets about n/10 draws
    counts = np.histogram(x, bins=10, range=(0, 1))[0]
    assert counts.min() > 0.08 * n and counts.max() < 0.12 * n
    assert len(np.unique(x)) > (200 if dtype == "bfloat16" else 1000)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_randn_statistics(device, dtype):
    n = 20000
    x = pf.randn(100, n // 100, dtype=dtype).numpy().astype(np.float64)
    assert x.shape == (100, n // 100)
    assert np.isfinite(x).all()
    assert abs(x.mean()) < 0.035  # ~5 standard errors
    assert abs(x.std() - 1.0) < 0.03
    assert 0.64 < np.mean(np.abs(x) < 1.0) < 0.72  # 68.3% within one sigma
    assert x.min() < -2.5 and x.max() > 2.5
    assert abs(np.mean(x ** 3)) < 0.15  # symmetric


@pytest.mark.parametrize("dtype", [None, "int32", "int64"])
def test_randint_bounds(device, dtype):
    low = int(np.random.randint(-100, 100))
    high = low + int(np.random.randint(1, 20))
    t = pf.randint(low, high, (50, 40), dtype=dtype)
    assert t.dtype == getattr(pf, dtype or "int64") and t.shape == (50, 40)
    x = t.numpy()
    assert x.min() >= low and x.max() < high
    assert set(np.unique(x)) == set(range(low, high))  # 2000 draws cover <= 20 values
    counts = np.bincount(x.ravel() - low)
    assert counts.min() > 0.5 * x.size / (high - low)


def test_randint_single_bound_and_size_forms(device):
    x = pf.randint(5, size=(1000,)).numpy()
    assert x.min() >= 0 and x.max() < 5 and len(np.unique(x)) == 5
    assert pf.randint(0, 3, 7).shape == (7,)
    big = pf.randint(-(2**40), 2**40, (1000,)).numpy()
    assert big.min() >= -(2**40) and big.max() < 2**40
    assert np.abs(big).max() > 2**35  # the whole range is used


def test_random_bad_args():
    with pytest.raises(ValueError, match=r"^\[randint\]"):
        pf.randint(5, 5, (3,))
    with pytest.raises(ValueError, match=r"^\[randint\]"):
        pf.randint(0, 5, (3,), dtype="float32")
    with pytest.raises(ValueError, match=r"^\[rand\]"):
        pf.rand(3, dtype="int32")
    with pytest.raises(ValueError, match=r"^\[randn\]"):
        pf.randn(3, dtype="bool")
    with pytest.raises(ValueError, match=r"^\[randn\]"):
        pf.randn(2, -1)
