"""pf.save / pf.load (safetensors): every dtype, nested structures, a trained
model and an optimizer resumed from a file, files exchanged with
safetensors.torch both ways, and the errors."""
import collections
import io
import math
import os

import numpy as np
import pytest

import pyflame as pf
import pyflame.nn as nn
from conftest import EVERY_DTYPE, bf16_round

pytest.importorskip("safetensors")


def random_tensor(dtype, shape, device="cpu"):
    if dtype == "bool":
        return pf.tensor(np.asarray(np.random.rand(*shape) < 0.5), device=device)
    if dtype in ("int32", "int64"):
        return pf.tensor(np.asarray(np.random.randint(-2**30, 2**30, size=shape)).astype(dtype),
                         device=device)
    x = np.asarray(np.random.randn(*shape) * 100).astype(np.float32)
    return pf.tensor(x, device=device).astype(dtype)


def values(t):
    """Exact values as NumPy (bfloat16 widened to float32, which is exact)."""
    return (t.astype("float32") if t.dtype == pf.bfloat16 else t).numpy()


def assert_same(a, b):
    assert isinstance(b, pf.Tensor)
    assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
    np.testing.assert_array_equal(values(a), values(b))


@pytest.mark.parametrize("dtype", EVERY_DTYPE)
@pytest.mark.parametrize("shape", [(3, 4), (0,), (2, 0, 5), (), (1, 1, 7)])
def test_tensor_round_trip(tmp_path, dtype, shape):
    t = random_tensor(dtype, shape)
    path = tmp_path / "t.safetensors"
    pf.save(t, path)
    assert_same(t, pf.load(path))


def test_bfloat16_bits_exact(tmp_path):
    x = np.random.randn(1000).astype(np.float32) * np.float32(1e-30)  # subnormal bf16 too
    x[:3] = [np.inf, -np.inf, -0.0]
    t = pf.tensor(x).astype(pf.bfloat16)
    pf.save({"w": t}, tmp_path / "b.safetensors")
    u = pf.load(tmp_path / "b.safetensors")["w"]
    np.testing.assert_array_equal(pf._core._to_host_bits(u), pf._core._to_host_bits(t))
    np.testing.assert_array_equal(values(u), bf16_round(x))


def test_nested_structure_round_trips_exactly(tmp_path):
    t = {name: random_tensor(name, (2, 3)) for name in EVERY_DTYPE}
    obj = {
        "model": collections.OrderedDict([("fc.weight", t["float32"]), ("fc.bias", t["bfloat16"])]),
        "optimizer": {
            "state": {0: {"step": 7, "exp_avg": t["float16"]}, 1: {"step": 7}},
            "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "params": [0, 1],
                              "amsgrad": False, "foreach": None}],
        },
        "masks": [t["bool"], (t["int32"], t["int64"])],
        "epoch": 3, "loss": 0.125, "name": "run-1", "inf": math.inf, "ninf": -math.inf,
        "empty": {}, "nothing": [], "np_scalar": np.float32(0.5),
    }
    pf.save(obj, tmp_path / "ckpt.safetensors")
    back = pf.load(tmp_path / "ckpt.safetensors")

    assert list(back) == list(obj)
    assert isinstance(back["model"], collections.OrderedDict)
    assert list(back["model"]) == ["fc.weight", "fc.bias"]
    assert_same(t["float32"], back["model"]["fc.weight"])
    assert_same(t["bfloat16"], back["model"]["fc.bias"])
    opt = back["optimizer"]
    assert list(opt["state"]) == [0, 1]  # int keys stay ints
    assert opt["state"][0]["step"] == 7 and opt["state"][1] == {"step": 7}
    assert_same(t["float16"], opt["state"][0]["exp_avg"])
    assert opt["param_groups"] == obj["optimizer"]["param_groups"]
    assert isinstance(opt["param_groups"][0]["betas"], tuple)
    assert isinstance(back["masks"], list) and isinstance(back["masks"][1], tuple)
    assert_same(t["bool"], back["masks"][0])
    assert_same(t["int32"], back["masks"][1][0])
    assert_same(t["int64"], back["masks"][1][1])
    assert (back["epoch"], back["loss"], back["name"]) == (3, 0.125, "run-1")
    assert back["inf"] == math.inf and back["ninf"] == -math.inf
    assert back["empty"] == {} and back["nothing"] == [] and back["np_scalar"] == 0.5


