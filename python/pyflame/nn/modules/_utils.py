"""Helpers shared by the layers."""
import collections.abc
import math
import numbers
import operator
from itertools import repeat

from ... import ops as _ops
from .. import init
from ..parameter import Parameter


def _ntuple(n, name):
    def parse(x):
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return tuple(repeat(x, n))
    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")


def check_positive_int(value, what, layer, allow_zero=False):
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"[{layer}] {what} must be an integer, got {value!r}") from None
    if v < 0 or (v == 0 and not allow_zero):
        raise ValueError(f"[{layer}] {what} must be {'non-negative' if allow_zero else 'positive'}"
                         f", got {v}")
    return v


def check_real(value, what, layer, low=None, allow_none=False):
    """A real number (>= low when given; None where allowed), else the
    layer's TypeError/ValueError, at construction rather than at first use."""
    if value is None and allow_none:
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
        raise TypeError(f"[{layer}] {what} must be a real number, got {value!r}")
    if low is not None and value < low:
        raise ValueError(f"[{layer}] {what} must be >= {low}, got {value}")
    return value


def empty_parameter(shape, device=None, dtype=None):
    """A parameter of the given shape; reset_parameters() fills it."""
    return Parameter(_ops.zeros(*shape, dtype=dtype, device=device))


def check_reduction(reduction, layer):
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"[{layer}] reduction must be 'none', 'mean' or 'sum', got "
                         f"{reduction!r}")
    return reduction


def reset_weight_and_bias(module):
    """PyTorch's default init for Linear and Conv layers: kaiming_uniform_(a=sqrt(5))
    on the weight, i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the same bound for
    the bias (zero when fan_in is 0)."""
    init.kaiming_uniform_(module._parameters["weight"], a=math.sqrt(5))
    if module.bias is not None:
        fan_in, _ = init.calculate_fan_in_and_fan_out(module.weight.shape)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        init.uniform_(module._parameters["bias"], -bound, bound)
