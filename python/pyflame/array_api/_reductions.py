"""Statistical, utility, searching, sorting and set functions of the Array
API. Reductions run on the core's kernels; nonzero and unique_* have
data-dependent shapes and evaluate their input when called."""
import builtins
import math

import numpy as np

from .. import _core, ops
from ._dtypes import default_int, integral, real_floating
from ._helpers import axes_arg, scalar_like, tensor_arg

_bool = _core.Dtype.bool


def _reduce(core_fn, x, axis, keepdims, fn, dtype=None):
    tensor_arg(x, fn)
    axes = axes_arg(axis, x.ndim, fn)
    if dtype is not None:
        x = _core.astype(x, _core._dtype(dtype, fn))
    if x.ndim == 0 or not axes:
        return x
    return core_fn(x, axes, keepdims)


def _sum_dtype(x, dtype):
    """The standard's accumulation dtype: integers (and bool) widen to the default int."""
    if dtype is not None:
        return dtype
    return default_int if x.dtype == _bool or x.dtype in integral else None


def sum(x, /, *, axis=None, dtype=None, keepdims=False):  # noqa: A001
    return _reduce(_core.sum, x, axis, keepdims, "sum", _sum_dtype(tensor_arg(x, "sum"), dtype))


def prod(x, /, *, axis=None, dtype=None, keepdims=False):
    return _reduce(_core.prod, x, axis, keepdims, "prod", _sum_dtype(tensor_arg(x, "prod"), dtype))


def mean(x, /, *, axis=None, keepdims=False):
    tensor_arg(x, "mean")
    if x.dtype not in real_floating:
        raise ValueError(f"[mean] needs a floating-point tensor, got {x.dtype}")
    return _reduce(_core.mean, x, axis, keepdims, "mean")


def _extremum(core_fn, x, axis, keepdims, fn):
    tensor_arg(x, fn)
    axes = axes_arg(axis, x.ndim, fn)
    if builtins.any(x.shape[a] == 0 for a in axes) or (x.ndim == 0 and x.size == 0):
        raise ValueError(f"[{fn}] zero-size reduction has no identity (shape {tuple(x.shape)}, axis {axis})")
    return _reduce(core_fn, x, axis, keepdims, fn)


def max(x, /, *, axis=None, keepdims=False):  # noqa: A001
    return _extremum(_core.max, x, axis, keepdims, "max")


def min(x, /, *, axis=None, keepdims=False):  # noqa: A001
    return _extremum(_core.min, x, axis, keepdims, "min")


def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    """Variance over ``axis``, divided by N - correction (NaN where that is <= 0)."""
    tensor_arg(x, "var")
    if x.dtype not in real_floating:
        raise ValueError(f"[var] needs a floating-point tensor, got {x.dtype}")
    axes = axes_arg(axis, x.ndim, "var")
    n = math.prod(x.shape[a] for a in axes) if axes else 1
    if not axes or x.ndim == 0:
        d = _core.sub(x, x)
    else:
        d = _core.sub(x, _core.mean(x, axes, True))
    ss = _core.sum(_core.mul(d, d), axes, keepdims) if axes and x.ndim else _core.mul(d, d)
    denom = n - builtins.float(correction)
    return _core.div(ss, scalar_like(denom if denom > 0 else math.nan, ss)) if denom > 0 else \
        _core.mul(ss, scalar_like(math.nan, ss))


def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    return _core.sqrt(var(x, axis=axis, correction=correction, keepdims=keepdims))


def _cumulative(x, axis, dtype, include_initial, fn):
    tensor_arg(x, fn)
    if axis is None:
        if x.ndim > 1:
            raise ValueError(f"[{fn}] axis is required for a {x.ndim}-d tensor")
        axis = 0
    if x.ndim == 0:
        raise ValueError(f"[{fn}] needs at least a 1-d tensor")
    a = axes_arg(axis, x.ndim, fn, allow_none=False)[0]
    dtype = _sum_dtype(x, dtype)
    if dtype is not None:
        x = _core.astype(x, _core._dtype(dtype, fn))
    return a, x