def test_nan_leaf(tmp_path):
    pf.save({"x": math.nan}, tmp_path / "n.safetensors")
    assert math.isnan(pf.load(tmp_path / "n.safetensors")["x"])


def test_file_objects_and_overwrite(tmp_path):
    t = pf.randn(4, 4)
    buf = io.BytesIO()
    pf.save({"a": t}, buf)
    buf.seek(0)
    assert_same(t, pf.load(buf)["a"])
    path = tmp_path / "w.safetensors"
    pf.save({"a": pf.zeros(2)}, str(path))
    pf.save({"b": t}, str(path))
    assert list(pf.load(str(path))) == ["b"]
    assert os.listdir(tmp_path) == ["w.safetensors"]  # no temporary left behind


def _mlp():
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))


def _train(model, opt, steps, x, y):
    for _ in range(steps):
        opt.zero_grad()
        loss = pf.cross_entropy(model(x), y)
        loss.backward()
        opt.step()


def test_trained_model_save_load(tmp_path, device):
    x = pf.tensor(np.random.randn(32, 6).astype(np.float32))
    y = pf.tensor(np.random.randint(0, 3, 32))
    model = _mlp().to(device)
    opt = pf.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    _train(model, opt, 5, x.to(device), y.to(device))
    model.save(tmp_path / "model.safetensors")

    fresh = _mlp().to(device)
    probe = pf.tensor(np.random.randn(8, 6).astype(np.float32), device=device)
    assert not np.array_equal(fresh(probe).numpy(), model(probe).numpy())
    fresh.load(tmp_path / "model.safetensors")
    np.testing.assert_allclose(fresh(probe).numpy(), model(probe).numpy(), rtol=1e-6, atol=1e-6)
    assert all(p.device == q.device for p, q in zip(fresh.parameters(), model.parameters()))


def test_module_load_strict(tmp_path):
    model = _mlp()
    pf.save({"0.weight": pf.zeros(16, 6)}, tmp_path / "part.safetensors")
    with pytest.raises(RuntimeError, match="Missing key"):
        model.load(tmp_path / "part.safetensors")
    result = model.load(tmp_path / "part.safetensors", strict=False)
    assert "2.bias" in result.missing_keys
    np.testing.assert_array_equal(model[0].weight.numpy(), np.zeros((16, 6), np.float32))


@pytest.mark.parametrize("make_opt", [
    lambda p: pf.optim.Adam(p, lr=1e-2, betas=(0.8, 0.95), amsgrad=True),
    lambda p: pf.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True),
    lambda p: pf.optim.AdamW(p, lr=1e-2, weight_decay=0.1),
], ids=["adam", "sgd", "adamw"])
def test_optimizer_resume_gives_the_same_next_step(tmp_path, make_opt):
    x = pf.tensor(np.random.randn(16, 6).astype(np.float32))
    y = pf.tensor(np.random.randint(0, 3, 16))
    model = _mlp()
    opt = make_opt(model.parameters())
    _train(model, opt, 3, x, y)
    pf.save({"model": model.state_dict(), "optimizer": opt.state_dict()},
            tmp_path / "ckpt.safetensors")
    _train(model, opt, 1, x, y)
    expected = [p.numpy() for p in model.parameters()]

    model2 = _mlp()
    opt2 = make_opt(model2.parameters())
    ckpt = pf.load(tmp_path / "ckpt.safetensors")
    model2.load_state_dict(ckpt["model"])
    opt2.load_state_dict(ckpt["optimizer"])
    _train(model2, opt2, 1, x, y)
    for got, want in zip(model2.parameters(), expected):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------ torch interop

