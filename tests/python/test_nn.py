"""pyflame.nn against torch.nn (1.13, CPU): module bookkeeping, state dicts,
modes, devices, initialization, and every layer's forward pass with weights
copied from the torch module.

A layer whose functional op (pf.conv2d, pf.batch_norm, ...) is missing from
this build is skipped with the op's name as the reason.
"""
import math
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import pyflame as pf
import pyflame.nn as nn
import pyflame.nn.functional as F
from pyflame.nn import init
from conftest import assert_close, device_kind

try:
    import torch
except ImportError:  # the oracle tests skip; the bookkeeping tests still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch (the reference) is not installed")


# ------------------------------------------------------------------ helpers

def need_ops(*names):
    missing = [n for n in names if not hasattr(pf, n)]
    if missing:
        pytest.skip("op(s) not in this build yet: " + ", ".join("pf." + n for n in missing))


def build(lib, spec):
    """The module spec = (class name, args, kwargs) from torch.nn or pyflame.nn."""
    name, args, kwargs = spec
    return getattr(lib, name)(*args, **kwargs)


def torch_state(tm):
    return OrderedDict((k, v.detach().numpy().copy()) for k, v in tm.state_dict().items())


def copy_from_torch(ours, tm):
    ours.load_state_dict(torch_state(tm))
    return ours


def randomize_torch(tm, gen_seed=0):
    """Random values in every float parameter and buffer (norm layers start at
    ones/zeros, which would hide a swapped weight/bias); variances positive."""
    g = torch.Generator().manual_seed(gen_seed)
    with torch.no_grad():
        for name, t in list(tm.named_parameters()) + list(tm.named_buffers()):
            if not t.is_floating_point():
                continue
            if name.endswith("running_var"):
                t.copy_(torch.rand(t.shape, generator=g) + 0.5)
            else:
                t.copy_(torch.rand(t.shape, generator=g) * 2 - 1)


def on_device(t, device):
    return t.device.split(":")[0] == device_kind(device)


def shapes(named):
    return [(n, tuple(t.shape)) for n, t in named]


# --------------------------------------------------------- the layer table
# (id, ops needed, module spec, input shape or ("int", high, shape)); the spec
# builds the same layer from torch.nn and pyflame.nn.

LAYERS = [
    ("linear", ["matmul"], ("Linear", (5, 7), {}), (4, 5)),
    ("linear_nobias_3d", ["matmul"], ("Linear", (5, 3), {"bias": False}), (2, 3, 5)),
    ("conv1d", ["conv1d"], ("Conv1d", (3, 6, 3), {"stride": 2, "padding": 1}), (2, 3, 11)),
    ("conv1d_same_groups", ["conv1d", "pad"],
     ("Conv1d", (4, 4, 4), {"padding": "same", "dilation": 1, "groups": 2}), (2, 4, 9)),
    ("conv2d", ["conv2d"], ("Conv2d", (3, 8, 3), {"padding": 1}), (2, 3, 7, 6)),
    ("conv2d_groups", ["conv2d"],
     ("Conv2d", (4, 6, (3, 2)), {"stride": (2, 1), "dilation": (1, 2), "groups": 2,
                                  "bias": False}), (2, 4, 9, 8)),
    ("conv2d_same", ["conv2d"], ("Conv2d", (3, 4, 3), {"padding": "same"}), (1, 3, 6, 5)),
    ("conv2d_valid", ["conv2d"], ("Conv2d", (3, 4, 3), {"padding": "valid"}), (1, 3, 6, 5)),
    ("conv2d_reflect", ["conv2d", "pad"],
     ("Conv2d", (2, 3, 3), {"padding": 1, "padding_mode": "reflect"}), (2, 2, 5, 5)),
    ("conv2d_circular", ["conv2d", "pad"],
     ("Conv2d", (2, 3, 3), {"padding": (1, 2), "padding_mode": "circular"}), (1, 2, 5, 6)),
    ("conv2d_unbatched", ["conv2d"], ("Conv2d", (3, 4, 3), {}), (3, 6, 6)),
    ("conv3d", ["conv3d"], ("Conv3d", (2, 4, 3), {"padding": 1, "stride": (1, 2, 1)}),
     (2, 2, 4, 5, 4)),
    ("conv_transpose2d", ["conv_transpose2d"],
     ("ConvTranspose2d", (4, 6, 3), {"stride": 2, "padding": 1, "output_padding": 1}),
     (2, 4, 5, 4)),
    ("conv_transpose2d_groups", ["conv_transpose2d"],
     ("ConvTranspose2d", (4, 6, 3), {"stride": 2, "groups": 2, "dilation": 2, "bias": False}),
     (2, 4, 3, 4)),
    ("maxpool1d", ["max_pool1d"], ("MaxPool1d", (3, 2), {}), (2, 3, 11)),
    ("maxpool2d", ["max_pool2d"], ("MaxPool2d", (3, 2), {"padding": 1}), (2, 3, 7, 8)),
    ("maxpool2d_ceil", ["max_pool2d"], ("MaxPool2d", (2,), {"ceil_mode": True}), (1, 2, 5, 7)),
    ("maxpool2d_dilation", ["max_pool2d"], ("MaxPool2d", (3,), {"stride": 1, "dilation": 2}),
     (1, 2, 8, 8)),
    ("maxpool3d", ["max_pool3d"], ("MaxPool3d", (2,), {}), (1, 2, 4, 6, 4)),
    ("avgpool1d", ["avg_pool1d"], ("AvgPool1d", (3, 2), {"padding": 1}), (2, 3, 10)),
    ("avgpool2d", ["avg_pool2d"],
     ("AvgPool2d", (3, 2), {"padding": 1, "count_include_pad": False}), (2, 3, 7, 8)),
    ("avgpool2d_ceil", ["avg_pool2d"], ("AvgPool2d", (2,), {"ceil_mode": True}), (1, 2, 5, 7)),
    ("avgpool3d", ["avg_pool3d"], ("AvgPool3d", (2,), {}), (1, 2, 4, 4, 6)),
    ("adaptive_avgpool2d", ["adaptive_avg_pool2d"], ("AdaptiveAvgPool2d", ((3, 2),), {}),
     (2, 3, 7, 5)),
    ("adaptive_avgpool2d_int", ["adaptive_avg_pool2d"], ("AdaptiveAvgPool2d", (4,), {}),
     (1, 2, 9, 9)),
    ("adaptive_avgpool2d_none", ["adaptive_avg_pool2d"],
     ("AdaptiveAvgPool2d", ((None, 3),), {}), (1, 2, 5, 7)),
    ("batchnorm1d_eval", ["batch_norm"], ("BatchNorm1d", (5,), {}), (8, 5)),
    ("batchnorm1d_3d_eval", ["batch_norm"], ("BatchNorm1d", (5,), {"eps": 1e-3}), (4, 5, 6)),
    ("batchnorm2d_eval", ["batch_norm"], ("BatchNorm2d", (3,), {}), (4, 3, 5, 5)),
    ("batchnorm2d_untracked", ["batch_norm"],
     ("BatchNorm2d", (3,), {"track_running_stats": False}), (4, 3, 5, 5)),
    ("layernorm", ["layer_norm"], ("LayerNorm", (6,), {}), (3, 4, 6)),
    ("layernorm_2d", ["layer_norm"], ("LayerNorm", ((4, 6),), {"eps": 1e-3}), (3, 4, 6)),
    ("layernorm_noaffine", ["layer_norm"], ("LayerNorm", (6,), {"elementwise_affine": False}),
     (5, 6)),
    ("groupnorm", ["group_norm"], ("GroupNorm", (2, 6), {}), (3, 6, 4, 5)),
    ("groupnorm_noaffine", ["group_norm"], ("GroupNorm", (3, 6), {"affine": False}), (2, 6, 7)),
    ("relu", [], ("ReLU", (), {}), (4, 9)),
    ("gelu", [], ("GELU", (), {}), (4, 9)),
    ("gelu_tanh", [], ("GELU", (), {"approximate": "tanh"}), (4, 9)),
    ("silu", [], ("SiLU", (), {}), (4, 9)),
    ("sigmoid", [], ("Sigmoid", (), {}), (4, 9)),
    ("tanh", [], ("Tanh", (), {}), (4, 9)),
    ("softmax", [], ("Softmax", (), {"dim": 1}), (3, 4, 5)),
    ("logsoftmax", [], ("LogSoftmax", (), {"dim": -1}), (3, 4, 5)),
    ("flatten", [], ("Flatten", (), {}), (2, 3, 4, 5)),
    ("flatten_0_1", [], ("Flatten", (0, 1), {}), (2, 3, 4)),
    ("identity", [], ("Identity", (3,), {"unused": 1}), (2, 3)),
    ("dropout_eval", [], ("Dropout", (0.3,), {}), (4, 5)),
    ("embedding", ["embedding"], ("Embedding", (10, 4), {}), ("int", 10, (3, 5))),
    ("embedding_padding", ["embedding"], ("Embedding", (10, 4), {"padding_idx": -2}),
     ("int", 10, (6,))),
]


