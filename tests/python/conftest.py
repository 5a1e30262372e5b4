"""Shared fixtures for the PyFlame op tests.

Devices: every test that takes the ``device`` fixture runs once per device in
``PYFLAME_TEST_DEVICES`` (comma-separated, e.g. ``cpu,rocm``) or, when that is
unset, on ``cpu`` plus ``rocm`` where ``pf.rocm_is_available()``. A device named
explicitly in the variable but not usable is a set-up error, never a skip.

Random inputs: each test gets NumPy's global RNG (and ``pf.manual_seed``)
seeded from a hash of its node id, so every test sees its own inputs and a
failure reproduces. ``PYFLAME_TEST_SEED`` (an integer, or ``random``) shifts
every seed to draw a fresh set of inputs for the whole session.
"""
import os
import random
import zlib

import numpy as np
import pytest

import pyflame as pf

# ---------------------------------------------------------------- devices

_ENV_DEVICES = os.environ.get("PYFLAME_TEST_DEVICES", "").strip()


def _test_devices():
    if _ENV_DEVICES:
        return [d.strip() for d in _ENV_DEVICES.split(",") if d.strip()]
    return ["cpu"] + (["rocm"] if pf.rocm_is_available() else [])


DEVICES = _test_devices()
GPU_DEVICES = [d for d in DEVICES if d != "cpu"]


def _check_device(name):
    """Fails (not skips) when a requested device cannot be used."""
    if name == "cpu":
        return
    kind = name.split(":", 1)[0]
    if kind not in ("rocm", "gpu", "hip", "cuda"):
        pytest.fail(f"PYFLAME_TEST_DEVICES names unknown device {name!r}", pytrace=False)
    if not pf.rocm_is_available():
        pytest.fail(f"device {name!r} was requested but pf.rocm_is_available() is False "
                    f"(gpu backend compiled: {pf._core.gpu_backend_compiled()})", pytrace=False)


@pytest.fixture(params=DEVICES)
def device(request):
    """A device string; the default device is set to it for the test."""
    name = request.param
    _check_device(name)
    pf.set_device(name)
    yield name


@pytest.fixture(params=GPU_DEVICES or [pytest.param(None, marks=pytest.mark.skip(
    reason="no GPU device under test"))])
def gpu_device(request):
    _check_device(request.param)
    pf.set_device(request.param)
    yield request.param


@pytest.fixture(autouse=True)
def _restore_default_device():
    yield
    pf.set_device("cpu")


def device_kind(name):
    """'cpu' or 'rocm' for a device string (tensors report 'rocm:N')."""
    return "cpu" if name == "cpu" else "rocm"


# ------------------------------------------------------------------ seeds

_SEED_ENV = os.environ.get("PYFLAME_TEST_SEED", "0").strip()
BASE_SEED = random.SystemRandom().randrange(2**31) if _SEED_ENV == "random" else int(_SEED_ENV)


def pytest_report_header(config):
    return [f"pyflame devices: {', '.join(DEVICES)}; PYFLAME_TEST_SEED={BASE_SEED}"]


@pytest.fixture(autouse=True)
def _seed_rngs(request):
    """Seeds NumPy's global RNG and PyFlame's RNG for this test alone."""
    seed = (zlib.crc32(request.node.nodeid.encode()) ^ BASE_SEED) & 0x7FFFFFFF
    np.random.seed(seed)
    pf.manual_seed(seed)
    yield seed


@pytest.fixture(params=[False, True], ids=["ms-off", "ms-on"])
def streams(request):
    """multi_stream off and on for the test (on is skipped on the CPU), on
    the test's own device fixture."""
    name = "gpu_device" if "gpu_device" in request.fixturenames else "device"
    device = request.getfixturevalue(name)
    if request.param and device == "cpu":
        pytest.skip("multi_stream changes nothing on the CPU")
    prev = pf.multi_stream()
    pf.set_multi_stream(request.param)
    yield request.param
    pf.set_multi_stream(prev)


@pytest.fixture
def rng(_seed_rngs):
    """A NumPy Generator seeded like the global RNG of this test."""
    return np.random.default_rng(_seed_rngs)


# ------------------------------------------------------------- comparison

TOLERANCES = {  # (rtol, atol)
    "float64": (1e-10, 1e-12),
    "float32": (1e-5, 1e-6),
    "float16": (1e-3, 1e-3),
    "bfloat16": (1e-2, 1e-2),
}

FLOAT_DTYPES = ["float32", "float16", "bfloat16"]
INT_DTYPES = ["int32", "int64", "int8", "int16", "uint8"]
ALL_DTYPES = ["bool", "int32", "int64", "float16", "bfloat16", "float32"]
# With the dtypes added later (the property tests keep ALL_DTYPES).
EVERY_DTYPE = ALL_DTYPES + ["float64", "int8", "int16", "uint8"]

