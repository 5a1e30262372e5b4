"""Argument normalization shared by the namespace's functions."""
import builtins
import operator

from .. import _core


def tensor_arg(x, fn):
    if not isinstance(x, _core.Tensor):
        raise TypeError(f"[{fn}] expected a pyflame.Tensor, got {type(x).__name__}")
    return x


def axes_arg(axis, ndim, fn, allow_none=True):
    """None (all axes), an int or a tuple as sorted non-negative axes."""
    if axis is None:
        if not allow_none:
            raise TypeError(f"[{fn}] axis is required")
        return list(range(ndim))
    items = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in items:
        if isinstance(a, builtins.bool):
            raise TypeError(f"[{fn}] axis must be an integer, got a bool")
        a = operator.index(a)
        if not -ndim <= a < builtins.max(ndim, 1) or (ndim == 0 and a not in (0, -1)):
            raise ValueError(f"[{fn}] axis {a} is out of range for a {ndim}-d tensor")
        a = a % builtins.max(ndim, 1)
        if a in out:
            raise ValueError(f"[{fn}] repeated axis {a}")
        out.append(a)
    return sorted(out)


def scalar_like(value, x):
    """A 0-d tensor of x's dtype and device."""
    return _core.full([], builtins.float(value), x.dtype, x.device)


def copy(x):
    """A new node with x's values (every dtype; keeps -0.0 and NaN)."""
    return _core.mul(x, scalar_like(1, x))


def zero_size(x):
    return 0 in x.shape
