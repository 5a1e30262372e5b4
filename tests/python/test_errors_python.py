"""Errors from the pure-Python layer (creation helpers, autograd, optimizers,
schedulers, nn layers, init, amp, checkpointing): a bad argument gives a
TypeError or ValueError whose message starts with the function or class
name in brackets and says what is wrong, never a Python internal
(AttributeError, KeyError, 'list index out of range', a bare comparison
TypeError)."""
import math
import re

import numpy as np
import pytest

import pyflame as pf
from pyflame import amp, nn, optim
from pyflame.nn import functional as F
from pyflame.nn import init
from pyflame.optim import lr_scheduler as S
from pyflame.utils import checkpoint, checkpoint_sequential

_INTERNAL = re.compile(r"list index out of range|'NoneType' object|not supported between instances|"
                       r"has no attribute|unsupported operand|not subscriptable|not iterable|"
                       r"invalid literal|could not convert|incompatible function arguments")


def _raises(exc, fn, call, *args, **kwargs):
    """call(*args) raises exc (exactly that class or a subclass) with a
    message '[fn] ...' free of Python internals."""
    with pytest.raises(Exception) as info:
        out = call(*args, **kwargs)
        if isinstance(out, pf.Tensor):
            out.numpy()
    e = info.value
    assert isinstance(e, exc), f"{type(e).__name__}: {e}"
    msg = str(e)
    assert msg.startswith(f"[{fn}] "), f"message {msg!r} does not start with '[{fn}] '"
    assert not _INTERNAL.search(msg), msg
    return msg


def _params():
    return [nn.Parameter(pf.ones(2))]


# ------------------------------------------------------------ creation helpers

@pytest.mark.parametrize("bad", [None, 3, [1.0, 2.0], np.ones(2)])
def test_like_functions_need_a_tensor(device, bad):
    _raises(TypeError, "zeros_like", pf.zeros_like, bad)
    _raises(TypeError, "ones_like", pf.ones_like, bad)


@pytest.mark.parametrize("bad", ["a", None, [1], object()])
def test_arange_eye_randint_arguments(device, bad):
    _raises((TypeError, ValueError), "arange", pf.arange, bad)
    _raises((TypeError, ValueError), "arange", pf.arange, 0, 5, bad)
    _raises((TypeError, ValueError), "eye", pf.eye, bad)
    _raises((TypeError, ValueError), "randint", pf.randint, bad, 5)
    _raises((TypeError, ValueError), "randint", pf.randint, 0, bad)


# -------------------------------------------------------------------- autograd

def _f(a, b=None):
    return (a * a).sum()


@pytest.mark.parametrize("argnums", [-3, 2, 5, (0, 3)])
def test_grad_argnums_out_of_range(device, argnums):
    msg = _raises(ValueError, "grad", lambda: pf.grad(_f, argnums=argnums)(pf.ones(2), pf.ones(2)))
    assert "out of range" in msg


def test_grad_negative_argnums_count_from_the_end(device):
    x, y = np.array([1.0, 2.0], np.float32), np.array([3.0, -1.0], np.float32)
    g = pf.grad(lambda a, b: (a * b * b).sum(), argnums=-1)(pf.tensor(x), pf.tensor(y))
    np.testing.assert_allclose(g.numpy(), 2 * x * y)


@pytest.mark.parametrize("argnums", ["a", 1.5, None, (), (0, "b"), (0, 0), True])
def test_grad_argnums_type(device, argnums):
    exc = ValueError if argnums == (0, 0) else TypeError
    _raises(exc, "grad", pf.grad, _f, argnums=argnums)
    _raises(exc, "grad", pf.value_and_grad, _f, argnums)


