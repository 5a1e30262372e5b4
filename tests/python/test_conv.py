"""conv1d/2d/3d and conv_transpose1d/2d/3d against torch.nn.functional (float64
on the CPU, from the same values), and the DNN tuning cache."""
import numpy as np
import pytest

import pyflame as pf
from conftest import GPU_DEVICES, assert_close, make_tensor, random_array

torch = pytest.importorskip("torch")
F = torch.nn.functional

pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same'")

TOL = {"float32": (1e-4, 2e-4), "float16": (5e-3, 5e-3), "bfloat16": (2e-2, 3e-2)}


def _ref(fn, x, w, b=None, **kw):
    t = lambda a: None if a is None else torch.from_numpy(np.asarray(a, dtype=np.float64))  # noqa: E731
    return getattr(F, fn)(t(x), t(w), t(b), **kw).numpy()


def _check(fn, x, w, b, dtype="float32", device=None, **kw):
    want = _ref(fn, x, w, b, **kw)
    bt = None if b is None else make_tensor(b, dtype)
    got = getattr(pf, fn)(make_tensor(x, dtype), make_tensor(w, dtype), bt, **kw)
    r, a = TOL[dtype]
    assert_close(got, want, dtype, rtol=r, atol=a, device=device)


def _inputs(n, cin, cout, spatial, kernel, groups, dtype="float32", transposed=False):
    x = random_array((n, cin) + tuple(spatial), dtype, -1, 1)
    wshape = (cin, cout // groups) if transposed else (cout, cin // groups)
    w = random_array(wshape + tuple(kernel), dtype, -1, 1)
    b = random_array((cout,), dtype, -1, 1)
    return x, w, b


# (stride, padding, dilation, groups)
CONV2D_CASES = [
    (1, 0, 1, 1),
    (1, 1, 1, 1),
    (2, 1, 1, 1),
    (1, 2, 2, 1),
    ((2, 1), (0, 2), (1, 3), 1),
    (1, 1, 1, 2),
    (2, (1, 0), 2, 4),
    (3, 2, 1, 8),  # depthwise
]


@pytest.mark.parametrize("stride,padding,dilation,groups", CONV2D_CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d_params(device, stride, padding, dilation, groups, bias):
    x, w, b = _inputs(2, 8, 8, (9, 10), (3, 3), groups)
    _check("conv2d", x, w, b if bias else None, device=device, stride=stride, padding=padding,
           dilation=dilation, groups=groups)


@pytest.mark.parametrize("stride,padding,dilation,groups,kernel", [
    (1, 0, 1, 1, 3), (2, 1, 1, 1, 5), (1, 3, 3, 2, 3), (3, 2, 2, 6, 4), (1, 0, 1, 3, 1)])
def test_conv1d_params(device, stride, padding, dilation, groups, kernel):
    x, w, b = _inputs(3, 6, 12, (17,), (kernel,), groups)
    _check("conv1d", x, w, b, device=device, stride=stride, padding=padding, dilation=dilation, groups=groups)


@pytest.mark.parametrize("stride,padding,dilation,groups", [
    (1, 0, 1, 1), (2, 1, 1, 1), ((1, 2, 1), (1, 0, 2), (2, 1, 1), 2), (1, 1, 1, 4)])
def test_conv3d_params(device, stride, padding, dilation, groups):
    x, w, b = _inputs(2, 4, 8, (5, 6, 7), (3, 2, 3), groups)
    _check("conv3d", x, w, b, device=device, stride=stride, padding=padding, dilation=dilation, groups=groups)


def test_conv_kernel_1x1_and_full_size(device):
    x, w, b = _inputs(2, 5, 7, (6, 6), (1, 1), 1)
    _check("conv2d", x, w, b, device=device)
    x, w, b = _inputs(2, 3, 4, (5, 7), (5, 7), 1)  # kernel covers the whole input: 1x1 output
    _check("conv2d", x, w, b, device=device)
    _check("conv2d", x, w, b, device=device, padding=1, stride=2)


@pytest.mark.parametrize("nsp,kernel,dilation", [(1, 4, 1), (1, 3, 2), (2, (2, 3), 1), (2, 3, (2, 1)), (3, 2, 1)])
@pytest.mark.parametrize("padding", ["same", "valid"])
def test_conv_padding_modes(device, nsp, kernel, dilation, padding):
    ks = (kernel,) * nsp if isinstance(kernel, int) else kernel
    x, w, b = _inputs(2, 4, 6, (7, 8, 6)[:nsp], ks, 2)
    _check(f"conv{nsp}d", x, w, b, device=device, padding=padding, dilation=dilation, groups=2)


@pytest.mark.parametrize("fn,nsp", [("conv1d", 1), ("conv2d", 2), ("conv3d", 3)])
def test_conv_unbatched(device, fn, nsp):
    x = random_array((4,) + (6,) * nsp, "float32", -1, 1)
    w = random_array((6, 2) + (3,) * nsp, "float32", -1, 1)
    want = getattr(F, fn)(torch.from_numpy(x[None]), torch.from_numpy(w), None, 1, 1, 1, 2)[0].numpy()
    got = getattr(pf, fn)(make_tensor(x), make_tensor(w), None, padding=1, groups=2)
    assert_close(got, want, "float32", rtol=1e-4, atol=1e-4, device=device)


def test_conv_non_contiguous_inputs(device):
    xb = random_array((2, 6, 9, 20), "float32", -1, 1)
    wt = random_array((3, 3, 3, 8), "float32", -1, 1)  # (kW, kH, Cin/groups, Cout)
    bb = random_array((16,), "float32", -1, 1)
    x = make_tensor(xb)[:, :, :, ::2]
    w = pf.transpose(make_tensor(wt), (3, 2, 1, 0))
    b = make_tensor(bb)[::2]
    want = _ref("conv2d", xb[:, :, :, ::2], wt.transpose(3, 2, 1, 0), bb[::2], padding=1, groups=2)
    assert_close(pf.conv2d(x, w, b, padding=1, groups=2), want, "float32", rtol=1e-4, atol=1e-4, device=device)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("fn,spatial,kernel", [("conv1d", (11,), (3,)), ("conv2d", (8, 9), (3, 3)),
                                               ("conv3d", (4, 5, 6), (3, 3, 2))])
def test_conv_low_precision(device, dtype, fn, spatial, kernel):
    x, w, b = _inputs(2, 4, 6, spatial, kernel, 2, dtype)
    _check(fn, x, w, b, dtype, device=device, padding=1, groups=2)


def test_conv_large_input_column_chunks(device):
    # The CPU column buffer is filled in several chunks here.
    x, w, b = _inputs(1, 32, 4, (160, 160), (5, 5), 1)
    _check("conv2d", x, w, b, device=device, padding=1)


def test_conv_zero_batch(device):
    x = np.zeros((0, 3, 5, 5), np.float32)
    w = random_array((4, 3, 3, 3), "float32")
    out = pf.conv2d(make_tensor(x), make_tensor(w))
    assert out.shape == (0, 4, 3, 3)
    assert out.numpy().shape == (0, 4, 3, 3)


# (stride, padding, output_padding, groups, dilation)
TRANSPOSE_CASES = [
    (1, 0, 0, 1, 1),
    (2, 0, 0, 1, 1),
    (2, 1, 1, 1, 1),
    (3, 1, 2, 2, 1),
    ((2, 1), (0, 1), (1, 0), 4, 1),
    (1, 1, 0, 1, 2),
    (2, 2, 1, 2, (2, 3)),
    (1, 0, 1, 1, 2),  # output_padding >= stride (allowed since < dilation)
    (1, 2, (1, 2), 1, (2, 3)),
]


@pytest.mark.parametrize("stride,padding,output_padding,groups,dilation", TRANSPOSE_CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_conv_transpose2d_params(device, stride, padding, output_padding, groups, dilation, bias):
    x, w, b = _inputs(2, 8, 8, (5, 6), (3, 3), groups, transposed=True)
    _check("conv_transpose2d", x, w, b if bias else None, device=device, stride=stride, padding=padding,
           output_padding=output_padding, groups=groups, dilation=dilation)


@pytest.mark.parametrize("fn,spatial,kernel", [("conv_transpose1d", (7,), (4,)),
                                               ("conv_transpose3d", (3, 4, 5), (2, 3, 3))])
def test_conv_transpose_1d_3d(device, fn, spatial, kernel):
    x, w, b = _inputs(2, 4, 6, spatial, kernel, 2, transposed=True)
    _check(fn, x, w, b, device=device, stride=2, padding=1, output_padding=1, groups=2)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_conv_transpose2d_low_precision_and_unbatched(device, dtype):
    x, w, b = _inputs(2, 4, 6, (5, 5), (3, 3), 2, dtype, transposed=True)
    _check("conv_transpose2d", x, w, b, dtype, device=device, stride=2, padding=1, groups=2)
    x1 = x[0]
    want = _ref("conv_transpose2d", x1[None], w, b, stride=2, groups=2)[0]
    got = pf.conv_transpose2d(make_tensor(x1, dtype), make_tensor(w, dtype), make_tensor(b, dtype), stride=2,
                              groups=2)
    assert_close(got, want, dtype, *TOL[dtype])


def _raises(fn_name, call, match=""):
    with pytest.raises(ValueError, match=r"^\[" + fn_name + r"\]" + match):
        call()


def test_conv_bad_inputs(device):
    x = pf.randn((2, 4, 8, 8))
    w = pf.randn((6, 4, 3, 3))
    c2 = pf.conv2d
    _raises("conv2d", lambda: c2(x, w, stride=0), ".*stride")
    _raises("conv2d", lambda: c2(x, w, stride=(1, -1)), ".*stride")
    _raises("conv2d", lambda: c2(x, w, padding=-1), ".*padding")
    _raises("conv2d", lambda: c2(x, w, dilation=0), ".*dilation")
    _raises("conv2d", lambda: c2(x, w, groups=0), ".*groups")
    _raises("conv2d", lambda: c2(x, pf.randn((6, 2, 3, 3)), groups=3), ".*divisible by groups")
    _raises("conv2d", lambda: c2(x, pf.randn((6, 2, 3, 3)), groups=4), ".*divisible by groups")
    _raises("conv2d", lambda: c2(x, pf.randn((6, 3, 3, 3))), ".*input channels")
    _raises("conv2d", lambda: c2(x, w, pf.randn((5,))), ".*bias")
    _raises("conv2d", lambda: c2(x, w, pf.randn((6, 1))), ".*bias")
    _raises("conv2d", lambda: c2(pf.randn((4, 8)), w), ".*3-d .*input")
    _raises("conv2d", lambda: c2(pf.randn((1, 2, 4, 8, 8)), w), ".*input")
    _raises("conv2d", lambda: c2(x, pf.randn((6, 4, 3))), ".*weight")
    _raises("conv2d", lambda: c2(x, w.astype("float16")), ".*dtype")
    _raises("conv2d", lambda: c2(x, w, pf.randn((6,)).astype("bfloat16")), ".*dtype")
    _raises("conv2d", lambda: c2(x.astype("int32"), w.astype("int32")), ".*floating")
    _raises("conv2d", lambda: c2(x, pf.randn((6, 4, 9, 3))), ".*larger than the padded input")
    _raises("conv2d", lambda: c2(x, w, dilation=4), ".*larger than the padded input")
    _raises("conv2d", lambda: c2(x, pf.randn((6, 4, 11, 3)), padding=1), ".*larger than the padded input")
    _raises("conv2d", lambda: c2(x, w, stride=(1, 1, 1)), ".*stride")
    _raises("conv2d", lambda: c2(x, w, padding="same", stride=2), ".*strided")
    _raises("conv2d", lambda: c2(x, w, padding="full"), ".*padding")
    _raises("conv2d", lambda: c2(x, w, stride=1.5), ".*stride")
    _raises("conv1d", lambda: pf.conv1d(pf.randn((2, 4, 3)), pf.randn((2, 4, 5))), ".*larger")
    _raises("conv3d", lambda: pf.conv3d(pf.randn((4, 3, 3)), pf.randn((2, 4, 1, 1, 1))), ".*4-d .*input")
    ct = pf.conv_transpose2d
    wt = pf.randn((4, 3, 3, 3))
    _raises("conv_transpose2d", lambda: ct(x, wt, output_padding=1), ".*output_padding")
    _raises("conv_transpose2d", lambda: ct(x, wt, stride=2, output_padding=2), ".*output_padding")
    _raises("conv_transpose2d", lambda: ct(x, pf.randn((3, 3, 3, 3))), ".*input channels")
    _raises("conv_transpose2d", lambda: ct(x, wt, groups=3), ".*divisible by groups")
    _raises("conv_transpose2d", lambda: ct(x, wt, pf.randn((4,))), ".*bias")
    _raises("conv_transpose2d", lambda: ct(x, wt, padding=5), ".*output size")
    _raises("conv_transpose2d", lambda: ct(x, wt, stride=0), ".*stride")
    # still usable
    xs = random_array((1, 4, 5, 5), "float32", -1, 1)
    ws = random_array((2, 4, 3, 3), "float32", -1, 1)
    _check("conv2d", xs, ws, None, device=device)


@pytest.mark.skipif(not GPU_DEVICES, reason="no GPU device under test")
def test_conv_device_mismatch(device):
    other = GPU_DEVICES[0] if device == "cpu" else "cpu"
    x = pf.randn((1, 2, 5, 5))
    w = pf.randn((3, 2, 3, 3), device=other)
    _raises("conv2d", lambda: pf.conv2d(x, w), ".*different devices")
    _raises("conv2d", lambda: pf.conv2d(x, pf.randn((3, 2, 3, 3)), pf.randn((3,), device=other)),
            ".*different devices")


# --------------------------------------------------------------- tuning cache

@pytest.fixture
def tuning_cache():
    from pyflame.backend.tuning import get_tuning_cache
    cache = get_tuning_cache()
    exhaustive = cache.exhaustive_search
    cache.set_cache_file(None)
    cache.clear()
    yield cache
    cache.set_cache_file(None)
    cache.clear()
    cache.enable_exhaustive_search(exhaustive)


def test_tuning_cache_stats_and_modes(tuning_cache):
    c = tuning_cache
    assert c.get_stats() == {"hits": 0, "misses": 0, "entries": 0}
    assert pf._core._tuning_lookup("conv_fwd|k1") is None
    pf._core._tuning_insert("conv_fwd|k1", 3, workspace=1024, math=1, exhaustive=True)
    pf._core._tuning_insert("conv_fwd|k2", 5, workspace=0, math=3, exhaustive=False)
    assert pf._core._tuning_lookup("conv_fwd|k1") == (3, 1024, 1, True)
    c.enable_exhaustive_search(True)
    assert c.exhaustive_search
    assert pf._core._tuning_lookup("conv_fwd|k2") is None  # heuristic entry: re-tune when exhaustive
    c.enable_exhaustive_search(False)
    assert pf._core._tuning_lookup("conv_fwd|k2") == (5, 0, 3, False)
    assert c.get_stats() == {"hits": 2, "misses": 2, "entries": 2}
    assert sorted(e[0] for e in c.entries()) == ["conv_fwd|k1", "conv_fwd|k2"]
    c.clear()
    assert c.get_stats() == {"hits": 0, "misses": 0, "entries": 0}
    with pytest.raises(ValueError, match=r"^\[tuning_cache\]"):
        pf._core._tuning_insert("bad\tkey", 1)


def test_tuning_cache_persistence_round_trip(tuning_cache, tmp_path):
    c = tuning_cache
    path = tmp_path / "miopen_cache.bin"
    pf._core._tuning_insert("before|file", 7, 64, 0, True)
    c.set_cache_file(path)  # the existing entry is written out
    assert c.cache_file == str(path)
    assert path.exists() and "before|file" in path.read_text()
    pf._core._tuning_insert("conv_fwd|x=1,2,3,3", 11, 4096, 1, True)
    assert "conv_fwd|x=1,2,3,3" in path.read_text()  # written on update
    c.set_cache_file(None)
    c.clear()
    assert c.get_stats()["entries"] == 0
    c.set_cache_file(str(path))  # loads what the file holds
    assert c.get_stats()["entries"] == 2
    assert pf._core._tuning_lookup("conv_fwd|x=1,2,3,3") == (11, 4096, 1, True)
    c.clear()  # rewrites the file without entries
    c.set_cache_file(None)
    c.set_cache_file(path)
    assert c.get_stats()["entries"] == 0
    bad = tmp_path / "no_such_dir" / "cache.bin"
    with pytest.raises(RuntimeError, match="tuning cache file"):
        c.set_cache_file(bad)
    assert c.cache_file == str(path)  # unchanged after the failure


def test_tuning_cache_from_rocm_module():
    import pyflame.backend.rocm as rocm
    from pyflame.backend.tuning import get_tuning_cache
    if not hasattr(rocm, "get_tuning_cache"):
        pytest.skip("pyflame.backend.rocm does not re-export get_tuning_cache yet")
    assert rocm.get_tuning_cache() is get_tuning_cache()


@pytest.mark.parametrize("exhaustive", [True, False])
def test_tuning_cache_consulted_on_gpu(gpu_device, tuning_cache, tmp_path, exhaustive):
    c = tuning_cache
    c.enable_exhaustive_search(exhaustive)
    c.set_cache_file(tmp_path / "cache.txt")
    x, w, b = _inputs(2, 4, 6, (9, 9), (3, 3), 2)
    for _ in range(3):
        _check("conv2d", x, w, b, device=gpu_device, padding=1, groups=2)
    s = c.get_stats()
    assert s["misses"] == 1 and s["hits"] == 2 and s["entries"] == 1, s
    xt, wt, bt = _inputs(2, 4, 6, (5, 5), (3, 3), 2, transposed=True)
    _check("conv_transpose2d", xt, wt, bt, device=gpu_device, stride=2, groups=2)
    assert c.get_stats()["entries"] == 2
    keys = [e[0] for e in c.entries()]
    assert any(k.startswith("conv_fwd|") for k in keys) and any(k.startswith("conv_bwd_data|") for k in keys)
    assert all(e[4] == exhaustive for e in c.entries())
    assert len((tmp_path / "cache.txt").read_text().strip().splitlines()) == 3  # header + 2 entries
    # A fresh process would load these: simulate by reloading into an empty cache.
    c.set_cache_file(None)
    c.clear()
    c.set_cache_file(tmp_path / "cache.txt")
    _check("conv2d", x, w, b, device=gpu_device, padding=1, groups=2)
    assert c.get_stats()["hits"] == 1 and c.get_stats()["misses"] == 0