def _with_initial(out, a, value):
    shape = list(out.shape)
    shape[a] = 1
    return _core.concat([_core.full(shape, value, out.dtype, out.device), out], a)


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    a, x = _cumulative(x, axis, dtype, include_initial, "cumulative_sum")
    out = _core.cumsum(x, a, x.dtype) if x.shape[a] else x
    return _with_initial(out, a, 0.0) if include_initial else out


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    """Running product as a log-depth scan of multiplications (exact for integers)."""
    a, x = _cumulative(x, axis, dtype, include_initial, "cumulative_prod")
    n = x.shape[a]
    out, shift = x, 1
    while shift < n:
        shape = list(out.shape)
        shape[a] = shift
        key = [slice(None)] * out.ndim
        key[a] = slice(0, n - shift)
        prev = _core.concat([_core.full(shape, 1.0, out.dtype, out.device), out[tuple(key)]], a)
        out = _core.mul(out, prev)
        shift *= 2
    return _with_initial(out, a, 1.0) if include_initial else out


def _truthy(x):
    return x if x.dtype == _bool else _core.ne(x, scalar_like(0, x))


def all(x, /, *, axis=None, keepdims=False):  # noqa: A001
    tensor_arg(x, "all")
    f = _core.astype(_core.logical_not(x), default_int)
    s = _reduce(_core.sum, f, axis, keepdims, "all")
    return _core.eq(s, scalar_like(0, s))


def any(x, /, *, axis=None, keepdims=False):  # noqa: A001
    tensor_arg(x, "any")
    f = _core.astype(_truthy(x), default_int)
    s = _reduce(_core.sum, f, axis, keepdims, "any")
    return _core.ne(s, scalar_like(0, s))


def count_nonzero(x, /, *, axis=None, keepdims=False):
    tensor_arg(x, "count_nonzero")
    return _reduce(_core.sum, _core.astype(_truthy(x), default_int), axis, keepdims, "count_nonzero")


def diff(x, /, *, axis=-1, n=1, prepend=None, append=None):
    tensor_arg(x, "diff")
    if x.ndim == 0:
        raise ValueError("[diff] needs at least a 1-d tensor")
    a = axes_arg(axis, x.ndim, "diff", allow_none=False)[0]
    n = ops._int(n, "n", "diff")
    if n < 0:
        raise ValueError(f"[diff] n must be non-negative, got {n}")
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        x = _core.concat(parts, a)
    for _ in range(n):
        m = x.shape[a]
        hi = [slice(None)] * x.ndim
        lo = [slice(None)] * x.ndim
        hi[a], lo[a] = slice(1, m), slice(0, builtins.max(m - 1, 0))
        x = _core.logical_xor(x[tuple(hi)], x[tuple(lo)]) if x.dtype == _bool else \
            _core.sub(x[tuple(hi)], x[tuple(lo)])
    return x


def argmax(x, /, *, axis=None, keepdims=False):
    return _arg(_core.argmax, x, axis, keepdims, "argmax")


def argmin(x, /, *, axis=None, keepdims=False):
    return _arg(_core.argmin, x, axis, keepdims, "argmin")


def _arg(core_fn, x, axis, keepdims, fn):
    tensor_arg(x, fn)
    if x.size == 0:
        raise ValueError(f"[{fn}] attempt to get {fn} of an empty tensor")
    if axis is None:
        out = core_fn(x, None, False)
        return _core.reshape(out, [1] * x.ndim) if keepdims else out
    return core_fn(x, axes_arg(axis, x.ndim, fn, allow_none=False)[0], keepdims)


def argsort(x, /, *, axis=-1, descending=False, stable=True):
    tensor_arg(x, "argsort")
    if x.ndim == 0:
        return _core.full([], 0.0, default_int, x.device)
    return _core.argsort(x, axis, descending, stable)


