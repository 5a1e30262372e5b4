"""Gradients of the conv family on every device: convolution and transposed
convolution (input, weight, bias), max / average pooling, adaptive pooling
and batch normalization, against torch (float64 oracle) and finite
differences; error cases; and pyflame.nn layers trained one step against
torch.nn."""
from collections import OrderedDict

import numpy as np
import pytest

import pyflame as pf
import pyflame.nn as nn
from conftest import random_array
from gradcheck import check_finite_differences, check_vs_torch

torch = pytest.importorskip("torch")
F = torch.nn.functional

# Convolutions accumulate in float32 (TF32 off): sums of up to a few hundred
# terms of size ~10.
CONV_TOL = dict(rtol=1e-4, atol=2e-4)


def opt(bias):
    return bias if bias else None


# ------------------------------------------------------------ convolution
# (rank, in channels, out channels, input size, kernel, kwargs)
CONV_CASES = [
    (1, 3, 4, 11, 3, dict()),
    (1, 4, 6, 13, 4, dict(stride=3, padding=2, dilation=2, groups=2)),
    (1, 2, 3, 9, 3, dict(padding="same")),
    (1, 2, 3, 9, 4, dict(padding="same", dilation=1)),  # odd total padding
    (2, 3, 4, (7, 8), 3, dict(stride=2, padding=1)),
    (2, 4, 6, (9, 7), (3, 2), dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)),
    (2, 6, 6, (8, 8), 3, dict(padding=1, groups=6)),  # depthwise
    (2, 2, 4, (6, 7), 1, dict()),  # 1x1, the direct GEMM path
    (2, 2, 4, (6, 7), 1, dict(stride=2)),
    (2, 3, 2, (7, 7), (2, 3), dict(padding="same", dilation=2)),
    (2, 3, 2, (7, 7), 3, dict(padding="valid", stride=2)),
    (3, 2, 4, (5, 6, 5), 3, dict(stride=(1, 2, 2), padding=1)),
    (3, 4, 2, (6, 5, 7), (2, 3, 2), dict(stride=2, dilation=(2, 1, 1), groups=2)),
]