@needs_torch
@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("case", LAYERS, ids=[c[0] for c in LAYERS])
def test_layer_forward_matches_torch(device, case):
    name, ops, spec, in_shape = case
    need_ops(*ops)
    torch.manual_seed(0)
    tm = build(torch.nn, spec)
    randomize_torch(tm)
    tm.eval()
    ours = copy_from_torch(build(nn, spec), tm).to(device).eval()
    if in_shape[0] == "int":
        x = np.random.randint(0, in_shape[1], size=in_shape[2]).astype(np.int64)
    else:
        x = np.random.uniform(-2, 2, size=in_shape).astype(np.float32)
    with torch.no_grad():
        want = tm(torch.from_numpy(x)).numpy()
    got = ours(pf.tensor(x, device=device))
    assert_close(got, want, "float32", rtol=1e-4, atol=1e-5, device=device)


@needs_torch
@pytest.mark.parametrize("case", LAYERS, ids=[c[0] for c in LAYERS])
def test_layer_bookkeeping_matches_torch(case):
    """Same parameter and buffer names, order and shapes, same state_dict keys,
    same repr as the torch module of the same configuration (no op needed)."""
    _, _, spec, _ = case
    tm, ours = build(torch.nn, spec), build(nn, spec)
    assert shapes(ours.named_parameters()) == shapes(tm.named_parameters())
    assert shapes(ours.named_buffers()) == shapes(tm.named_buffers())
    assert list(ours.state_dict()) == list(tm.state_dict())
    assert sum(p.size for p in ours.parameters()) == sum(p.numel() for p in tm.parameters())
    assert repr(ours) == repr(tm)
    for name, p in ours.named_parameters():
        assert isinstance(p, pf.Tensor)
        assert str(p.dtype) == "float32"


MORE_CONFIGS = [
    ("Conv1d", (6, 4, 5), {"groups": 2, "bias": False, "padding": 2}),
    ("Conv3d", (4, 8, (1, 2, 3)), {"groups": 4, "dilation": 2}),
    ("ConvTranspose2d", (6, 4, (2, 3)), {"groups": 2, "output_padding": (0, 1),
                                         "stride": (1, 2)}),
    ("ConvTranspose1d", (4, 2, 3), {}),
    ("ConvTranspose3d", (2, 2, 3), {"bias": False}),
    ("BatchNorm1d", (7,), {"affine": False, "momentum": None}),
    ("BatchNorm3d", (2,), {"track_running_stats": False}),
    ("Embedding", (7, 3), {"padding_idx": 6}),
    ("CrossEntropyLoss", (), {"label_smoothing": 0.1, "ignore_index": 2}),
    ("NLLLoss", (), {"reduction": "sum"}),
    ("BCELoss", (), {}),
    ("MSELoss", (), {"reduction": "none"}),
    ("AvgPool1d", (4,), {"stride": 2}),
]


@needs_torch
@pytest.mark.parametrize("spec", MORE_CONFIGS, ids=[s[0] for s in MORE_CONFIGS])
def test_more_configs_bookkeeping(spec):
    tm, ours = build(torch.nn, spec), build(nn, spec)
    assert shapes(ours.named_parameters()) == shapes(tm.named_parameters())
    assert shapes(ours.named_buffers()) == shapes(tm.named_buffers())
    assert list(ours.state_dict()) == list(tm.state_dict())
    assert repr(ours) == repr(tm)


def _make_net(lib, ones):
    class Net(lib.Module):
        def __init__(self):
            super().__init__()
            self.features = lib.Sequential(lib.Conv2d(3, 8, 3), lib.BatchNorm2d(8), lib.ReLU(),
                                           lib.MaxPool2d(2))
            self.gn = lib.GroupNorm(2, 8)
            self.head = lib.Sequential(OrderedDict([
                ("flat", lib.Flatten()), ("fc1", lib.Linear(8 * 3 * 3, 16)),
                ("act", lib.GELU(approximate="tanh")), ("drop", lib.Dropout(0.1)),
                ("fc2", lib.Linear(16, 4))]))
            self.norm = lib.LayerNorm(16)
            self.emb = lib.Embedding(10, 16, padding_idx=1)
            self.register_buffer("scale", ones(4))
            self.register_buffer("scratch", ones(2), persistent=False)
            self.loss = lib.CrossEntropyLoss(weight=ones(4))

        def forward(self, x):
            return self.head(self.gn(self.features(x)) * self.scale[0])
    return Net()