torch_dtypes = {"bool": "bool", "int32": "int32", "int64": "int64", "float16": "float16",
                "bfloat16": "bfloat16", "float32": "float32"}


def test_file_from_safetensors_torch(tmp_path):
    torch = pytest.importorskip("torch")
    st = pytest.importorskip("safetensors.torch")
    tensors = {f"layer.{i}.{name}": (torch.randn(3, 5) * 100).to(getattr(torch, name))
               for i, name in enumerate(torch_dtypes)}
    tensors["f64"] = torch.randn(4, dtype=torch.float64)
    tensors["u8"] = torch.randint(0, 255, (6,), dtype=torch.uint8)
    tensors["i8"] = torch.randint(-128, 127, (6,), dtype=torch.int8)
    tensors["i16"] = torch.randint(-999, 999, (2, 2), dtype=torch.int16)
    tensors["empty"] = torch.zeros(0, 3)
    st.save_file(tensors, tmp_path / "torch.safetensors")
    back = pf.load(tmp_path / "torch.safetensors")
    assert set(back) == set(tensors)
    for i, name in enumerate(torch_dtypes):
        src = tensors[f"layer.{i}.{name}"]
        got = back[f"layer.{i}.{name}"]
        assert str(got.dtype) == name
        want = (src.float() if name == "bfloat16" else src).numpy()
        np.testing.assert_array_equal(values(got), want)
    assert back["f64"].dtype == pf.float64
    np.testing.assert_array_equal(back["f64"].numpy(), tensors["f64"].numpy())
    for k, d in (("u8", pf.uint8), ("i8", pf.int8), ("i16", pf.int16)):
        assert back[k].dtype == d
        np.testing.assert_array_equal(back[k].numpy(), tensors[k].numpy().astype(np.int32))
    assert tuple(back["empty"].shape) == (0, 3)


def test_file_to_safetensors_torch(tmp_path):
    torch = pytest.importorskip("torch")
    st = pytest.importorskip("safetensors.torch")
    model = _mlp()
    sd = {f"m.{k}": v for k, v in model.state_dict().items()}
    sd.update({f"x.{name}": random_tensor(name, (4, 2)) for name in EVERY_DTYPE})
    pf.save(sd, tmp_path / "pf.safetensors")
    back = st.load_file(tmp_path / "pf.safetensors")
    assert set(back) == set(sd)
    for k, t in sd.items():
        assert str(back[k].dtype) == f"torch.{t.dtype}"
        got = back[k].float() if back[k].dtype == torch.bfloat16 else back[k]
        np.testing.assert_array_equal(got.numpy(), values(t))
    from safetensors import safe_open
    with safe_open(tmp_path / "pf.safetensors", framework="np") as f:
        assert f.metadata()["format"] == "pt"
    # A torch model takes the saved state dict.
    tm = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    tm.load_state_dict({k[2:]: v for k, v in back.items() if k.startswith("m.")})
    probe = np.random.randn(5, 6).astype(np.float32)
    np.testing.assert_allclose(tm(torch.from_numpy(probe)).detach().numpy(),
                               model(pf.tensor(probe)).numpy(), rtol=1e-5, atol=1e-6)


def test_load_to_gpu(tmp_path, gpu_device):
    sd = {name: random_tensor(name, (3, 3)) for name in EVERY_DTYPE}
    pf.save(sd, tmp_path / "g.safetensors")
    back = pf.load(tmp_path / "g.safetensors", device=gpu_device)
    for k, t in sd.items():
        assert back[k].device.startswith("rocm")
        assert_same(t, back[k])
    gpu_sd = {k: v.to(gpu_device) for k, v in sd.items()}
    pf.save(gpu_sd, tmp_path / "g2.safetensors")
    for k, t in pf.load(tmp_path / "g2.safetensors", device="cpu").items():
        assert t.device == "cpu"
        assert_same(sd[k], t)