def test_grad_bad_functions_and_inputs(device):
    _raises(TypeError, "grad", pf.value_and_grad, 3)
    _raises(ValueError, "grad", lambda: pf.grad(lambda a: a)(pf.ones(2)))
    _raises(ValueError, "grad", lambda: pf.grad(lambda a: None)(pf.ones(2)))
    _raises(TypeError, "grad", lambda: pf.grad(_f)(None))
    _raises(ValueError, "grad", lambda: pf.grad(_f)(pf.ones(2, dtype="int32")))
    y = (pf.ones(2, requires_grad=True) * 2).sum()
    _raises(TypeError, "grad", pf.grad, y, None)
    _raises(TypeError, "grad", pf.grad, y, [None])
    _raises(TypeError, "grad", pf.grad, [y, 3], [pf.ones(2)])


# ----------------------------------------------------------------- optimizers

@pytest.mark.parametrize("cls", [optim.SGD, optim.Adam, optim.AdamW])
@pytest.mark.parametrize("bad", ["a", None, [0.1], object()])
def test_optimizer_hyperparameter_types(device, cls, bad):
    name = cls.__name__
    _raises(TypeError, name, cls, _params(), lr=bad)
    _raises(TypeError, name, cls, _params(), lr=0.1, weight_decay=bad)
    if cls is optim.SGD:
        _raises(TypeError, name, cls, _params(), lr=0.1, momentum=bad)
        _raises(TypeError, name, cls, _params(), lr=0.1, dampening=bad)
    else:
        _raises(TypeError, name, cls, _params(), eps=bad)
        _raises(TypeError, name, cls, _params(), betas=bad)
        _raises(TypeError, name, cls, _params(), betas=(0.9, bad))


@pytest.mark.parametrize("cls", [optim.SGD, optim.Adam])
def test_optimizer_hyperparameter_ranges(device, cls):
    name = cls.__name__
    for kw in ({"lr": -1.0}, {"lr": math.nan}, {"lr": 0.1, "weight_decay": -1}):
        msg = _raises(ValueError, name, cls, _params(), **kw)
        assert "Invalid" in msg
    if cls is optim.Adam:
        _raises(ValueError, name, cls, _params(), betas=(1.0, 0.9))
        _raises(TypeError, name, cls, _params(), betas=(0.9, 0.9, 0.9))
    else:
        _raises(ValueError, name, cls, _params(), lr=0.1, nesterov=True)


def test_optimizer_tensor_lr_is_accepted(device):
    opt = optim.SGD(_params(), lr=pf.tensor(0.1))
    assert opt.param_groups[0]["lr"] is not None


@pytest.mark.parametrize("cls", [optim.SGD, optim.Adam])
def test_optimizer_load_state_dict(device, cls):
    opt = cls(_params(), lr=0.1)
    fn = f"{cls.__name__}.load_state_dict"
    _raises(TypeError, fn, opt.load_state_dict, None)
    _raises(TypeError, fn, opt.load_state_dict, [1])
    _raises(ValueError, fn, opt.load_state_dict, {})
    _raises(ValueError, fn, opt.load_state_dict, {"state": {}})
    _raises(TypeError, fn, opt.load_state_dict, {"state": [], "param_groups": []})
    _raises(ValueError, fn, opt.load_state_dict, {"state": {}, "param_groups": [{}]})
    _raises(ValueError, fn, opt.load_state_dict, {"state": {}, "param_groups": []})
    _raises(TypeError, fn, opt.load_state_dict,
            {"state": {0: 5}, "param_groups": [{"params": [0], "lr": 0.1}]})
    # The optimizer is unchanged by the failed loads and still round-trips.
    sd = opt.state_dict()
    opt.load_state_dict(sd)
    assert opt.param_groups[0]["lr"] == 0.1


# ----------------------------------------------------------------- schedulers

def _sgd():
    return optim.SGD(_params(), lr=0.1)