@needs_torch
def test_nested_module_bookkeeping_matches_torch():
    tnet, net = _make_net(torch.nn, torch.ones), _make_net(nn, pf.ones)
    assert shapes(net.named_parameters()) == shapes(tnet.named_parameters())
    assert shapes(net.named_buffers()) == shapes(tnet.named_buffers())
    assert list(net.state_dict()) == list(tnet.state_dict())
    assert "scratch" not in net.state_dict() and "loss.weight" in net.state_dict()
    assert [n for n, _ in net.named_modules()] == [n for n, _ in tnet.named_modules()]
    assert [n for n, _ in net.named_children()] == [n for n, _ in tnet.named_children()]
    assert [type(m).__name__ for m in net.children()] == \
        [type(m).__name__ for m in tnet.children()]
    assert [type(m).__name__ for m in net.modules()] == [type(m).__name__ for m in tnet.modules()]
    assert len(list(net.parameters())) == len(list(tnet.parameters()))
    assert sum(p.size for p in net.parameters()) == sum(p.numel() for p in tnet.parameters())
    assert [n for n, _ in net.named_parameters(recurse=False)] == []
    assert [n for n, _ in net.head.named_parameters(prefix="head")] == \
        [n for n, _ in tnet.head.named_parameters(prefix="head")]
    assert repr(net) == repr(tnet)
    assert net.get_submodule("head.fc1") is net.head.fc1
    assert net.get_parameter("head.fc1.weight").requires_grad is True
    assert net.get_buffer("features.1.running_mean") is net.features[1].running_mean


@needs_torch
def test_cnn_end_to_end(device):
    need_ops("conv2d", "batch_norm", "max_pool2d", "group_norm")
    torch.manual_seed(0)
    tnet = _make_net(torch.nn, torch.ones)
    randomize_torch(tnet)
    net = copy_from_torch(_make_net(nn, pf.ones), tnet).to(device)
    x = np.random.randn(2, 3, 8, 8).astype(np.float32)
    tnet.eval()
    net.eval()
    with torch.no_grad():
        want = tnet(torch.from_numpy(x)).numpy()
    assert_close(net(pf.tensor(x, device=device)), want, "float32", rtol=1e-4, atol=1e-5,
                 device=device)
    # training mode without dropout: batch statistics, running stats updated
    tnet.train()
    net.train()
    tnet.head.drop.p = net.head.drop.p = 0.0
    with torch.no_grad():
        want = tnet(torch.from_numpy(x)).numpy()
    assert_close(net(pf.tensor(x, device=device)), want, "float32", rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(net.features[1].running_var.numpy(),
                               tnet.features[1].running_var.numpy(), rtol=1e-5, atol=1e-6)


def test_shared_parameters_counted_once():
    lin = nn.Linear(3, 3)
    seq = nn.Sequential(lin, nn.ReLU(), lin)
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias"]
    assert len(list(seq.modules())) == 3
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]


# ------------------------------------------------------------- Parameter

def test_parameter_attribute_is_a_tensor(device):
    lin = nn.Linear(4, 3, device=device)
    assert isinstance(lin.weight, pf.Tensor) and isinstance(lin.bias, pf.Tensor)
    assert on_device(lin.weight, device)
    rec = lin._parameters["weight"]
    assert isinstance(rec, nn.Parameter) and rec.data is lin.weight and rec.requires_grad
    x = pf.randn(2, 4, device=device)
    np.testing.assert_allclose(pf.matmul(x, lin.weight.T).numpy(),
                               x.numpy() @ lin.weight.numpy().T, rtol=1e-5, atol=1e-6)
    # parameters() yields the very objects the attributes return
    ps = list(lin.parameters())
    assert ps[0] is lin.weight and ps[1] is lin.bias
    lin.requires_grad_(False)
    assert not lin.get_parameter("weight").requires_grad
    assert not lin.get_parameter("bias").requires_grad


def test_parameter_wrapper_forwards():
    t = pf.randn(3, 2)
    p = nn.Parameter(t)
    assert p.data is t and p.requires_grad
    assert p.shape == (3, 2) and p.ndim == 2 and str(p.dtype) == "float32"
    np.testing.assert_array_equal(p.numpy(), t.numpy())
    np.testing.assert_allclose((p * 2).numpy(), t.numpy() * 2)
    np.testing.assert_allclose((1 + p).numpy(), t.numpy() + 1)
    np.testing.assert_allclose(p.sum().item(), t.numpy().sum(), rtol=1e-5)
    assert "Parameter containing" in repr(p)
    assert nn.Parameter(p).data is t  # re-wrapping keeps the tensor
    assert not nn.Parameter(t, requires_grad=False).requires_grad
    # Module-level ops need the tensor itself; the error points there.
    with pytest.raises((ValueError, TypeError), match="Parameter"):
        pf.add(t, p)
    with pytest.raises(TypeError, match="param.data"):
        np.asarray(p)


def test_registration_rules():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(pf.ones(2))
            self.sub = nn.Linear(2, 2)
            self.register_buffer("buf", pf.zeros(2))
            self.register_buffer("tmp", pf.zeros(1), persistent=False)
            self.plain = 5

        def forward(self, x):
            return x * self.w

    m = M()
    assert [n for n, _ in m.named_parameters()] == ["w", "sub.weight", "sub.bias"]
    assert [n for n, _ in m.named_buffers()] == ["buf", "tmp"]
    assert list(m.state_dict()) == ["w", "buf", "sub.weight", "sub.bias"]
    assert m.plain == 5 and "plain" not in m._parameters
    np.testing.assert_array_equal(m(pf.full((2,), 3.0)).numpy(), [3.0, 3.0])
    with pytest.raises(TypeError, match="nn.Parameter or None"):
        m.w = pf.zeros(2)  # a plain tensor cannot replace a parameter (as in torch)
    m.buf = pf.ones(2)  # a tensor can replace a buffer
    np.testing.assert_array_equal(m.buf.numpy(), [1.0, 1.0])
    with pytest.raises(TypeError, match="buffer"):
        m.buf = 3
    with pytest.raises(TypeError):
        m.sub = 3
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("plain", pf.zeros(1))
    with pytest.raises(KeyError, match="contain"):
        m.register_parameter("a.b", nn.Parameter(pf.zeros(1)))
    m.sub.bias = None  # optional parameter slots accept None
    assert m.sub.bias is None
    assert [n for n, _ in m.named_parameters()] == ["w", "sub.weight"]
    del m.w
    assert [n for n, _ in m.named_parameters()] == ["sub.weight"]
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        m.nope
    assert "sub" in dir(m) and "buf" in dir(m)

    class NoInit(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(pf.zeros(1))

    with pytest.raises(AttributeError, match="super"):
        NoInit()
    with pytest.raises(NotImplementedError, match="forward"):
        nn.Module()(1)


# ------------------------------------------------------------- containers

def test_sequential_indexing():
    layers = [nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 4), nn.Tanh()]
    seq = nn.Sequential(*layers)
    assert len(seq) == 4
    assert list(seq) == layers
    assert seq[0] is layers[0] and seq[-1] is layers[3] and seq[-4] is layers[0]
    sl = seq[1:3]
    assert isinstance(sl, nn.Sequential) and list(sl) == layers[1:3]
    assert [n for n, _ in sl.named_children()] == ["1", "2"]  # torch keeps the keys
    for bad in (4, -5):
        with pytest.raises(IndexError):
            seq[bad]
    with pytest.raises(TypeError):
        seq["0"]
    seq[1] = nn.SiLU()
    assert isinstance(seq[1], nn.SiLU)
    del seq[0]
    assert len(seq) == 3 and [n for n, _ in seq.named_children()] == ["0", "1", "2"]
    seq.append(nn.Identity())
    assert len(seq) == 4 and isinstance(seq[3], nn.Identity)
    seq.insert(0, nn.Flatten())
    assert isinstance(seq[0], nn.Flatten) and len(seq) == 5
    named = nn.Sequential(OrderedDict([("a", nn.ReLU()), ("b", nn.Tanh())]))
    assert [n for n, _ in named.named_children()] == ["a", "b"] and named.a is named[0]
    x = pf.tensor([[-1.0, 2.0]])
    np.testing.assert_allclose(named(x).numpy(), np.tanh([[0.0, 2.0]]), rtol=1e-6)


