"""Helpers shared by the layers."""
import collections.abc
import operator
from itertools import repeat

from ... import ops as _ops
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


def empty_parameter(shape, device=None, dtype=None):
    """A parameter of the given shape; reset_parameters() fills it."""
    return Parameter(_ops.zeros(*shape, dtype=dtype, device=device))


def check_reduction(reduction, layer):
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"[{layer}] reduction must be 'none', 'mean' or 'sum', got "
                         f"{reduction!r}")
    return reduction