@pytest.mark.parametrize("bad", ["a", None, [1]])
def test_scheduler_argument_types(device, bad):
    _raises(TypeError, "StepLR", S.StepLR, _sgd(), bad)
    _raises(TypeError, "StepLR", S.StepLR, _sgd(), 2, gamma=bad)
    _raises(TypeError, "StepLR", S.StepLR, bad, 2)
    _raises(TypeError, "StepLR", S.StepLR, _sgd(), 2, last_epoch=bad)
    _raises(TypeError, "MultiStepLR", S.MultiStepLR, _sgd(), [1, bad])
    if bad != [1]:  # (a list of ints is a valid milestones argument)
        _raises(TypeError, "MultiStepLR", S.MultiStepLR, _sgd(), bad)
    _raises(TypeError, "ExponentialLR", S.ExponentialLR, _sgd(), bad)
    _raises(TypeError, "CosineAnnealingLR", S.CosineAnnealingLR, _sgd(), bad)
    _raises(TypeError, "CosineAnnealingLR", S.CosineAnnealingLR, _sgd(), 3, eta_min=bad)


def test_scheduler_argument_ranges(device):
    _raises(ValueError, "StepLR", S.StepLR, _sgd(), 0)
    _raises(TypeError, "StepLR", S.StepLR, _sgd(), 1.5)
    _raises(ValueError, "StepLR", S.StepLR, _sgd(), 2, last_epoch=-2)
    _raises(ValueError, "MultiStepLR", S.MultiStepLR, _sgd(), [1, -1])
    _raises(ValueError, "ExponentialLR", S.ExponentialLR, _sgd(), math.inf)
    _raises(ValueError, "CosineAnnealingLR", S.CosineAnnealingLR, _sgd(), 0)
    s = S.CosineAnnealingLR(_sgd(), 2.0)  # a float period is fine, as in torch
    s.step()
    assert s.get_last_lr()[0] == pytest.approx(0.05)


def test_scheduler_state_and_step(device):
    s = S.StepLR(_sgd(), 2)
    _raises(TypeError, "StepLR.load_state_dict", s.load_state_dict, None)
    _raises(ValueError, "StepLR.load_state_dict", s.load_state_dict, {})
    _raises(TypeError, "StepLR.step", s.step, "a")
    s.load_state_dict(s.state_dict())
    s.step()
    assert s.get_last_lr() == [0.1]


# ------------------------------------------------------------------- nn layers

@pytest.mark.parametrize("bad", ["a", None, [1]])
def test_norm_layer_arguments(device, bad):
    for cls, args in ((nn.BatchNorm1d, (3,)), (nn.LayerNorm, (3,)), (nn.GroupNorm, (1, 3)),
                      (nn.RMSNorm, (3,))):
        if not (cls is nn.RMSNorm and bad is None):  # RMSNorm's eps=None is its default
            _raises(TypeError, cls.__name__, cls, *args, eps=bad)
    _raises(TypeError, "BatchNorm2d", nn.BatchNorm2d, 3, momentum=bad) if bad is not None \
        else nn.BatchNorm2d(3, momentum=None)
    if bad != [1]:  # (a valid normalized_shape)
        _raises(TypeError, "LayerNorm", nn.LayerNorm, bad)
    _raises(TypeError, "RMSNorm", nn.RMSNorm, [2, bad])
    _raises(ValueError, "LayerNorm", nn.LayerNorm, 0)
    _raises(ValueError, "BatchNorm1d", nn.BatchNorm1d, 3, eps=-1.0)


@pytest.mark.parametrize("bad", ["a", None, -1, 1.5])
def test_layer_sizes(device, bad):
    exc = ValueError if bad == -1 else TypeError
    _raises(exc, "Linear", nn.Linear, bad, 2)
    _raises(exc, "Embedding", nn.Embedding, 4, bad)
    _raises(exc, "GroupNorm", nn.GroupNorm, bad, 4)


# ------------------------------------------------------------ amp, checkpoint

