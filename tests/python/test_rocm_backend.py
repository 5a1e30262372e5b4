"""GPU backend services from Python: device info, memory manager, pinned pool,
warm-up, out-of-memory recovery, TF32 switch, placement of results."""
import numpy as np
import pytest

import pyflame as pf
from pyflame.backend.rocm import (get_memory_manager, get_pinned_pool, set_allow_tf32,
                                  allow_tf32, warmup_memory_pool)

from conftest import assert_close, random_array


def test_device_info_keys(gpu_device):
    info = pf.rocm_get_device_info(0)
    for key in ("device_id", "name", "architecture", "total_memory", "free_memory",
                "compute_units", "platform"):
        assert key in info
    assert info["platform"] in ("amd", "nvidia")
    assert 0 < info["free_memory"] <= info["total_memory"]
    d = pf.device_info()
    assert d["type"] == "rocm" and d["name"] == info["name"]
    assert pf.get_device() == "rocm:0"


def test_invalid_device_ids_raise(gpu_device):
    n = pf.rocm_device_count()
    for bad in (n, -1):
        with pytest.raises(RuntimeError, match=r"^\[rocm_"):
            pf.rocm_get_device_info(bad)
        with pytest.raises(RuntimeError):
            pf.rocm_set_device(bad)
    with pytest.raises(RuntimeError, match="invalid ROCm device index"):
        pf.set_device(f"rocm:{n}")


def test_results_stay_on_device_until_read(gpu_device):
    x = random_array((256, 64))
    t = pf.tensor(x, dtype=pf.float32)
    y = (t * 2.0 + 1.0).sum(axis=0)
    assert y.device == "rocm:0"
    assert_close(y, (x.astype(np.float64) * 2 + 1).sum(0), "float32", rtol=1e-5, atol=1e-4)


def test_memory_manager_stats_and_pool(gpu_device):
    mm = get_memory_manager()
    mm.reset_stats()
    before = mm.get_stats()
    a = (pf.randn(1024, 1024) + 1.0).eval()  # at least one 4 MiB buffer
    s = mm.get_stats()
    assert s["total_allocations"] > before["total_allocations"]
    assert s["peak_allocated"] >= 4 << 20
    del a
    s2 = mm.get_stats()
    assert s2["total_deallocations"] > s["total_deallocations"]
    assert s2["cached_bytes"] > 0
    b = (pf.randn(1024, 1024) + 1.0).eval()  # same sizes again: served from the cache
    assert mm.get_stats()["cache_hits"] > s2["cache_hits"]
    del b
    mm.clear_pool()
    assert mm.get_stats()["cached_bytes"] == 0
    free, total = mm.get_memory_info()
    assert 0 < free <= total


def test_pinned_pool_and_warmup(gpu_device):
    pool = get_pinned_pool()
    pool.warmup([1 << 20, 3 * 224 * 224 * 4])
    assert pool.cached_bytes >= (1 << 20)
    warmup_memory_pool(batch_size=32, model_size="small")
    with pytest.raises(ValueError, match="model_size"):
        warmup_memory_pool(batch_size=32, model_size="huge")


def test_out_of_memory_is_catchable_and_recoverable(gpu_device):
    with pytest.raises(pf.OutOfMemoryError, match=r"out of GPU memory.*tried to allocate"):
        pf.zeros(1 << 48).eval()
    assert issubclass(pf.OutOfMemoryError, RuntimeError)
    x = random_array((100,))
    assert_close(pf.tensor(x, dtype=pf.float32) + 1.0, x + 1, "float32")


def test_tf32_off_by_default_fp32_matches_cpu(gpu_device):
    assert allow_tf32() is False
    a, b = random_array((512, 512)), random_array((512, 512))
    got = (pf.tensor(a) @ pf.tensor(b)).numpy()
    ref = a.astype(np.float64) @ b.astype(np.float64)
    # TF32 (10-bit mantissa) would be off by ~1e-3 relative here.
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3)
    set_allow_tf32(True)
    try:
        assert allow_tf32() is True
        got = (pf.tensor(a) @ pf.tensor(b)).numpy()
        np.testing.assert_allclose(got, ref, rtol=2e-2, atol=0.5)
    finally:
        set_allow_tf32(False)


def test_backend_api_without_gpu_raises():
    if pf.rocm_is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError):
        get_memory_manager().get_stats()
    with pytest.raises(RuntimeError):
        get_pinned_pool().warmup([1024])