def test_module_list_and_dict():
    ml = nn.ModuleList([nn.Linear(2, 2), nn.ReLU()])
    ml.append(nn.Tanh())
    assert len(ml) == 3 and isinstance(ml[-1], nn.Tanh)
    assert [n for n, _ in ml.named_parameters()] == ["0.weight", "0.bias"]
    md = nn.ModuleDict({"enc": nn.Linear(2, 3), "act": nn.ReLU()})
    assert list(md.keys()) == ["enc", "act"] and "enc" in md
    assert [n for n, _ in md.named_parameters()] == ["enc.weight", "enc.bias"]


# -------------------------------------------------------------- train/eval

def test_train_eval_propagates():
    net = _make_net(nn, pf.ones)
    assert net.training and all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    assert net.train() is net and all(m.training for m in net.modules())
    net.head.train(False)
    assert net.training and not net.head.training and not net.head.fc1.training
    assert net.features[1].training
    with pytest.raises(ValueError, match="boolean"):
        net.train("yes")


def test_dropout_eval_and_p0_are_identity(device):
    x = pf.randn(4, 5, device=device)
    assert nn.Dropout(0.5).eval()(x) is x
    assert nn.Dropout(0.0)(x) is x
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="between 0 and 1"):
            nn.Dropout(bad)


def test_dropout_training(device):
    need_ops("dropout")
    x = pf.ones(64, 64, device=device)
    drop = nn.Dropout(0.25)
    pf.manual_seed(3)
    y = drop(x).numpy()
    assert set(np.unique(y)).issubset({0.0, np.float32(1 / 0.75)})
    assert abs((y == 0).mean() - 0.25) < 0.03
    pf.manual_seed(3)
    np.testing.assert_array_equal(drop(x).numpy(), y)  # seeded
    drop.eval()
    np.testing.assert_array_equal(drop(x).numpy(), x.numpy())


# ------------------------------------------------------------ devices, dtypes

def test_to_device_moves_params_and_buffers(device):
    pf.set_device("cpu")  # build on the CPU, then move
    net = _make_net(nn, pf.ones)
    assert all(t.device == "cpu" for t in net.state_dict().values())
    w = net.head.fc1.weight
    before = w.numpy()
    assert net.to(device) is net
    for _, t in list(net.named_parameters()) + list(net.named_buffers()):
        assert on_device(t, device), t.device
    assert net.head.fc1.weight is w  # the same tensor object, rebound
    np.testing.assert_array_equal(w.numpy(), before)
    assert list(net.parameters())[0] is net.features[0].weight
    x = pf.randn(3, 72, device=device)
    assert on_device(net.head.fc1(x), device)
    net.cpu()
    assert all(t.device == "cpu" for t in net.parameters())


def test_device_constructor_argument(device):
    for m in (nn.Linear(3, 2, device=device), nn.Conv2d(2, 2, 3, device=device),
              nn.BatchNorm1d(3, device=device), nn.LayerNorm(4, device=device),
              nn.GroupNorm(1, 2, device=device), nn.RMSNorm(3, device=device),
              nn.Embedding(5, 2, padding_idx=0, device=device),
              nn.ConvTranspose2d(2, 2, 2, device=device)):
        for _, t in list(m.named_parameters()) + list(m.named_buffers()):
            assert on_device(t, device), (type(m).__name__, t.device)
    assert on_device(nn.Linear(2, 2).weight, device)  # None: pf's default device


def test_to_dtype():
    bn = nn.BatchNorm1d(3)
    bn.to(pf.float16)
    assert str(bn.weight.dtype) == "float16" and str(bn.running_var.dtype) == "float16"
    assert str(bn.num_batches_tracked.dtype) == "int64"  # integer buffers keep their dtype
    bn.float()
    assert str(bn.weight.dtype) == "float32"
    lin = nn.Linear(2, 2, dtype=pf.bfloat16)
    assert str(lin.weight.dtype) == "bfloat16" and str(lin.bias.dtype) == "bfloat16"
    lin.to(dtype="float32", device="cpu")
    assert str(lin.weight.dtype) == "float32"
    with pytest.raises(TypeError, match="floating point"):
        lin.to(pf.int32)
    with pytest.raises(TypeError, match="device string"):
        lin.to(5)
    with pytest.raises(RuntimeError, match="cerebras"):
        lin.to("cerebras")
    assert all(t.device == "cpu" for t in lin.parameters())


# ------------------------------------------------------------ state dicts

def _mlp():
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))


def test_state_dict_round_trip(device):
    pf.manual_seed(1)
    a = _mlp().to(device)
    pf.manual_seed(2)
    b = _mlp().to(device)
    w_obj = b[0].weight
    assert not np.allclose(a[0].weight.numpy(), b[0].weight.numpy())
    sd = a.state_dict()
    assert list(sd) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert sd["0.weight"] is a[0].weight  # live tensors, as torch's share storage
    res = b.load_state_dict(sd)
    assert res.missing_keys == [] and res.unexpected_keys == []
    assert repr(res) == "<All keys matched successfully>"
    assert b[0].weight is w_obj  # loaded in place
    for k, v in b.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), sd[k].numpy())
        assert on_device(v, device)
    x = pf.randn(5, 6, device=device)
    np.testing.assert_array_equal(b(x).numpy(), a(x).numpy())
    # Later changes to a do not reach b.
    init.zeros_(a[0].weight)
    assert np.abs(b[0].weight.numpy()).max() > 0


