"""Device selection and placement."""
import os

import numpy as np
import pytest

import pyflame as pf
from conftest import assert_close, device_kind, make_tensor, random_array

ROCM_INFO_KEYS = {"device_id": int, "name": str, "architecture": str, "total_memory": int,
                  "free_memory": int, "compute_units": int}


def test_set_get_device_cpu():
    pf.set_device("cpu")
    assert pf.get_device() == "cpu"
    t = pf.ones(3)
    assert t.device == "cpu"


def test_set_device_auto():
    pf.set_device("auto")
    if pf.rocm_is_available():
        assert pf.get_device().startswith("rocm:")
    else:
        assert pf.get_device() == "cpu"
    assert pf.zeros(2).device == pf.get_device()


def test_device_info_cpu():
    pf.set_device("cpu")
    info = pf.device_info()
    assert info["type"] == "cpu"
    assert isinstance(info["name"], str) and info["name"]
    assert isinstance(info["cores"], int) and info["cores"] >= 1
    assert info["cores"] == os.cpu_count()


def test_synchronize(device):
    t = pf.exp(make_tensor(random_array((4,), "float32"), "float32"))
    pf.synchronize()
    t.eval()
    pf.synchronize()
    assert t.is_evaluated


def test_default_device_places_tensors(device):
    assert pf.get_device().split(":")[0] == device_kind(device)
    x = random_array((2, 3), "float32")
    made = [pf.zeros(2), pf.ones((2, 2)), pf.full(3, 1.5), pf.arange(4), pf.eye(2), pf.rand(3),
            pf.randn(3), pf.randint(0, 3, (2,)), pf.tensor(x), pf.asarray([1, 2]),
            pf.tensor(2.0), pf.zeros_like(pf.tensor(x))]
    for t in made:
        assert t.device.split(":")[0] == device_kind(device), t
        assert t.device == pf.get_device()


def test_device_argument_places_tensors(device):
    pf.set_device("cpu")  # the argument wins over the default
    x = random_array((2, 3), "float32")
    made = [pf.zeros(2, device=device), pf.ones(2, device=device), pf.full(2, 3, device=device),
            pf.arange(0, 5, 2, device=device), pf.eye(3, device=device),
            pf.rand(2, device=device), pf.randn(2, device=device),
            pf.randint(0, 9, (3,), device=device), pf.tensor(x, device=device),
            pf.asarray(x.tolist(), device=device)]
    for t in made:
        assert t.device.split(":")[0] == device_kind(device), t
    assert_close(pf.tensor(x, device=device) * 2.0, x * 2.0, "float64", device=device)
    assert_close(pf.eye(3, device=device), np.eye(3), "float32", device=device)


def test_transfer_round_trip(device):
    x = random_array((3, 5), "float32")
    t = make_tensor(x, "float32", device=device)
    back = t.to("cpu")
    assert back.device == "cpu"
    assert_close(back, x, "float32", rtol=0, atol=0)
    there = back.to(device)
    assert there.device.split(":")[0] == device_kind(device)
    assert_close(there, x, "float32", rtol=0, atol=0)
    # transfers of non-contiguous views and every dtype
    assert_close(there.T[::-1].to("cpu"), x.T[::-1], "float32", rtol=0, atol=0)
    for dt in ("bool", "int32", "int64", "float16", "bfloat16"):
        y = random_array((4, 3), dt)
        assert_close(make_tensor(y, dt, device=device).to("cpu"), y, dt, rtol=0, atol=0)
        assert_close(make_tensor(y, dt, device="cpu").to(device)[1:], y[1:], dt, rtol=0, atol=0)


# ------------------------------------------------------------------ GPU

def test_gpu_device_info(gpu_device):
    info = pf.device_info()
    assert info["type"] == "rocm"
    for key, typ in ROCM_INFO_KEYS.items():
        assert isinstance(info[key], typ), (key, info[key])
    assert info["name"] and info["architecture"]
    assert 0 < info["free_memory"] <= info["total_memory"]
    assert info["compute_units"] > 0
    assert info["device_id"] == pf.rocm_get_device()
    direct = pf.rocm_get_device_info(info["device_id"])
    assert set(ROCM_INFO_KEYS) <= set(direct)
    assert direct["name"] == info["name"] and direct["total_memory"] == info["total_memory"]


def test_gpu_set_get_device(gpu_device):
    n = pf.rocm_device_count()
    assert n >= 1
    for i in range(n):
        pf.set_device(f"rocm:{i}")
        assert pf.get_device() == f"rocm:{i}"
        assert pf.rocm_get_device() == i
        assert pf.zeros(2).device == f"rocm:{i}"
    pf.rocm_set_device(0)
    assert pf.rocm_get_device() == 0
    pf.set_device("rocm")
    assert pf.get_device() == "rocm:0"
    pf.set_device("cpu")
    assert pf.get_device() == "cpu"


def test_gpu_mixing_devices_raises(gpu_device):
    g = pf.ones(3, device=gpu_device)
    c = pf.ones(3, device="cpu")
    for name in ("add", "mul", "maximum", "lt", "matmul"):
        with pytest.raises(ValueError, match=rf"^\[{name}\] .*different devices"):
            getattr(pf, name)(g, c)
        with pytest.raises(ValueError, match=rf"^\[{name}\]"):
            getattr(pf, name)(c, g)
    with pytest.raises(ValueError, match=r"^\[add\]"):
        g + c
    with pytest.raises(ValueError, match=r"^\[where\]"):
        pf.where(pf.ones(3, dtype="bool", device="cpu"), g, g)
    # still usable, and explicit moves work
    x = random_array((3,), "float32")
    assert_close(make_tensor(x, "float32", device=gpu_device) + pf.ones(3, device="cpu").to(gpu_device),
                 x + 1.0, "float32", device=gpu_device)


def test_gpu_scalars_follow_tensor(gpu_device):
    pf.set_device("cpu")
    x = random_array((4,), "float32")
    g = make_tensor(x, "float32", device=gpu_device)
    out = 2.0 * g + 1
    assert out.device == g.device
    assert_close(out, 2.0 * x + 1, "float32")


def test_gpu_matches_cpu_on_same_graph(gpu_device):
    a = random_array((16, 33), "float32", -1, 1)
    b = random_array((33, 8), "float32", -1, 1)

    def run(dev):
        ta, tb = make_tensor(a, "float32", device=dev), make_tensor(b, "float32", device=dev)
        return pf.softmax(pf.gelu(ta @ tb) - pf.mean(ta, 1, keepdim=True), -1).numpy()

    ref = run("cpu")
    np.testing.assert_allclose(run(gpu_device), ref, rtol=1e-5, atol=1e-6)
