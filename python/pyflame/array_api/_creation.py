"""Creation functions of the Array API."""
import builtins

import numpy as np

from .. import _core, ops
from .._dlpack import from_dlpack  # noqa: F401
from ._dtypes import default_float, default_int, real_floating
from ._helpers import copy as _copy
from ._helpers import tensor_arg

arange = ops.arange
zeros = ops.zeros
ones = ops.ones
zeros_like = ops.zeros_like
ones_like = ops.ones_like


def asarray(obj, /, *, dtype=None, device=None, copy=None):
    """A tensor from a tensor, NumPy array, DLPack object, scalar or nested sequence.

    ``copy=False`` raises where a copy is needed (a conversion or a transfer);
    ``copy=True`` always gives a new tensor.
    """
    if isinstance(obj, _core.Tensor):
        same = (dtype is None or _core._dtype(dtype, "asarray") == obj.dtype) and \
               (device is None or str(device) == obj.device)
        if copy is False and not same:
            raise ValueError("[asarray] copy=False but the dtype or device differs, which needs a copy")
        out = obj if device is None else obj.to(str(device))
        out = out if dtype is None else _core.astype(out, _core._dtype(dtype, "asarray"))
        return _copy(out) if copy and out is obj else out
    if copy is False:
        raise ValueError("[asarray] copy=False is only possible for a pyflame tensor")
    if dtype is None and not isinstance(obj, np.ndarray) and not hasattr(obj, "__dlpack__"):
        dtype = _python_dtype(obj)
    return ops.tensor(obj, dtype=dtype, device=device)


def _python_dtype(obj):
    """The standard's defaults for Python data: bool, then int64, then float32."""
    flat = np.asarray(obj)
    if flat.dtype == np.bool_:
        return None
    if flat.dtype.kind in "iu":
        return default_int
    return None


def empty(shape, *, dtype=None, device=None):
    """Uninitialized in the standard; zeros here (no cost in a lazy graph)."""
    return ops.zeros(shape, dtype=dtype, device=device)


def empty_like(x, /, *, dtype=None, device=None):
    return ops.zeros_like(x, dtype=dtype, device=device)


def full(shape, fill_value, *, dtype=None, device=None):
    if isinstance(fill_value, _core.Tensor):
        fill_value = fill_value.item()
    return ops.full(shape, fill_value, dtype=dtype, device=device)


def full_like(x, /, fill_value, *, dtype=None, device=None):
    tensor_arg(x, "full_like")
    return ops.full(x.shape, fill_value, dtype=x.dtype if dtype is None else dtype,
                    device=x.device if device is None else device)


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    return ops.eye(n_rows, n_cols, k=k, dtype=dtype, device=device)


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    """``num`` evenly spaced values; the last is exactly ``stop`` when ``endpoint``."""
    num = ops._int(num, "num", "linspace")
    if num < 0:
        raise ValueError(f"[linspace] num must be non-negative, got {num}")
    dtype = default_float if dtype is None else _core._dtype(dtype, "linspace")
    if dtype not in real_floating:
        raise ValueError(f"[linspace] needs a floating-point dtype, got {dtype}")
    start, stop = builtins.float(start), builtins.float(stop)
    div = (num - 1) if endpoint else num
    step = (stop - start) / div if div > 0 else 0.0
    i = ops.arange(num, dtype=dtype, device=device)
    out = _core.add(_core.mul(i, _core.full([], step, dtype, device)), _core.full([], start, dtype, device))
    if endpoint and num > 1:
        out = _core.where(_core.eq(i, _core.full([], num - 1, dtype, device)),
                          _core.full([], stop, dtype, device), out)
    return out


def meshgrid(*arrays, indexing="xy"):
    if indexing not in ("xy", "ij"):
        raise ValueError(f"[meshgrid] indexing must be 'xy' or 'ij', got {indexing!r}")
    for a in arrays:
        if tensor_arg(a, "meshgrid").ndim != 1:
            raise ValueError(f"[meshgrid] expected 1-d tensors, got shape {tuple(a.shape)}")
    n = len(arrays)
    shape = [a.shape[0] for a in arrays]
    if indexing == "xy" and n >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, a in enumerate(arrays):
        axis = i
        if indexing == "xy" and n >= 2 and i < 2:
            axis = 1 - i
        view = [1] * n
        view[axis] = a.shape[0]
        out.append(_core.broadcast_to(_core.reshape(a, view), shape))
    return out


def _tri_mask(x, k, lower):
    n, m = x.shape[-2], x.shape[-1]
    rows = _core.reshape(ops.arange(n, device=x.device), [n, 1])
    cols = _core.reshape(ops.arange(m, device=x.device), [1, m])
    d = _core.sub(cols, rows)
    kk = _core.full([], builtins.float(k), default_int, x.device)
    return _core.le(d, kk) if lower else _core.ge(d, kk)


def _tri(x, k, lower, fn):
    tensor_arg(x, fn)
    if x.ndim < 2:
        raise ValueError(f"[{fn}] expected at least 2 dimensions, got shape {tuple(x.shape)}")
    k = ops._int(k, "k", fn)
    zero = _core.full([], 0.0, x.dtype, x.device)
    return _core.where(_tri_mask(x, k, lower), x, zero)


def tril(x, /, *, k=0):
    return _tri(x, k, True, "tril")


def triu(x, /, *, k=0):
    return _tri(x, k, False, "triu")


def astype(x, dtype, /, *, copy=True, device=None):
    """x converted to ``dtype`` (and moved to ``device``); ``copy=False`` returns
    x itself where nothing changes."""
    tensor_arg(x, "astype")
    dtype = _core._dtype(dtype, "astype")
    if device is not None and str(device) != x.device:
        x = x.to(str(device))
    elif dtype == x.dtype:
        return _copy(x) if copy else x
    return _core.astype(x, dtype)