def test_load_state_dict_from_numpy_and_other_device(device):
    bn = nn.BatchNorm1d(4).to(device)
    sd = {"weight": np.arange(4, dtype=np.float64), "bias": [1.0, 2.0, 3.0, 4.0],
          "running_mean": pf.full((4,), 0.5, device="cpu"),
          "running_var": np.full(4, 2.0, np.float32), "num_batches_tracked": np.array(7)}
    bn.load_state_dict(sd)
    assert all(on_device(t, device) for t in bn.state_dict().values())
    assert str(bn.weight.dtype) == "float32" and str(bn.num_batches_tracked.dtype) == "int64"
    np.testing.assert_array_equal(bn.weight.numpy(), [0, 1, 2, 3])
    np.testing.assert_array_equal(bn.running_mean.numpy(), [0.5] * 4)
    assert bn.num_batches_tracked.item() == 7
    half = nn.Linear(2, 2, dtype=pf.float16)
    half.load_state_dict({"weight": np.ones((2, 2), np.float32), "bias": np.zeros(2)})
    assert str(half.weight.dtype) == "float16"


def test_load_state_dict_errors():
    m = _mlp()
    good = m.state_dict()
    snapshot = {k: v.numpy() for k, v in good.items()}

    missing = {k: v for k, v in good.items() if k != "2.bias"}
    with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "2.bias"') as e:
        m.load_state_dict(missing)
    assert isinstance(e.value, ValueError) and isinstance(e.value, nn.StateDictError)
    assert "Sequential" in str(e.value)

    extra = dict(good, **{"3.weight": pf.zeros(1), "foo": pf.zeros(1)})
    with pytest.raises(RuntimeError, match=r'Unexpected key\(s\) in state_dict: "3.weight", "foo"'):
        m.load_state_dict(extra)

    wrong = dict(good, **{"0.weight": pf.zeros(6, 8)})
    with pytest.raises(RuntimeError, match=r"size mismatch for 0.weight: copying a param with "
                                           r"shape \(6, 8\) from checkpoint, the shape in "
                                           r"current model is \(8, 6\)"):
        m.load_state_dict(wrong)
    # Size mismatches are errors even when not strict (as in torch).
    with pytest.raises(RuntimeError, match="size mismatch"):
        m.load_state_dict(wrong, strict=False)

    # All problems at once, in one message.
    bad = {k: v for k, v in good.items() if k != "0.bias"}
    bad["2.weight"] = pf.zeros(2)
    bad["bogus"] = pf.zeros(2)
    with pytest.raises(RuntimeError) as e:
        m.load_state_dict(bad)
    msg = str(e.value)
    assert '"0.bias"' in msg and '"bogus"' in msg and "size mismatch for 2.weight" in msg

    with pytest.raises(RuntimeError, match="0.weight"):
        m.load_state_dict(dict(good, **{"0.weight": "not an array"}))
    with pytest.raises(TypeError, match="dict-like"):
        m.load_state_dict([1, 2])

    # A failed load changes nothing.
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), snapshot[k])

    # Non-strict: the matching keys load, the rest are reported.
    partial = {"0.weight": pf.zeros(8, 6), "other": pf.zeros(1)}
    res = m.load_state_dict(partial, strict=False)
    assert res.missing_keys == ["0.bias", "2.weight", "2.bias"]
    assert res.unexpected_keys == ["other"]
    np.testing.assert_array_equal(m[0].weight.numpy(), np.zeros((8, 6)))


@needs_torch
def test_load_torch_state_dict_and_back():
    torch.manual_seed(0)
    tnet = _make_net(torch.nn, torch.ones)
    randomize_torch(tnet)
    net = _make_net(nn, pf.ones)
    copy_from_torch(net, tnet)
    for k, v in net.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), tnet.state_dict()[k].numpy())
    # and back into torch
    tnet2 = _make_net(torch.nn, torch.ones)
    tnet2.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in net.state_dict().items()})
    for k, v in tnet2.state_dict().items():
        assert torch.equal(v, tnet.state_dict()[k])


# ---------------------------------------------------------- initialization

def _check_uniform(t, bound):
    w = t.numpy().astype(np.float64).ravel()
    assert np.all(np.abs(w) <= bound * (1 + 1e-6)), (np.abs(w).max(), bound)
    n = w.size
    if n >= 1000:
        assert np.abs(w).max() > 0.99 * bound
    std = bound / math.sqrt(3)
    # 5-sigma bands: the sample mean's sd is std/sqrt(n), the sample sd's
    # about std*sqrt(0.2/n) for a uniform distribution
    assert abs(w.mean()) < 5 * std / math.sqrt(n)
    assert abs(w.std() - std) < 5 * std * math.sqrt(0.2 / n)


def test_linear_conv_init_bounds(device):
    lin = nn.Linear(400, 300, device=device)
    _check_uniform(lin.weight, 1 / math.sqrt(400))
    _check_uniform(lin.bias, 1 / math.sqrt(400))
    conv = nn.Conv2d(6, 64, 3, groups=2, device=device)  # fan_in = 3 * 9
    _check_uniform(conv.weight, 1 / math.sqrt(27))
    _check_uniform(conv.bias, 1 / math.sqrt(27))
    convt = nn.ConvTranspose2d(64, 8, 3, groups=2, device=device)  # fan_in = (8/2) * 9
    assert convt.weight.shape == (64, 4, 3, 3)
    _check_uniform(convt.weight, 1 / math.sqrt(36))
    c1 = nn.Conv1d(5, 300, 4, device=device)
    _check_uniform(c1.weight, 1 / math.sqrt(20))


def test_embedding_and_norm_init(device):
    emb = nn.Embedding(500, 64, padding_idx=3, device=device)
    w = emb.weight.numpy().astype(np.float64)
    np.testing.assert_array_equal(w[3], 0.0)
    rest = np.delete(w, 3, axis=0)
    assert abs(rest.mean()) < 0.03 and abs(rest.std() - 1) < 0.02  # > 5 sigma
    assert nn.Embedding(4, 2, padding_idx=-1).padding_idx == 3
    with pytest.raises(ValueError, match="padding_idx"):
        nn.Embedding(4, 2, padding_idx=4)
    for m in (nn.BatchNorm2d(5, device=device), nn.LayerNorm((2, 3), device=device),
              nn.GroupNorm(1, 5, device=device), nn.RMSNorm(5, device=device)):
        np.testing.assert_array_equal(m.weight.numpy(), np.ones(m.weight.shape))
        if "bias" in m._parameters:
            np.testing.assert_array_equal(m.bias.numpy(), np.zeros(m.bias.shape))
    bn = nn.BatchNorm1d(3, device=device)
    np.testing.assert_array_equal(bn.running_mean.numpy(), np.zeros(3))
    np.testing.assert_array_equal(bn.running_var.numpy(), np.ones(3))
    assert bn.num_batches_tracked.shape == () and bn.num_batches_tracked.item() == 0
    assert str(bn.num_batches_tracked.dtype) == "int64"


