"""Python-side signatures for the ops: varargs shapes, defaults and
conversions; the work happens in the C++ core."""
import builtins
import operator

import numpy as np

from . import _core
from ._convert import to_array


def _shape(args, fn, allow_minus_one=False):
    """Accepts f(2, 3) and f((2, 3)) alike."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    try:
        shape = [operator.index(a) for a in args]
    except TypeError:
        raise ValueError(f"[{fn}] shape must be integers, got {args!r}") from None
    if not allow_minus_one and any(d < 0 for d in shape):
        raise ValueError(f"[{fn}] negative dimension in shape {tuple(shape)}")
    return shape


def _leaf(t, requires_grad):
    """Creation functions' ``requires_grad=True``: the result is a grad leaf."""
    if requires_grad:
        t = _core.detach(t) if t.requires_grad else t
        t.requires_grad = True
    return t


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A tensor holding a copy of ``data`` (a list, scalar, NumPy array or tensor)."""
    if dtype is not None:
        dtype = _core._dtype(dtype, "tensor")
    if isinstance(data, _core.Tensor):
        out = data if device is None else data.to(device)
    else:
        out = _core.from_numpy(to_array(data), device)
    return _leaf(out if dtype is None else out.astype(dtype), requires_grad)


asarray = tensor


def zeros(*shape, dtype=None, device=None, requires_grad=False):
    return _leaf(_core.full(_shape(shape, "zeros"), 0.0, dtype, device, "zeros"), requires_grad)


def ones(*shape, dtype=None, device=None, requires_grad=False):
    return _leaf(_core.full(_shape(shape, "ones"), 1.0, dtype, device, "ones"), requires_grad)


def full(shape, fill_value, dtype=None, device=None):
    if isinstance(shape, builtins.int):
        shape = (shape,)
    if dtype is None:
        dtype = "bool" if isinstance(fill_value, bool) else (
            "int64" if isinstance(fill_value, builtins.int) else "float32")
    dtype = _core._dtype(dtype, "full")
    if isinstance(fill_value, (builtins.int, np.integer)) and builtins.abs(fill_value) > 2**53:
        # Beyond float64's exact integers: fill on the host rather than round.
        out = tensor(np.full(_shape((shape,), "full"), fill_value, dtype=np.int64), device=device)
        return out.astype(dtype)
    try:
        value = builtins.float(fill_value)
    except (TypeError, ValueError):
        raise ValueError(f"[full] fill_value must be a number, got {fill_value!r}") from None
    return _core.full(_shape((shape,), "full"), value, dtype, device)


def zeros_like(x, dtype=None, device=None):
    return _core.full(list(x.shape), 0.0, x.dtype if dtype is None else dtype,
                      x.device if device is None else device, "zeros_like")


def ones_like(x, dtype=None, device=None):
    return _core.full(list(x.shape), 1.0, x.dtype if dtype is None else dtype,
                      x.device if device is None else device, "ones_like")


def arange(start, stop=None, step=1, dtype=None, device=None):
    """Like numpy.arange: integer arguments give int64 unless a dtype is given."""
    if stop is None:
        start, stop = 0, start
    if dtype is None:
        ints = all(isinstance(v, (builtins.int, np.integer)) for v in (start, stop, step))
        dtype = "int64" if ints else "float32"
    return _core.arange(builtins.float(start), builtins.float(stop), builtins.float(step), dtype, device)


def eye(n, m=None, k=0, dtype=None, device=None):
    return _core.eye(n, m, k, dtype, device)


def rand(*shape, dtype=None, device=None, requires_grad=False):
    return _leaf(_core.rand(_shape(shape, "rand"), dtype, device), requires_grad)


def randn(*shape, dtype=None, device=None, requires_grad=False):
    return _leaf(_core.randn(_shape(shape, "randn"), dtype, device), requires_grad)


def randint(low, high=None, size=(), dtype=None, device=None):
    """Integers in [low, high); ``randint(high, size=...)`` starts at 0."""
    if high is None:
        low, high = 0, low
    if isinstance(size, builtins.int):
        size = (size,)
    return _core.randint(low, high, _shape((size,), "randint"), dtype, device)


def reshape(x, *shape):
    return _core.reshape(x, _shape(shape, "reshape", allow_minus_one=True))


def transpose(x, *axes):
    """Reverses the axes, or permutes them as given (NumPy semantics)."""
    if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
        axes = axes[0]
    return _core.transpose(x, list(axes) if axes else None)


def squeeze(x, axis=None):
    return _core.squeeze(x, axis)


def broadcast_to(x, *shape):
    return _core.broadcast_to(x, _shape(shape, "broadcast_to"))


def eval(*tensors):  # noqa: A001  (pf.eval, as in MLX)
    """Evaluates the given tensors (and lists of tensors) in one pass."""
    flat = []
    for t in tensors:
        flat.extend(t if isinstance(t, (list, tuple)) else [t])
    for t in flat:
        if not isinstance(t, _core.Tensor):
            raise ValueError(f"[eval] expected tensors, got {type(t).__name__}")
    _core.eval(flat)
    return tensors[0] if len(tensors) == 1 else tensors


def device_info():
    return _core.device_info()
