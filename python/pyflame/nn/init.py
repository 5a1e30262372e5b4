"""Parameter initialization in the shape of ``torch.nn.init``.

Each function draws fresh values from pf's seeded RNG (``pf.rand`` /
``pf.randn``, counter-based: the same seed gives the same numbers on every
device) on the tensor's own device, in float32, cast to the tensor's dtype;
rebinds the tensor to them in place (``Tensor._replace``, so the module that
holds it sees the change) and returns it. Parameters (``nn.Parameter``) are
accepted too (their ``.data`` is updated).
"""
import math
import numbers

from .. import _core
from .. import ops as _ops
from .parameter import Parameter

__all__ = ["calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_",
           "kaiming_uniform_", "kaiming_normal_", "xavier_uniform_", "xavier_normal_",
           "uniform", "normal", "calculate_fan_in_and_fan_out"]


def _tensor(t, fn):
    if isinstance(t, Parameter):
        t = t.data
    if not isinstance(t, _core.Tensor):
        raise TypeError(f"[{fn}] expected a pyflame.Tensor or nn.Parameter, got "
                        f"{type(t).__name__}")
    return t


def _real(value, what, fn):
    """A real number argument (not a bool), else a TypeError naming it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"[{fn}] {what} must be a real number, got {type(value).__name__} "
                        f"{value!r}")
    return value


def _shape_arg(shape, fn):
    """A shape (a sequence of ints or a tensor's shape) as a tuple."""
    if isinstance(shape, (_core.Tensor, Parameter)):
        return tuple(shape.shape)
    if isinstance(shape, (list, tuple)) and all(
            isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in shape):
        return tuple(int(d) for d in shape)
    raise TypeError(f"[{fn}] expected a shape (a sequence of ints), got {shape!r}")


def _set(t, values):
    if values.dtype != t.dtype:
        values = values.astype(t.dtype)
    t._replace(values)
    return t


def uniform(shape, a=0.0, b=1.0, device=None, dtype=None):
    """A new tensor drawn from U(a, b) (float32 draws, cast to dtype)."""
    shape = _shape_arg(shape, "uniform")
    _real(a, "a", "uniform"), _real(b, "b", "uniform")
    u = _ops.rand(*shape, device=device)
    out = u * float(b - a) + float(a)
    return out if dtype is None else out.astype(dtype)


def normal(shape, mean=0.0, std=1.0, device=None, dtype=None):
    """A new tensor drawn from N(mean, std^2)."""
    shape = _shape_arg(shape, "normal")
    _real(mean, "mean", "normal"), _real(std, "std", "normal")
    out = _ops.randn(*shape, device=device) * float(std) + float(mean)
    return out if dtype is None else out.astype(dtype)


def uniform_(tensor, a=0.0, b=1.0):
    """Fills with U(a, b)."""
    t = _tensor(tensor, "uniform_")
    _real(a, "a", "uniform_"), _real(b, "b", "uniform_")
    if b < a:
        raise ValueError(f"[uniform_] expects a <= b, got a={a}, b={b}")
    _set(t, uniform(t.shape, a, b, device=t.device))
    return tensor


def normal_(tensor, mean=0.0, std=1.0):
    """Fills with N(mean, std^2)."""
    t = _tensor(tensor, "normal_")
    _real(mean, "mean", "normal_"), _real(std, "std", "normal_")
    if std < 0:
        raise ValueError(f"[normal_] expects std >= 0, got {std}")
    _set(t, normal(t.shape, mean, std, device=t.device))
    return tensor


def constant_(tensor, val):
    t = _tensor(tensor, "constant_")
    _real(val, "val", "constant_")
    _set(t, _ops.full(tuple(t.shape), float(val), dtype=t.dtype, device=t.device))
    return tensor


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (torch.nn.init.calculate_gain)."""
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                  "conv_transpose2d", "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            negative_slope = param
        else:
            raise ValueError(f"[calculate_gain] negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"[calculate_gain] Unsupported nonlinearity {nonlinearity}")


def calculate_fan_in_and_fan_out(shape):
    """(fan_in, fan_out) of a weight shape: dims 1 and 0 times the receptive
    field (the product of the dims after the first two)."""
    shape = _shape_arg(shape, "calculate_fan_in_and_fan_out")
    if len(shape) < 2:
        raise ValueError("[calculate_fan_in_and_fan_out] Fan in and fan out can not be computed "
                         "for tensor with fewer than 2 dimensions")
    receptive = 1
    for d in shape[2:]:
        receptive *= d
    return shape[1] * receptive, shape[0] * receptive


_calculate_fan_in_and_fan_out = calculate_fan_in_and_fan_out


def _fan(shape, mode, fn):
    if not isinstance(mode, str) or mode.lower() not in ("fan_in", "fan_out"):
        raise ValueError(f"[{fn}] Mode {mode} not supported, please use one of fan_in, fan_out")
    mode = mode.lower()
    fan_in, fan_out = calculate_fan_in_and_fan_out(shape)
    return fan_in if mode == "fan_in" else fan_out


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    """U(-bound, bound), bound = gain * sqrt(3 / fan) (He et al., 2015).
    With a=sqrt(5) (Linear and Conv weights) the bound is 1/sqrt(fan_in)."""
    t = _tensor(tensor, "kaiming_uniform_")
    fan = _fan(t.shape, mode, "kaiming_uniform_")
    if fan == 0:
        return tensor  # torch warns and leaves a zero-element tensor alone
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan)
    _set(t, uniform(t.shape, -bound, bound, device=t.device))
    return tensor


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    """N(0, std^2), std = gain / sqrt(fan)."""
    t = _tensor(tensor, "kaiming_normal_")
    fan = _fan(t.shape, mode, "kaiming_normal_")
    if fan == 0:
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    _set(t, normal(t.shape, 0.0, std, device=t.device))
    return tensor


def xavier_uniform_(tensor, gain=1.0):
    """U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio, 2010)."""
    t = _tensor(tensor, "xavier_uniform_")
    _real(gain, "gain", "xavier_uniform_")
    fan_in, fan_out = calculate_fan_in_and_fan_out(t.shape)
    bound = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    _set(t, uniform(t.shape, -bound, bound, device=t.device))
    return tensor


def xavier_normal_(tensor, gain=1.0):
    """N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out))."""
    t = _tensor(tensor, "xavier_normal_")
    _real(gain, "gain", "xavier_normal_")
    fan_in, fan_out = calculate_fan_in_and_fan_out(t.shape)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    _set(t, normal(t.shape, 0.0, std, device=t.device))
    return tensor