def test_same_seed_same_init_on_every_device(device):
    def make(dev):
        pf.manual_seed(1234)
        return nn.Sequential(nn.Linear(30, 20, device=dev), nn.Conv1d(2, 3, 3, device=dev),
                             nn.Embedding(7, 5, padding_idx=0, device=dev))
    a, b = make("cpu"), make(device)
    for (k, va), (_, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        # (a GPU's sin/cos/log may differ from the CPU's in the last bits)
        np.testing.assert_allclose(vb.numpy(), va.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    pf.manual_seed(99)
    c = nn.Linear(30, 20)
    assert not np.array_equal(c.weight.numpy(), a[0].weight.numpy())


def test_init_functions(device):
    t = pf.zeros(200, 300, device=device)
    assert init.uniform_(t, -2.0, 3.0) is t
    v = t.numpy()
    assert v.min() >= -2 and v.max() <= 3 and abs(v.mean() - 0.5) < 0.05 and on_device(t, device)
    init.normal_(t, 1.0, 2.0)
    v = t.numpy()
    assert abs(v.mean() - 1) < 0.045 and abs(v.std() - 2) < 0.03  # > 5 sigma
    init.zeros_(t)
    assert not t.numpy().any()
    init.ones_(t)
    assert (t.numpy() == 1).all()
    init.constant_(t, 0.25)
    assert (t.numpy() == 0.25).all()

    fan_in, fan_out = 300, 200
    init.kaiming_uniform_(t, mode="fan_out", nonlinearity="relu")
    _check_uniform(t, math.sqrt(2) * math.sqrt(3 / fan_out))
    init.kaiming_uniform_(t, a=math.sqrt(5))
    _check_uniform(t, 1 / math.sqrt(fan_in))
    init.xavier_uniform_(t, gain=2.0)
    _check_uniform(t, 2 * math.sqrt(6 / (fan_in + fan_out)))
    init.kaiming_normal_(t, nonlinearity="relu")
    assert abs(t.numpy().std() - math.sqrt(2 / fan_in)) < 0.02 * math.sqrt(2 / fan_in)
    init.xavier_normal_(t)
    assert abs(t.numpy().std() - math.sqrt(2 / 500)) < 0.02 * math.sqrt(2 / 500)

    h = pf.zeros(4, 5, dtype=pf.float16, device=device)
    init.uniform_(h, -1, 1)
    assert str(h.dtype) == "float16" and on_device(h, device) and h.numpy().any()
    p = nn.Parameter(pf.zeros(3, 4, device=device))
    assert init.ones_(p) is p and (p.data.numpy() == 1).all()
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(pf.zeros(5))
    with pytest.raises(ValueError, match="Mode"):
        init.kaiming_uniform_(t, mode="fan_avg")
    with pytest.raises(TypeError):
        init.zeros_(np.zeros(3))


@needs_torch
def test_gain_and_fans_match_torch():
    for nl, param in [("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None),
                      ("relu", None), ("leaky_relu", None), ("leaky_relu", 0.2),
                      ("leaky_relu", math.sqrt(5)), ("selu", None)]:
        assert init.calculate_gain(nl, param) == pytest.approx(
            torch.nn.init.calculate_gain(nl, param))
    for shape in [(3, 4), (8, 2, 3, 3), (5, 6, 2), (2, 3, 1, 2, 3)]:
        assert init.calculate_fan_in_and_fan_out(shape) == \
            torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))
    with pytest.raises(ValueError):
        init.calculate_gain("swish")


# ------------------------------------------------------ layer constructors

@needs_torch
@pytest.mark.parametrize("spec", [
    ("Conv2d", (3, 4, 3), {"groups": 2}),
    ("Conv2d", (4, 3, 3), {"groups": 2}),
    ("Conv2d", (4, 4, 3), {"groups": 0}),
    ("Conv2d", (4, 4, 3), {"padding": "full"}),
    ("Conv2d", (4, 4, 3), {"padding": "same", "stride": 2}),
    ("Conv1d", (4, 4, 3), {"padding_mode": "mirror"}),
    ("ConvTranspose2d", (4, 4, 3), {"padding_mode": "reflect"}),
    ("GroupNorm", (4, 6), {}),
    ("Dropout", (1.5,), {}),
], ids=lambda s: f"{s[0]}-{sorted(s[2])}")
def test_bad_constructor_args_raise_like_torch(spec):
    with pytest.raises(ValueError):
        build(torch.nn, spec)
    with pytest.raises(ValueError, match=spec[0]):
        build(nn, spec)


def test_conv_argument_checks():
    # (torch accepts these at construction and fails later, or never)
    with pytest.raises(ValueError, match=r"Conv2d\] kernel_size must be a positive int or a "
                                         r"tuple of 2"):
        nn.Conv2d(4, 4, (3, 3, 3))
    with pytest.raises(ValueError, match="kernel_size"):
        nn.Conv1d(4, 4, 0)
    with pytest.raises(ValueError, match="padding"):
        nn.Conv2d(4, 4, 3, padding=-1)
    with pytest.raises(ValueError, match="output_padding"):
        nn.ConvTranspose2d(4, 4, 3, stride=2, output_padding=2)


def test_input_rank_checks():
    with pytest.raises(ValueError, match=r"BatchNorm2d\] expected 4D input \(got 2D"):
        nn.BatchNorm2d(3)(pf.zeros(2, 3))
    with pytest.raises(ValueError, match=r"BatchNorm1d\] expected 2D or 3D"):
        nn.BatchNorm1d(3)(pf.zeros(2, 3, 4, 5))
    with pytest.raises(ValueError, match="Conv2d"):
        nn.Conv2d(3, 4, 3)(pf.zeros(3, 5))
    with pytest.raises(ValueError, match="linear"):
        nn.Linear(4, 2)(pf.zeros(3, 5))
    with pytest.raises(ValueError, match="reduction"):
        nn.MSELoss(reduction="avg")
    with pytest.raises(ValueError, match="RMSNorm"):
        nn.RMSNorm((2, 3))(pf.zeros(3, 2))


@needs_torch
def test_conv_transpose_output_size(device):
    need_ops("conv_transpose2d")
    torch.manual_seed(0)
    tm = torch.nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1)
    ours = copy_from_torch(nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1), tm).to(device)
    x = np.random.randn(1, 3, 4, 5).astype(np.float32)
    for size in [(7, 9), (8, 10), (1, 2, 8, 9)]:
        with torch.no_grad():
            want = tm(torch.from_numpy(x), output_size=size).numpy()
        got = ours(pf.tensor(x, device=device), output_size=size)
        assert_close(got, want, "float32", rtol=1e-4, atol=1e-5, device=device)
    with pytest.raises(ValueError, match="valid sizes range from 7 to 8"):
        ours(pf.tensor(x, device=device), output_size=(9, 9))