def conv_fn(rank, lib):
    return getattr(pf if lib == "pf" else F, f"conv{rank}d")


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: f"{c[0]}d-{c[5]}-k{c[4]}")
def test_conv_grad(device, case, bias):
    rank, cin, cout, size, k, kw = case
    size = (size,) * rank if isinstance(size, int) else size
    k = (k,) * rank if isinstance(k, int) else k
    groups = kw.get("groups", 1)
    x = random_array((2, cin) + size)
    w = random_array((cout, cin // groups) + k)
    arrays = [x, w] + ([random_array((cout,))] if bias else [])
    pf_conv, t_conv = conv_fn(rank, "pf"), conv_fn(rank, "torch")
    check_vs_torch(lambda x, w, b=None: pf_conv(x, w, b, **kw),
                   lambda x, w, b=None: t_conv(x, w, b, **kw), arrays, device, **CONV_TOL)


# (rank, in channels, out channels, input size, kernel, kwargs)
CONV_T_CASES = [
    (1, 3, 4, 7, 3, dict()),
    (1, 4, 6, 6, 3, dict(stride=3, padding=1, output_padding=2, groups=2)),
    (1, 2, 2, 6, 3, dict(stride=1, dilation=3, output_padding=2)),  # output_padding >= stride
    (2, 3, 4, (5, 4), 3, dict(stride=2, padding=1, output_padding=1)),
    (2, 4, 6, (4, 5), (3, 2), dict(stride=(2, 3), padding=(1, 0), output_padding=(0, 2),
                                   dilation=(2, 1), groups=2)),
    (2, 4, 4, (5, 5), 3, dict(padding=1, groups=4)),
    (2, 2, 3, (4, 4), 2, dict(stride=1, dilation=2, output_padding=1)),
    (3, 2, 4, (3, 4, 3), 3, dict(stride=2, padding=1, output_padding=(1, 0, 1))),
    (3, 4, 2, (3, 3, 4), (2, 3, 2), dict(stride=(1, 2, 2), dilation=(2, 1, 1), groups=2)),
]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("case", CONV_T_CASES, ids=lambda c: f"{c[0]}d-{c[5]}-k{c[4]}")
def test_conv_transpose_grad(device, case, bias):
    rank, cin, cout, size, k, kw = case
    size = (size,) * rank if isinstance(size, int) else size
    k = (k,) * rank if isinstance(k, int) else k
    groups = kw.get("groups", 1)
    x = random_array((2, cin) + size)
    w = random_array((cin, cout // groups) + k)
    arrays = [x, w] + ([random_array((cout,))] if bias else [])
    pf_conv = getattr(pf, f"conv_transpose{rank}d")
    t_conv = getattr(F, f"conv_transpose{rank}d")
    check_vs_torch(lambda x, w, b=None: pf_conv(x, w, b, **kw),
                   lambda x, w, b=None: t_conv(x, w, b, **kw), arrays, device, **CONV_TOL)


def test_conv_unbatched_and_partial_grads(device):
    x = random_array((3, 9, 8))
    w = random_array((4, 3, 3, 3))
    b = random_array((4,))
    kw = dict(stride=2, padding=1)
    for mask in ([True, False, False], [False, True, False], [False, False, True]):
        check_vs_torch(lambda x, w, b: pf.conv2d(x, w, b, **kw),
                       lambda x, w, b: F.conv2d(x, w, b, **kw), [x, w, b], device,
                       grad_mask=mask, **CONV_TOL)
    check_vs_torch(lambda x, w: pf.conv_transpose2d(x, w, stride=2, output_padding=1),
                   lambda x, w: F.conv_transpose2d(x, w, stride=2, output_padding=1),
                   [random_array((4, 3, 3)), random_array((4, 2, 3, 3))], device, **CONV_TOL)


def test_conv_chain_grad(device):
    """conv -> relu -> conv_transpose: cotangents flow through both adjoints."""
    x = random_array((2, 3, 8, 8))
    w1 = random_array((4, 3, 3, 3))
    w2 = random_array((4, 3, 2, 2))

    def f(lib):
        conv = pf.conv2d if lib is pf else F.conv2d
        convt = pf.conv_transpose2d if lib is pf else F.conv_transpose2d
        relu = pf.relu if lib is pf else torch.relu
        return lambda x, w1, w2: convt(relu(conv(x, w1, stride=2, padding=1)), w2, stride=2)
    check_vs_torch(f(pf), f(torch), [x, w1, w2], device, rtol=1e-4, atol=1e-3)


def test_conv_float16_grad(device):
    x = random_array((2, 4, 6, 6), "float16", -1, 1)
    w = random_array((4, 2, 3, 3), "float16", -1, 1)
    kw = dict(padding=1, groups=2)
    check_vs_torch(lambda x, w: pf.conv2d(x, w, **kw), lambda x, w: F.conv2d(x, w, **kw),
                   [x, w], device, rtol=2e-2, atol=3e-2, dtype="float16")


@pytest.mark.parametrize("transposed", [False, True])
def test_conv_bfloat16_grad(device, transposed):
    x = random_array((2, 4, 6, 6), "bfloat16", -1, 1)
    w = random_array((4, 2, 3, 3), "bfloat16", -1, 1)
    b = random_array((4,), "bfloat16", -1, 1)
    kw = dict(padding=1, groups=2, stride=2)
    if transposed:
        f = lambda x, w, b: pf.conv_transpose2d(x, w, b, **kw)  # noqa: E731
        tf = lambda x, w, b: F.conv_transpose2d(x, w, b, **kw)  # noqa: E731
    else:
        f = lambda x, w, b: pf.conv2d(x, w, b, **kw)  # noqa: E731
        tf = lambda x, w, b: F.conv2d(x, w, b, **kw)  # noqa: E731
    check_vs_torch(f, tf, [x, w, b], device, rtol=5e-2, atol=1e-1, dtype="bfloat16")


@pytest.mark.parametrize("which", ["conv", "conv_transpose"])
def test_conv_finite_differences(device, which):
    if which == "conv":
        check_finite_differences(
            lambda x, w, b: pf.conv2d(x, w, b, stride=2, padding=1, dilation=(1, 2), groups=2),
            [random_array((1, 4, 6, 7), low=-1, high=1), random_array((2, 2, 3, 2), low=-1, high=1),
             random_array((2,), low=-1, high=1)], device)
    else:
        check_finite_differences(
            lambda x, w, b: pf.conv_transpose1d(x, w, b, stride=2, padding=1, output_padding=1),
            [random_array((2, 3, 5), low=-1, high=1), random_array((3, 2, 3), low=-1, high=1),
             random_array((2,), low=-1, high=1)], device)


# ---------------------------------------------------------------- pooling

def distinct(shape, spacing=0.1):
    """Values spaced apart so that max pooling's choice is stable under the
    finite-difference step (and ties never occur)."""
    n = int(np.prod(shape))
    return (np.random.permutation(n).astype(np.float64) * spacing - n * spacing / 2).reshape(shape)


# (rank, input spatial size, kwargs)
MAX_POOL_CASES = [
    (1, 11, dict(kernel_size=3)),
    (1, 12, dict(kernel_size=4, stride=2, padding=2, dilation=1, ceil_mode=True)),
    (1, 13, dict(kernel_size=3, stride=2, padding=1, dilation=3)),
    (2, (8, 9), dict(kernel_size=2)),
    (2, (9, 9), dict(kernel_size=3, stride=2, padding=1)),  # overlapping windows
    (2, (7, 8), dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 1), ceil_mode=True)),
    (2, (10, 9), dict(kernel_size=3, stride=2, padding=1, dilation=2, ceil_mode=True)),
    (2, (5, 5), dict(kernel_size=3, stride=1)),  # heavy overlap
    (3, (5, 6, 7), dict(kernel_size=2, stride=2)),
    (3, (6, 5, 7), dict(kernel_size=3, stride=(1, 2, 2), padding=1, ceil_mode=True)),
    (3, (7, 6, 6), dict(kernel_size=(2, 3, 2), stride=2, dilation=(2, 1, 2))),
]


@pytest.mark.parametrize("case", MAX_POOL_CASES, ids=lambda c: f"{c[0]}d-{c[2]}")
def test_max_pool_grad(device, case):
    rank, size, kw = case
    size = (size,) * rank if isinstance(size, int) else size
    x = distinct((2, 3) + size)
    check_vs_torch(lambda x: getattr(pf, f"max_pool{rank}d")(x, **kw),
                   lambda x: getattr(F, f"max_pool{rank}d")(x, **kw), [x], device)


# (rank, input spatial size, kwargs)
AVG_POOL_CASES = [
    (1, 11, dict(kernel_size=3)),
    (1, 10, dict(kernel_size=4, stride=3, padding=2, ceil_mode=True, count_include_pad=False)),
    (1, 9, dict(kernel_size=3, stride=1, padding=1)),
    (2, (8, 9), dict(kernel_size=2)),
    (2, (9, 9), dict(kernel_size=3, stride=2, padding=1)),
    (2, (9, 8), dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
    (2, (7, 8), dict(kernel_size=(3, 2), stride=(2, 3), padding=(1, 1), ceil_mode=True)),
    (2, (7, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
    (2, (6, 7), dict(kernel_size=3, stride=2, padding=1, divisor_override=5)),
    (3, (5, 6, 7), dict(kernel_size=2, stride=2)),
    (3, (6, 5, 7), dict(kernel_size=3, stride=(1, 2, 2), padding=1, ceil_mode=True,
                        count_include_pad=False)),
    (3, (5, 5, 6), dict(kernel_size=(2, 3, 2), stride=2, padding=(1, 1, 0), divisor_override=7)),
]


@pytest.mark.parametrize("case", AVG_POOL_CASES, ids=lambda c: f"{c[0]}d-{c[2]}")
def test_avg_pool_grad(device, case):
    rank, size, kw = case
    size = (size,) * rank if isinstance(size, int) else size
    x = random_array((2, 3) + size)
    check_vs_torch(lambda x: getattr(pf, f"avg_pool{rank}d")(x, **kw),
                   lambda x: getattr(F, f"avg_pool{rank}d")(x, **kw), [x], device)


def test_max_pool_ties_go_to_the_first_maximum(device):
    """Equal values in a window: the first in scan order takes the gradient
    (PyTorch's rule), also where overlapping windows share elements."""
    x = np.zeros((1, 1, 4, 5))
    x[0, 0, 1:3, 1:4] = 2.0  # a plateau of maxima
    check_vs_torch(lambda x: pf.max_pool2d(x, 2, stride=1), lambda x: F.max_pool2d(x, 2, stride=1),
                   [x], device)
    check_vs_torch(lambda x: pf.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True),
                   lambda x: F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True), [x], device)
    ones = np.ones((1, 1, 6))
    xt = pf.tensor(ones.astype(np.float32), device=device, requires_grad=True)
    pf.max_pool1d(xt, 3, stride=2, padding=1).sum().backward()  # windows [-1, 1], [1, 3], [3, 5]
    np.testing.assert_array_equal(xt.grad.numpy(), [[[1, 1, 0, 1, 0, 0]]])
    check_vs_torch(lambda x: pf.adaptive_max_pool1d(x, 4), lambda x: F.adaptive_max_pool1d(x, 4),
                   [np.ones((1, 2, 7))], device)


def test_pool_unbatched_and_float16_grad(device):
    check_vs_torch(lambda x: pf.max_pool2d(x, 3, stride=2, padding=1),
                   lambda x: F.max_pool2d(x, 3, stride=2, padding=1), [distinct((3, 7, 6))], device)
    check_vs_torch(lambda x: pf.avg_pool1d(x, 3, stride=2, padding=1),
                   lambda x: F.avg_pool1d(x, 3, stride=2, padding=1), [random_array((3, 9))], device)
    x16 = random_array((2, 3, 6, 6), "float16", -1, 1)
    check_vs_torch(lambda x: pf.avg_pool2d(x, 2), lambda x: F.avg_pool2d(x, 2), [x16], device,
                   rtol=1e-2, atol=1e-2, dtype="float16")
    check_vs_torch(lambda x: pf.max_pool2d(x, 2), lambda x: F.max_pool2d(x, 2),
                   [distinct((2, 3, 6, 6), 0.01)], device, rtol=1e-2, atol=1e-2, dtype="float16")


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pool_finite_differences(device, kind):
    if kind == "max":
        f = lambda x: pf.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True)  # noqa: E731
    else:
        f = lambda x: pf.avg_pool3d(x, 2, stride=1, padding=1, count_include_pad=False)  # noqa: E731
    check_finite_differences(f, [distinct((1, 2, 5, 6)) if kind == "max"
                                 else random_array((1, 2, 3, 4, 3))], device)


# ------------------------------------------------------- adaptive pooling

# (rank, input spatial size, output size)
ADAPTIVE_CASES = [
    (1, 10, 4),
    (1, 7, 7),
    (1, 5, 8),  # larger than the input: overlapping windows
    (2, (7, 9), (3, 4)),
    (2, (6, 5), (4, None)),
    (2, (5, 7), (7, 3)),
    (2, (8, 8), 1),  # global pooling
    (3, (5, 6, 7), (2, 3, 4)),
    (3, (4, 3, 5), (3, 5, 2)),
]


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("case", ADAPTIVE_CASES, ids=lambda c: f"{c[0]}d-{c[2]}")
def test_adaptive_pool_grad(device, case, kind):
    rank, size, out = case
    size = (size,) * rank if isinstance(size, int) else size
    x = distinct((2, 3) + size) if kind == "max" else random_array((2, 3) + size)
    name = f"adaptive_{kind}_pool{rank}d"
    check_vs_torch(lambda x: getattr(pf, name)(x, out), lambda x: getattr(F, name)(x, out),
                   [x], device)


def test_adaptive_pool_finite_differences(device):
    check_finite_differences(lambda x: pf.adaptive_avg_pool2d(x, (3, 4)),
                             [random_array((1, 2, 5, 7))], device)
    check_finite_differences(lambda x: pf.adaptive_max_pool1d(x, 4), [distinct((2, 2, 9))], device)


# ------------------------------------------------------ batch normalization

BN_SHAPES = [(6, 3), (4, 3, 5), (2, 4, 3, 5), (2, 3, 2, 3, 4)]


def bn_pair(training, affine, running):
    """(pyflame fn, torch fn) over (x[, weight, bias]) with fixed running stats."""
    def make(lib):
        def f(x, *wb):
            C = x.shape[1]
            if running:
                rm_np = np.linspace(-0.5, 0.5, C)
                rv_np = np.linspace(0.5, 1.5, C)
                if lib is pf:
                    rm = pf.tensor(rm_np.astype(np.float32), device=x.device)
                    rv = pf.tensor(rv_np.astype(np.float32), device=x.device)
                else:
                    rm, rv = torch.tensor(rm_np), torch.tensor(rv_np)
            else:
                rm = rv = None
            w, b = wb if affine else (None, None)
            bn = pf.batch_norm if lib is pf else F.batch_norm
            return bn(x, rm, rv, w, b, training=training, momentum=0.1, eps=1e-5)
        return f
    return make(pf), make(torch)


@pytest.mark.parametrize("shape", BN_SHAPES, ids=lambda s: f"{len(s)}d")
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("mode", ["train", "train-running", "eval"])
def test_batch_norm_grad(device, shape, affine, mode):
    training = mode != "eval"
    f, tf = bn_pair(training, affine, running=mode != "train")
    C = shape[1]
    arrays = [random_array(shape)]
    if affine:
        arrays += [random_array((C,), low=0.5, high=2.0), random_array((C,))]
    check_vs_torch(f, tf, arrays, device, rtol=1e-4, atol=1e-4)


def test_batch_norm_float16_and_partial_grads(device):
    f, tf = bn_pair(True, True, running=True)
    x = random_array((4, 3, 5), "float16", -2, 2)
    w = random_array((3,), "float16", 0.5, 2.0)
    b = random_array((3,), "float16")
    check_vs_torch(f, tf, [x, w, b], device, rtol=2e-2, atol=2e-2, dtype="float16")
    x32 = random_array((4, 3, 5))
    for mask in ([True, False, False], [False, True, True]):
        check_vs_torch(f, tf, [x32, w, b], device, grad_mask=mask, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_finite_differences(device, training):
    f, _ = bn_pair(training, True, running=not training)
    check_finite_differences(f, [random_array((3, 2, 4), low=-1, high=1),
                                 random_array((2,), low=0.5, high=1.5),
                                 random_array((2,), low=-1, high=1)], device)


def test_batch_norm_running_stats_stay_out_of_the_graph(device):
    x = pf.tensor(random_array((4, 3, 5)).astype(np.float32), device=device, requires_grad=True)
    rm, rv = pf.zeros(3, device=device), pf.ones(3, device=device)
    out = pf.batch_norm(x, rm, rv, training=True)
    assert out.requires_grad
    assert not rm.requires_grad and not rv.requires_grad  # rebound to the updated values
    out.sum().backward()
    y = pf.batch_norm(x, rm, rv, training=False)  # eval with the updated statistics
    (y * y).sum().backward()
    assert x.grad is not None


# ------------------------------------------------------------------ errors

def test_eval_batch_norm_running_stats_requiring_grad_raise(device):
    x = pf.randn(4, 3, 5, device=device, requires_grad=True)
    rm = pf.zeros(3, device=device, requires_grad=True)
    rv = pf.ones(3, device=device)
    y = pf.batch_norm(x, rm, rv, training=False)
    with pytest.raises(ValueError, match=r"\[backward\] batch_norm: running_mean requires grad"):
        y.sum().backward()
    rv2 = pf.ones(3, device=device, requires_grad=True)
    y = pf.batch_norm(x, pf.zeros(3, device=device), rv2, training=False)
    with pytest.raises(ValueError, match="running_var"):
        y.sum().backward()


def test_integer_inputs_have_no_gradient(device):
    xi = pf.tensor(np.arange(2 * 3 * 5 * 5).reshape(2, 3, 5, 5).astype(np.int32), device=device)
    with pytest.raises(ValueError):
        xi.requires_grad = True
    with pytest.raises(ValueError, match="floating-point"):
        pf.conv2d(xi, pf.randn(4, 3, 3, 3, device=device, requires_grad=True))
    with pytest.raises(ValueError, match="floating-point"):
        pf.max_pool2d(xi, 2)
    # An integer tensor converted to float is a constant: only the weight
    # gets a gradient.
    w = pf.randn(4, 3, 3, 3, device=device, requires_grad=True)
    y = pf.conv2d(xi.astype("float32"), w)
    y.sum().backward()
    assert w.grad is not None and tuple(w.grad.shape) == (4, 3, 3, 3)


def test_backward_needs_an_input_that_requires_grad(device):
    y = pf.max_pool2d(pf.randn(1, 2, 4, 4, device=device), 2)
    with pytest.raises(ValueError, match="does not require grad"):
        y.sum().backward()
    x = pf.randn(1, 2, 4, 4, device=device, requires_grad=True)
    y = pf.avg_pool2d(x, 2)
    with pytest.raises(ValueError, match="gradient shape"):
        y.backward(pf.ones(1, 2, 3, 3, device=device))


# ------------------------------------------------------------------ pf.nn

class TorchNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 6, 3, stride=1, padding=1, groups=1)
        self.bn = torch.nn.BatchNorm2d(6)
        self.pool = torch.nn.MaxPool2d(3, stride=2, padding=1)
        self.convt = torch.nn.ConvTranspose2d(6, 2, 2, stride=2)
        self.apool = torch.nn.AdaptiveAvgPool2d((3, 2))

    def forward(self, x):
        return self.apool(self.convt(self.pool(torch.relu(self.bn(self.conv(x))))))


class PfNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, stride=1, padding=1, groups=1)
        self.bn = nn.BatchNorm2d(6)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        self.convt = nn.ConvTranspose2d(6, 2, 2, stride=2)
        self.apool = nn.AdaptiveAvgPool2d((3, 2))

    def forward(self, x):
        return self.apool(self.convt(self.pool(pf.relu(self.bn(self.conv(x))))))


@pytest.mark.parametrize("train", [True, False])
def test_nn_layers_backward_match_torch(device, train):
    torch.manual_seed(0)
    tm = TorchNet().double()
    with torch.no_grad():  # random affine and running statistics
        tm.bn.weight.uniform_(0.5, 1.5)
        tm.bn.bias.uniform_(-0.5, 0.5)
        tm.bn.running_mean.uniform_(-0.2, 0.2)
        tm.bn.running_var.uniform_(0.5, 1.5)
    ours = PfNet()
    ours.load_state_dict(OrderedDict((k, v.detach().numpy().astype(np.float32)
                                      if v.is_floating_point() else v.detach().numpy())
                                     for k, v in tm.state_dict().items()))
    ours.to(device)
    tm.train(train)
    ours.train(train)
    names = [n for n, _ in tm.named_parameters()]
    params = dict(ours.named_parameters())
    for n in names:
        params[n].requires_grad = True
    x = random_array((2, 3, 8, 8))
    xt = torch.tensor(x, requires_grad=True)
    xp = pf.tensor(x.astype(np.float32), device=device, requires_grad=True)
    out_t, out_p = tm(xt), ours(xp)
    cot = np.random.uniform(-1, 1, size=tuple(out_t.shape))
    out_t.backward(torch.tensor(cot))
    out_p.backward(pf.tensor(cot.astype(np.float32), device=device))
    np.testing.assert_allclose(out_p.numpy(), out_t.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(xp.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    tparams = dict(tm.named_parameters())
    for n in names:
        np.testing.assert_allclose(params[n].grad.numpy(), tparams[n].grad.numpy(), rtol=1e-4,
                                   atol=1e-4, err_msg=n)
    # The running statistics were updated (training) or kept (eval), as torch's.
    for n in ("running_mean", "running_var"):
        np.testing.assert_allclose(getattr(ours.bn, n).numpy(), getattr(tm.bn, n).numpy(),
                                   rtol=1e-5, atol=1e-6, err_msg=n)
        assert not getattr(ours.bn, n).requires_grad