def sort(x, /, *, axis=-1, descending=False, stable=True):
    tensor_arg(x, "sort")
    if x.ndim == 0:
        return x
    return _core.sort(x, axis, descending, stable)[0]


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    """Insertion points of x2 in the sorted 1-d x1: counts of x1 below (left)
    or not above (right) each value, an (M, N) comparison on the device."""
    tensor_arg(x1, "searchsorted")
    if not isinstance(x2, _core.Tensor):
        x2 = ops.tensor(x2, device=x1.device)
    if x1.ndim != 1:
        raise ValueError(f"[searchsorted] x1 must be 1-d, got shape {tuple(x1.shape)}")
    if side not in ("left", "right"):
        raise ValueError(f"[searchsorted] side must be 'left' or 'right', got {side!r}")
    if sorter is not None:
        x1 = _core.index_select(x1, 0, tensor_arg(sorter, "searchsorted"))
    v = _core.unsqueeze(x2, x2.ndim)
    below = _core.lt(x1, v) if side == "left" else _core.le(x1, v)
    if x1.dtype in real_floating:  # NaN sorts last: every number is below NaN
        isnan_v = _core.isnan(v)
        below = _core.logical_or(below, _core.logical_and(isnan_v, _core.logical_not(_core.isnan(x1))))
        if side == "right":
            below = _core.logical_or(below, _core.logical_and(isnan_v, _core.isnan(x1)))
    out = _core.sum(_core.astype(below, default_int), [x2.ndim], False)
    return out


def nonzero(x, /):
    """Indices of the non-zero elements, one int64 tensor per axis. The count
    is data-dependent: x is evaluated when this is called."""
    tensor_arg(x, "nonzero")
    if x.ndim == 0:
        raise ValueError("[nonzero] not defined for 0-d tensors")
    idx = np.nonzero(x.numpy())
    return tuple(ops.tensor(i.astype(np.int64), device=x.device) for i in idx)


def where(condition, x1, x2, /):
    return _core.where(condition, x1, x2)


def _unique(x, fn, index=False, inverse=False, counts=False):
    tensor_arg(x, fn)
    a = x.numpy()
    flat = a.reshape(-1)
    # NumPy with equal_nan=False: every NaN is its own value, as the standard asks.
    res = np.unique(flat, return_index=index, return_inverse=inverse, return_counts=counts,
                    equal_nan=False)
    res = res if isinstance(res, tuple) else (res,)
    out = [ops.tensor(np.ascontiguousarray(res[0]), dtype=x.dtype, device=x.device)]
    k = 1
    for name, flag in (("index", index), ("inverse", inverse), ("counts", counts)):
        if flag:
            r = res[k].astype(np.int64)
            if name == "inverse":
                r = r.reshape(a.shape)
            out.append(ops.tensor(r, device=x.device))
            k += 1
    return out


class UniqueAllResult(tuple):
    _fields = ("values", "indices", "inverse_indices", "counts")
    values = property(lambda s: s[0])
    indices = property(lambda s: s[1])
    inverse_indices = property(lambda s: s[2])
    counts = property(lambda s: s[3])


class UniqueCountsResult(tuple):
    values = property(lambda s: s[0])
    counts = property(lambda s: s[1])


class UniqueInverseResult(tuple):
    values = property(lambda s: s[0])
    inverse_indices = property(lambda s: s[1])


def unique_all(x, /):
    """Evaluates x (data-dependent shape)."""
    return UniqueAllResult(_unique(x, "unique_all", True, True, True))


def unique_counts(x, /):
    return UniqueCountsResult(_unique(x, "unique_counts", counts=True))


def unique_inverse(x, /):
    return UniqueInverseResult(_unique(x, "unique_inverse", inverse=True))


def unique_values(x, /):
    return _unique(x, "unique_values")[0]