# ------------------------------------------------------------------- errors

def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"^\[load\] no such file"):
        pf.load(tmp_path / "nope.safetensors")
    with pytest.raises(IsADirectoryError, match=r"^\[load\] "):
        pf.load(tmp_path)


@pytest.mark.parametrize("content", [b"", b"hello world", b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}",
                                     np.random.default_rng(7).bytes(100), b"\xff" * 8 + b"{}"])
def test_not_a_safetensors_file(tmp_path, content):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=r"^\[load\] .*not a safetensors file"):
        pf.load(path)


def test_npy_file_is_not_safetensors(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(10))
    with pytest.raises(ValueError, match=r"^\[load\] .*not a safetensors file"):
        pf.load(tmp_path / "x.npy")


@pytest.mark.parametrize("obj,where", [
    ({"a": {1, 2}}, "a"),
    ({"a": [pf.ones(1), object()]}, "a.1"),
    (np.zeros(3), "<root>"),
    ({"x": {"y": b"bytes"}}, "x.y"),
    ({(1, 2): pf.ones(1)}, "<root>"),
    ({True: 1}, "<root>"),
])
def test_unsupported_objects(tmp_path, obj, where):
    with pytest.raises(ValueError, match=r"^\[save\] ") as e:
        pf.save(obj, tmp_path / "u.safetensors")
    assert f"'{where}'" in str(e.value)
    assert not os.path.exists(tmp_path / "u.safetensors")


def test_module_object_hint(tmp_path):
    with pytest.raises(ValueError, match=r"^\[save\] .*Sequential.*state_dict"):
        pf.save(_mlp(), tmp_path / "m.safetensors")


@pytest.mark.parametrize("obj", [
    {"a.b": pf.ones(1), "a": {"b": pf.zeros(1)}},
    {"0": pf.ones(1), 0: pf.ones(1)},
    {"a": [pf.ones(1)], "a.0": pf.ones(1)},
])
def test_key_collisions(tmp_path, obj):
    with pytest.raises(ValueError, match=r"^\[save\] key collision"):
        pf.save(obj, tmp_path / "c.safetensors")


def test_unsupported_dtype_in_file(tmp_path):
    torch = pytest.importorskip("torch")
    st = pytest.importorskip("safetensors.torch")
    st.save_file({"c": torch.zeros(2, dtype=torch.complex64)}, tmp_path / "c.safetensors")
    with pytest.raises(ValueError, match=r"^\[load\] tensor 'c' has dtype C64"):
        pf.load(tmp_path / "c.safetensors")


def test_bad_device(tmp_path):
    pf.save({"a": pf.ones(1)}, tmp_path / "d.safetensors")
    with pytest.raises(ValueError):
        pf.load(tmp_path / "d.safetensors", device="tpu")


def test_corrupt_structure_entry(tmp_path):
    from safetensors.numpy import save_file
    for bad in ['{"version": 1, "tree": {"t": "missing"}}', '{"version": 1, "tree": [1, 2]}',
                '{"version": 1, "tree": {"zz": 1}}', 'not json', '{"no": "tree"}']:
        save_file({"a": np.zeros(2, np.float32)}, tmp_path / "s.safetensors",
                  metadata={"pyflame": bad})
        with pytest.raises(ValueError, match=r"^\[load\] "):
            pf.load(tmp_path / "s.safetensors")


def test_numpy_integer_keys(tmp_path):
    pf.save({np.int64(3): pf.ones(2)}, tmp_path / "k.safetensors")
    back = pf.load(tmp_path / "k.safetensors")
    assert list(back) == [3] and type(list(back)[0]) is int