def test_embedding_from_pretrained(device):
    need_ops("embedding")
    w = pf.tensor(np.arange(12, dtype=np.float32).reshape(4, 3), device=device)
    emb = nn.Embedding.from_pretrained(w)
    assert emb.weight is w and not emb.get_parameter("weight").requires_grad
    assert (emb.num_embeddings, emb.embedding_dim) == (4, 3)
    out = emb(pf.tensor(np.array([[3, 0], [1, 1]], np.int64), device=device))
    assert_close(out, np.arange(12, dtype=np.float32).reshape(4, 3)[[[3, 0], [1, 1]]],
                 "float32", device=device)


def test_activation_classes():
    assert not isinstance(nn.LogSoftmax(1), nn.Softmax)
    assert repr(nn.LogSoftmax(dim=1)) == "LogSoftmax(dim=1)"
    assert repr(nn.ReLU(inplace=True)) == "ReLU(inplace=True)"
    with pytest.raises(ValueError, match="approximate"):
        nn.GELU("fast")


# ------------------------------------------------------------- functional

def test_functional_namespace():
    for name in F._FORWARDED:
        if hasattr(pf, name):
            assert getattr(F, name) is getattr(pf, name)
        else:
            assert not hasattr(F, name)
            with pytest.raises(AttributeError, match=f"pf.{name} is not available"):
                getattr(F, name)
    if hasattr(pf, "bce_loss"):
        assert F.binary_cross_entropy is pf.bce_loss
    assert F.relu is pf.relu
    with pytest.raises(AttributeError):
        F.no_such_op


def test_functional_linear_softmax(device):
    x = np.random.randn(2, 3, 5).astype(np.float32)
    w = np.random.randn(4, 5).astype(np.float32)
    b = np.random.randn(4).astype(np.float32)
    tx, tw, tb = (pf.tensor(a, device=device) for a in (x, w, b))
    assert_close(F.linear(tx, tw, tb), x @ w.T + b, "float32", rtol=1e-5, atol=1e-5,
                 device=device)
    assert_close(F.linear(tx, tw), x @ w.T, "float32", rtol=1e-5, atol=1e-5)
    assert_close(F.linear(tx, nn.Parameter(tw), nn.Parameter(tb)), x @ w.T + b, "float32",
                 rtol=1e-5, atol=1e-5)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    assert_close(F.softmax(tx, dim=1), e / e.sum(axis=1, keepdims=True), "float32",
                 rtol=1e-5, atol=1e-6)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        out = F.log_softmax(tx)  # implicit dim: 0 for 3-D input, as torch chooses
    assert any("Implicit dimension" in str(r.message) for r in rec)
    e0 = x - x.max(axis=0, keepdims=True)
    assert_close(out, e0 - np.log(np.exp(e0).sum(axis=0, keepdims=True)), "float32",
                 rtol=1e-5, atol=1e-5)
    assert F.flatten(tx, 1).shape == (2, 15)


def test_functional_linear_checks_dtypes_and_gradients(device):
    x = np.random.randn(3, 5).astype(np.float32)
    w = np.random.randn(4, 5).astype(np.float32)
    tx = pf.tensor(x, device=device)
    with pytest.raises(ValueError, match=r"\[linear\] input of shape \(3, ?5\) does not end in in_features=3"):
        F.linear(tx, pf.ones((4, 3), device=device))
    with pytest.raises(ValueError, match=r"\[linear\] weight must be a 2-D tensor"):
        F.linear(tx, pf.ones(5, device=device))
    with pytest.raises(TypeError, match=r"\[linear\] bias must be a pyflame.Tensor"):
        F.linear(tx, pf.tensor(w, device=device), [1.0])
    b64 = np.random.randn(4)  # float64: promotes as x @ w.T + b does
    out = F.linear(tx, pf.tensor(w, device=device), pf.tensor(b64, device=device))
    assert out.dtype == pf.float64
    assert_close(out, x.astype(np.float64) @ w.T.astype(np.float64) + b64, "float64", rtol=1e-6, atol=1e-6)
    tw = pf.tensor(w, device=device, requires_grad=True)
    tb = pf.tensor(np.zeros(4, np.float32), device=device, requires_grad=True)
    F.linear(tx, tw, tb).sum().backward()
    assert_close(tw.grad, np.tile(x.sum(axis=0), (4, 1)), "float32", rtol=1e-5, atol=1e-5)
    assert_close(tb.grad, np.full(4, 3.0, np.float32), "float32")


def test_rmsnorm_matches_reference(device):
    need_ops("rms_norm")
    x = np.random.randn(3, 4, 6).astype(np.float32)
    m = nn.RMSNorm(6, eps=1e-5).to(device)
    w = np.random.uniform(0.5, 1.5, 6).astype(np.float32)
    m.load_state_dict({"weight": w})
    ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-5) * w
    assert_close(m(pf.tensor(x, device=device)), ref, "float32", rtol=1e-5, atol=1e-5)
    m2 = nn.RMSNorm((4, 6)).to(device)
    ref2 = x / np.sqrt((x.astype(np.float64) ** 2).mean((-2, -1), keepdims=True) + 1e-6)
    assert_close(m2(pf.tensor(x, device=device)), ref2, "float32", rtol=1e-5, atol=1e-5)
    assert repr(m) == "RMSNorm((6,), eps=1e-05, elementwise_affine=True)"


# ------------------------------------------------------------ batch norm

@needs_torch
@pytest.mark.parametrize("spec,shape", [
    (("BatchNorm2d", (3,), {}), (4, 3, 5, 5)),
    (("BatchNorm1d", (5,), {"momentum": 0.3}), (8, 5)),
    (("BatchNorm1d", (4,), {"momentum": None, "affine": False}), (6, 4, 3)),
    (("BatchNorm2d", (2,), {"track_running_stats": False}), (3, 2, 4, 4)),
], ids=["bn2d", "bn1d_momentum", "bn1d_cumulative", "bn2d_untracked"])
def test_batchnorm_training_matches_torch(device, spec, shape):
    need_ops("batch_norm")
    torch.manual_seed(0)
    tm = build(torch.nn, spec)
    randomize_torch(tm)
    ours = copy_from_torch(build(nn, spec), tm).to(device)
    for step in range(3):
        x = np.random.randn(*shape).astype(np.float32) * 2 + 0.5
        assert ours.training
        want = tm(torch.from_numpy(x)).detach().numpy()
        got = ours(pf.tensor(x, device=device))
        assert_close(got, want, "float32", rtol=1e-4, atol=1e-5, device=device)
    for k, v in tm.state_dict().items():
        mine = ours.state_dict()[k]
        if k.endswith("num_batches_tracked"):
            assert mine.item() == v.item() == 3
        else:
            np.testing.assert_allclose(mine.numpy(), v.numpy(), rtol=1e-5, atol=1e-6,
                                       err_msg=k)
    # eval mode uses the running statistics (and leaves them alone)
    tm.eval()
    ours.eval()
    x = np.random.randn(*shape).astype(np.float32)
    with torch.no_grad():
        want = tm(torch.from_numpy(x)).numpy()
    before = {k: v.numpy() for k, v in ours.state_dict().items()}
    assert_close(ours(pf.tensor(x, device=device)), want, "float32", rtol=1e-4, atol=1e-5)
    for k, v in ours.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])