# The NumPy dtype .numpy() returns for each PyFlame dtype (NumPy has no
# bfloat16, so those tensors come back as float32).
NUMPY_OF = {"bool": np.bool_, "int32": np.int32, "int64": np.int64, "float16": np.float16,
            "bfloat16": np.float32, "float32": np.float32, "float64": np.float64,
            "int8": np.int8, "int16": np.int16, "uint8": np.uint8}


def dtype_str(dt):
    return str(dt)


def assert_close(t, expected, dtype, rtol=None, atol=None, device=None):
    """Checks a PyFlame tensor against a NumPy reference.

    ``dtype`` is the PyFlame dtype ``t`` must have (a pf.Dtype or its name);
    the shape must match exactly; floats compare with per-dtype tolerances
    (overridable), integers and bools exactly. NaNs must coincide. With
    ``device``, the tensor must live on that kind of device.
    """
    name = dtype_str(dtype)
    assert isinstance(t, pf.Tensor), f"expected a pf.Tensor, got {type(t).__name__}"
    assert str(t.dtype) == name, f"dtype {t.dtype}, expected {name}"
    if device is not None:
        assert t.device.split(":")[0] == device_kind(device), \
            f"tensor on {t.device}, expected {device}"
    expected = np.asarray(expected)
    assert tuple(t.shape) == expected.shape, f"shape {tuple(t.shape)}, expected {expected.shape}"
    got = t.numpy()
    assert got.shape == expected.shape, f"numpy() shape {got.shape}, expected {expected.shape}"
    assert got.dtype == NUMPY_OF[name], f"numpy() dtype {got.dtype} for a {name} tensor"
    if name in TOLERANCES:
        r, a = TOLERANCES[name]
        with np.errstate(invalid="ignore"):  # signalling NaNs warn when widened
            got, expected = got.astype(np.float64), expected.astype(np.float64)
        np.testing.assert_allclose(got, expected,
                                   rtol=r if rtol is None else rtol,
                                   atol=a if atol is None else atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected.astype(got.dtype))


def rounded(x, dtype):
    """NumPy values rounded to what a PyFlame tensor of ``dtype`` holds
    (float64 for the float dtypes), for building exact low-precision inputs."""
    name = dtype_str(dtype)
    x = np.asarray(x)
    if name == "float16":
        return x.astype(np.float16).astype(np.float64)
    if name == "bfloat16":
        return bf16_round(x.astype(np.float32)).astype(np.float64)
    if name == "float32":
        return x.astype(np.float32).astype(np.float64)
    return x.astype(NUMPY_OF[name])


def bf16_round(x):
    """float32 -> nearest bfloat16 (ties to even), as float32. Independent
    of PyFlame's conversion, for references."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    out = (r & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), np.float32(np.nan), out)


def make_tensor(x, dtype=None, device=None):
    """A PyFlame tensor holding ``x`` (NumPy), converted to ``dtype``
    (bfloat16 is made from float32 values). Without a dtype, float64 arrays
    (what random_array gives as the references' precision) become float32,
    the framework's default; pass dtype="float64" for a float64 tensor."""
    x = np.asarray(x)
    name = None if dtype is None else dtype_str(dtype)
    if name is None and x.dtype == np.float64:
        name = "float32"
    if name == "bfloat16":
        return pf.tensor(x.astype(np.float32), device=device).astype("bfloat16")
    if name is not None:
        x = x.astype(NUMPY_OF[name])
    return pf.tensor(x, device=device)


def random_array(shape, dtype="float32", low=-3.0, high=3.0):
    """Random NumPy values for a PyFlame dtype, exactly representable in it,
    as float64 for floats (the reference precision)."""
    name = dtype_str(dtype)
    if name == "bool":
        return np.random.rand(*shape) < 0.5
    if name in ("int8", "int16", "int32", "int64", "uint8"):
        lo = max(int(low), 0) if name == "uint8" else int(low)
        return np.random.randint(lo, max(int(high), lo) + 1, size=shape).astype(NUMPY_OF[name])
    return rounded(np.random.uniform(low, high, size=shape), name)


def torch_or_skip():
    """(torch, torch.nn.functional), skipping the test where torch is missing."""
    torch = pytest.importorskip("torch")
    return torch, torch.nn.functional


def t64(x):
    """A float64 torch tensor of x (None stays None), for references."""
    torch, _ = torch_or_skip()
    return None if x is None else torch.from_numpy(np.asarray(x, dtype=np.float64).copy())


@pytest.fixture
def fusion():
    """Restores the fusion switches after the test."""
    prev = (pf.get_fusion(), pf.get_fusion_gpu())
    yield
    pf.set_fusion(prev[0], gpu=prev[1])