@pytest.mark.parametrize("bad", ["a", None, [2.0]])
def test_grad_scaler_arguments(device, bad):
    for kw in ("init_scale", "growth_factor", "backoff_factor"):
        _raises(TypeError, "GradScaler", amp.GradScaler, **{kw: bad})
    _raises(ValueError, "GradScaler", amp.GradScaler, growth_interval=bad)
    _raises(TypeError, "GradScaler.set_growth_factor", amp.GradScaler().set_growth_factor, bad)
    if bad is not None:  # (None: keep the dynamic scale)
        _raises(TypeError, "GradScaler.update", amp.GradScaler().update, bad)
    _raises(TypeError, "GradScaler.load_state_dict", amp.GradScaler().load_state_dict, bad)


def test_grad_scaler_ranges_and_state(device):
    _raises(ValueError, "GradScaler", amp.GradScaler, init_scale=-1.0)
    _raises(ValueError, "GradScaler", amp.GradScaler, growth_factor=0.5)
    _raises(ValueError, "GradScaler", amp.GradScaler, backoff_factor=2.0)
    _raises(ValueError, "GradScaler", amp.GradScaler, growth_interval=0)
    _raises(ValueError, "GradScaler.update", amp.GradScaler().update, 0.0)
    _raises(ValueError, "GradScaler.load_state_dict", amp.GradScaler().load_state_dict,
            {"scale": 1.0})
    _raises(RuntimeError, "GradScaler.load_state_dict", amp.GradScaler().load_state_dict, {})
    g = amp.GradScaler(growth_interval=10.0)  # an integral float is an integer here
    assert g.get_growth_interval() == 10


def test_checkpoint_sequential_arguments(device):
    layers = [nn.Linear(2, 2), nn.Linear(2, 2)]
    x = pf.ones((1, 2))
    _raises(TypeError, "checkpoint_sequential", checkpoint_sequential, layers, "a", x)
    _raises(TypeError, "checkpoint_sequential", checkpoint_sequential, layers, None, x)
    _raises(ValueError, "checkpoint_sequential", checkpoint_sequential, layers, 3, x)
    _raises(TypeError, "checkpoint_sequential", checkpoint_sequential, 5, 1, x)
    _raises(TypeError, "checkpoint_sequential", checkpoint_sequential, [1, 2], 1, x)
    _raises(TypeError, "checkpoint", checkpoint, None, x)
    out = checkpoint_sequential(nn.Sequential(*layers), 2, x)
    np.testing.assert_allclose(out.numpy(), layers[1](layers[0](x)).numpy(), rtol=1e-6)


def test_functional_wrappers(device):
    x = pf.ones((2, 3))
    _raises(ValueError, "linear", F.linear, x, None)
    _raises(ValueError, "linear", F.linear, x, pf.ones((2, 4)))


@pytest.mark.parametrize("bad", [None, 3, "x"])
def test_functional_argument_types(device, bad):
    x = pf.ones((2, 3))
    if bad is not None:  # (no bias)
        _raises(TypeError, "linear", F.linear, x, pf.ones((2, 3)), bad)
    _raises(TypeError, "softmax", F.softmax, bad, 1)
    _raises(TypeError, "log_softmax", F.log_softmax, bad, 1)
    _raises(TypeError, "flatten", F.flatten, bad)
    if isinstance(bad, str):
        _raises(TypeError, "softmax", F.softmax, x, bad)
    _raises(TypeError, "flatten", F.flatten, x, None if bad == 3 else bad)


@pytest.mark.parametrize("bad", [None, "a", [1.0]])
def test_init_argument_types(device, bad):
    w = pf.ones((2, 3))
    _raises(TypeError, "uniform_", init.uniform_, w, bad)
    _raises(TypeError, "normal_", init.normal_, w, 0.0, bad)
    _raises(TypeError, "constant_", init.constant_, w, bad)
    _raises(TypeError, "xavier_uniform_", init.xavier_uniform_, w, bad)
    _raises(TypeError, "xavier_normal_", init.xavier_normal_, w, bad)
    _raises(ValueError, "kaiming_uniform_", init.kaiming_uniform_, w, mode=bad)
    _raises(TypeError, "calculate_fan_in_and_fan_out", init.calculate_fan_in_and_fan_out, bad)
    _raises(TypeError, "uniform", init.uniform, bad)
    _raises(TypeError, "normal", init.normal, (2,), 0.0, bad)
    _raises(TypeError, "uniform_", init.uniform_, bad)
    _raises(ValueError, "calculate_gain", init.calculate_gain, "nope")