# ----------------------------------------------------------------- losses

LOSSES = [
    ("mse", "mse_loss", ("MSELoss", (), {}), "float"),
    ("mse_sum", "mse_loss", ("MSELoss", (), {"reduction": "sum"}), "float"),
    ("mse_none", "mse_loss", ("MSELoss", (), {"reduction": "none"}), "float"),
    ("ce", "cross_entropy", ("CrossEntropyLoss", (), {}), "class"),
    ("ce_options", "cross_entropy",
     ("CrossEntropyLoss", (), {"ignore_index": 1, "label_smoothing": 0.1, "reduction": "sum"}),
     "class"),
    ("ce_weight", "cross_entropy", ("CrossEntropyLoss", (), {"weight": "w"}), "class"),
    ("ce_none_2d", "cross_entropy", ("CrossEntropyLoss", (), {"reduction": "none"}), "class2d"),
    ("nll", "nll_loss", ("NLLLoss", (), {}), "logprob"),
    ("nll_weight_ignore", "nll_loss", ("NLLLoss", (), {"weight": "w", "ignore_index": 0}),
     "logprob"),
    ("bce", "bce_loss", ("BCELoss", (), {}), "prob"),
    ("bce_weight_sum", "bce_loss", ("BCELoss", (), {"weight": "bw", "reduction": "sum"}), "prob"),
]


@needs_torch
@pytest.mark.parametrize("case", LOSSES, ids=[c[0] for c in LOSSES])
def test_loss_modules_match_torch(device, case):
    _, op, (cls, args, kwargs), kind = case
    need_ops(op)
    n, c = 6, 4
    w = np.random.uniform(0.5, 2, c).astype(np.float32)
    bw = np.random.uniform(0.5, 2, (n, c)).astype(np.float32)
    tkw, pkw = dict(kwargs), dict(kwargs)
    for key in ("weight",):
        if kwargs.get(key) in ("w", "bw"):
            arr = w if kwargs[key] == "w" else bw
            tkw[key], pkw[key] = torch.from_numpy(arr), pf.tensor(arr, device=device)
    tm, ours = getattr(torch.nn, cls)(*args, **tkw), getattr(nn, cls)(*args, **pkw)
    if kind == "float":
        x, y = np.random.randn(n, c).astype(np.float32), np.random.randn(n, c).astype(np.float32)
    elif kind in ("class", "logprob"):
        x = np.random.randn(n, c).astype(np.float32)
        if kind == "logprob":
            x = (x - np.log(np.exp(x).sum(1, keepdims=True))).astype(np.float32)
        y = np.random.randint(0, c, n).astype(np.int64)
    elif kind == "class2d":
        x = np.random.randn(n, c, 3).astype(np.float32)
        y = np.random.randint(0, c, (n, 3)).astype(np.int64)
    else:
        x = np.random.uniform(0.05, 0.95, (n, c)).astype(np.float32)
        y = np.random.uniform(0, 1, (n, c)).astype(np.float32)
    want = tm(torch.from_numpy(x), torch.from_numpy(y)).numpy()
    got = ours(pf.tensor(x, device=device), pf.tensor(y, device=device))
    assert_close(got, want, "float32", rtol=1e-5, atol=1e-5, device=device)
    if "weight" in pkw:
        assert "weight" in ours.state_dict()
    assert repr(ours) == repr(tm)


# -------------------------------------------------------------- MLP (spec)

class MLP(nn.Module):
    """The MLP of the spec: 784-256-128-10 with ReLU."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 128)
        self.fc3 = nn.Linear(128, 10)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.fc3(self.act(self.fc2(self.act(self.fc1(x)))))


def _torch_mlp():
    class TorchMLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(784, 256)
            self.fc2 = torch.nn.Linear(256, 128)
            self.fc3 = torch.nn.Linear(128, 10)
            self.act = torch.nn.ReLU()

        def forward(self, x):
            return self.fc3(self.act(self.fc2(self.act(self.fc1(x)))))
    return TorchMLP()


@needs_torch
def test_mlp_end_to_end(device):
    torch.manual_seed(0)
    tm = _torch_mlp()
    model = MLP()
    assert shapes(model.named_parameters()) == shapes(tm.named_parameters())
    assert sum(p.size for p in model.parameters()) == 784 * 256 + 256 + 256 * 128 + 128 + \
        128 * 10 + 10
    copy_from_torch(model, tm).to(device).eval()
    x = np.random.randn(32, 784).astype(np.float32)
    y = np.random.randint(0, 10, 32).astype(np.int64)
    with torch.no_grad():
        want = tm(torch.from_numpy(x))
    logits = model(pf.tensor(x, device=device))
    assert logits.shape == (32, 10)
    assert_close(logits, want.numpy(), "float32", rtol=1e-4, atol=1e-5, device=device)
    probs = pf.softmax(logits, 1).numpy()
    np.testing.assert_allclose(probs.sum(1), 1, rtol=1e-5)
    np.testing.assert_array_equal(probs.argmax(1), want.numpy().argmax(1))
    # The same model as a Sequential has torch's Sequential names.
    seq = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                        nn.Linear(128, 10))
    tseq = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 128), torch.nn.ReLU(),
                               torch.nn.Linear(128, 10))
    assert list(seq.state_dict()) == list(tseq.state_dict())
    assert repr(seq) == repr(tseq)
    if hasattr(pf, "cross_entropy"):
        loss = nn.CrossEntropyLoss()(logits, pf.tensor(y, device=device))
        want_loss = torch.nn.CrossEntropyLoss()(want, torch.from_numpy(y)).item()
        assert loss.shape == ()
        np.testing.assert_allclose(loss.item(), want_loss, rtol=1e-5)


@needs_torch
def test_avg_pool_module_divisor_override(device):
    x = np.random.randn(2, 3, 6, 6).astype(np.float32)
    ours = nn.AvgPool2d(3, stride=2, padding=1, divisor_override=4)(pf.tensor(x, device=device))
    ref = torch.nn.AvgPool2d(3, stride=2, padding=1, divisor_override=4)(torch.from_numpy(x))
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