def test_init_valid_arguments_still_work(device):
    w = pf.zeros((4, 5))
    init.uniform_(w, -1, 1)
    v = w.numpy()
    assert ((v >= -1) & (v <= 1)).all() and v.std() > 0
    init.constant_(w, np.float32(2.5))
    np.testing.assert_array_equal(w.numpy(), np.full((4, 5), 2.5, np.float32))
    assert init.calculate_fan_in_and_fan_out(w) == (5, 4)
    assert init.calculate_fan_in_and_fan_out([3, 2, 2]) == (4, 6)


@pytest.mark.parametrize("bad", [None, "a", 3, pf.ones(2)])
def test_grad_scaler_needs_an_optimizer(device, bad):
    _raises(TypeError, "GradScaler.step", amp.GradScaler().step, bad)
    _raises(TypeError, "GradScaler.unscale_", amp.GradScaler().unscale_, bad)
    _raises(ValueError, "GradScaler.scale", amp.GradScaler().scale, None if bad is not None else 3)


@pytest.mark.parametrize("bad", [None, 3, object()])
def test_optimizer_params_and_groups(device, bad):
    _raises(TypeError, "SGD", optim.SGD, bad, lr=0.1)
    opt = optim.SGD(_params(), lr=0.1)
    _raises(ValueError, "SGD.add_param_group", opt.add_param_group, {"lr": 0.1})
    _raises(TypeError, "SGD.add_param_group", opt.add_param_group, {"params": bad})
    _raises(TypeError, "SGD.add_param_group", opt.add_param_group, bad)
    _raises(TypeError, "SGD.step", opt.step, "a")


def test_optimizer_load_keeps_missing_options(device):
    """A saved group without some options keeps the optimizer's current ones
    (a step after the load works)."""
    p = nn.Parameter(pf.ones(2))
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    opt.load_state_dict({"state": {}, "param_groups": [{"params": [0], "lr": 0.5}]})
    assert opt.param_groups[0]["lr"] == 0.5 and opt.param_groups[0]["momentum"] == 0.9
    p.grad = pf.ones(2)
    opt.step()
    np.testing.assert_allclose(p.numpy(), [0.5, 0.5])


@pytest.mark.parametrize("bad", [3, None, [1, 2]])
def test_container_arguments(device, bad):
    if bad == 3:
        _raises(TypeError, "ModuleList.extend", nn.ModuleList, bad)
        _raises(TypeError, "ModuleDict.update", nn.ModuleDict, bad)
    if bad == [1, 2]:
        _raises(TypeError, "ModuleList.add_module", nn.ModuleList, bad)
        _raises(TypeError, "ModuleDict.update", nn.ModuleDict, bad)
    _raises(TypeError, "ModuleList.extend", nn.ModuleList().extend, nn.Linear(2, 2))


@pytest.mark.parametrize("bad", [None, "a", [0.1]])
def test_layer_arguments(device, bad):
    _raises(TypeError, "CrossEntropyLoss", nn.CrossEntropyLoss, label_smoothing=bad)
    if bad is not None:
        _raises(TypeError, "Embedding", nn.Embedding, 4, 3, padding_idx=bad)
        _raises(TypeError, "Embedding", nn.Embedding, 4, 3, _weight=bad)
        _raises(TypeError, "Embedding.from_pretrained", nn.Embedding.from_pretrained, bad)
    _raises(TypeError, "BatchNorm1d", nn.BatchNorm1d(3), bad)
    _raises(ValueError, "Embedding", nn.Embedding, 4, 3, padding_idx=4)
    assert nn.Embedding(4, 3, padding_idx=-1).padding_idx == 3
