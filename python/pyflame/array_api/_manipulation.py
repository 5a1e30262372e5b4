"""Manipulation and indexing functions of the Array API: views and index
ops of the core, composed exactly (no arithmetic on the values)."""
import builtins
import operator

import numpy as np

from .. import _core, ops
from ._helpers import axes_arg, tensor_arg


def _axis(axis, ndim, fn):
    return axes_arg(axis, ndim, fn, allow_none=False)[0]


def broadcast_arrays(*arrays):
    shape = broadcast_shapes(*[tuple(tensor_arg(a, "broadcast_arrays").shape) for a in arrays])
    return [_core.broadcast_to(a, list(shape)) for a in arrays]


def broadcast_shapes(*shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(f"[broadcast_shapes] shapes {shapes} do not broadcast") from None


def broadcast_to(x, /, shape):
    return ops.broadcast_to(tensor_arg(x, "broadcast_to"), tuple(shape))


def concat(arrays, /, *, axis=0):
    arrays = [tensor_arg(a, "concat") for a in arrays]
    if axis is None:
        return _core.concat([_core.reshape(a, [-1]) for a in arrays], 0)
    return _core.concat(arrays, axis)


def stack(arrays, /, *, axis=0):
    return _core.stack([tensor_arg(a, "stack") for a in arrays], axis)


def expand_dims(x, /, axis=0):
    """Inserts size-1 axes; ``axis`` may be a tuple (positions in the result)."""
    tensor_arg(x, "expand_dims")
    items = axis if isinstance(axis, (tuple, list)) else (axis,)
    n = x.ndim + len(items)
    pos = axes_arg(tuple(items), n, "expand_dims", allow_none=False)
    for p in pos:
        x = _core.unsqueeze(x, p)
    return x


def flip(x, /, *, axis=None):
    tensor_arg(x, "flip")
    axes = axes_arg(axis, x.ndim, "flip")
    key = tuple(slice(None, None, -1) if d in axes else slice(None) for d in range(x.ndim))
    return x[key] if key else x


def moveaxis(x, source, destination, /):
    tensor_arg(x, "moveaxis")
    src = source if isinstance(source, (tuple, list)) else (source,)
    dst = destination if isinstance(destination, (tuple, list)) else (destination,)
    if len(src) != len(dst):
        raise ValueError("[moveaxis] source and destination need the same number of axes")
    src = [_axis(s, x.ndim, "moveaxis") for s in src]
    dst = [_axis(d, x.ndim, "moveaxis") for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError("[moveaxis] repeated axis")
    order = [d for d in range(x.ndim) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return _core.transpose(x, order)


def permute_dims(x, /, axes):
    return _core.transpose(tensor_arg(x, "permute_dims"), list(axes))


def reshape(x, /, shape, *, copy=None):
    tensor_arg(x, "reshape")
    out = ops.reshape(x, tuple(shape))
    if copy:
        from ._helpers import copy as _copy
        return _copy(out)
    return out


def squeeze(x, /, axis):
    tensor_arg(x, "squeeze")
    axes = axes_arg(axis, x.ndim, "squeeze", allow_none=False)
    for a in axes:
        if x.shape[a] != 1:
            raise ValueError(f"[squeeze] axis {a} has size {x.shape[a]}, not 1")
    return _core.squeeze(x, axes) if axes else x


def roll(x, /, shift, *, axis=None):
    """Elements shifted along axes (wrapping), as two slices joined."""
    tensor_arg(x, "roll")
    if axis is None:
        return reshape(roll(_core.reshape(x, [-1]), shift, axis=0), x.shape)
    shifts = shift if isinstance(shift, (tuple, list)) else (shift,)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    if len(shifts) != len(axes):
        raise ValueError("[roll] shift and axis need the same length")
    for s, a in zip(shifts, axes):
        a = _axis(a, x.ndim, "roll")
        n = x.shape[a]
        if n == 0:
            continue
        s = operator.index(s) % n
        if s == 0:
            continue
        head = [slice(None)] * x.ndim
        tail = [slice(None)] * x.ndim
        head[a], tail[a] = slice(n - s, None), slice(None, n - s)
        x = _core.concat([x[tuple(head)], x[tuple(tail)]], a)
    return x


def repeat(x, repeats, /, *, axis=None):
    """Repeats each element. An int repeats with a broadcast view; a tensor of
    counts is a data-dependent shape, read (evaluated) when called."""
    tensor_arg(x, "repeat")
    if axis is None:
        x, axis = _core.reshape(x, [-1]), 0
    a = _axis(axis, x.ndim, "repeat")
    n = x.shape[a]
    if isinstance(repeats, _core.Tensor):
        counts = repeats.numpy().astype(np.int64).reshape(-1)
        if counts.size == 1:
            repeats = builtins.int(counts[0])
        else:
            if counts.size != n:
                raise ValueError(f"[repeat] {counts.size} repeat counts for an axis of size {n}")
            if (counts < 0).any():
                raise ValueError("[repeat] repeat counts must be non-negative")
            idx = ops.tensor(np.repeat(np.arange(n), counts), device=x.device)
            return _core.index_select(x, a, idx)
    r = ops._int(repeats, "repeats", "repeat")
    if r < 0:
        raise ValueError(f"[repeat] repeats must be non-negative, got {r}")
    y = _core.unsqueeze(x, a + 1)
    shape = list(y.shape)
    shape[a + 1] = r
    out_shape = list(x.shape)
    out_shape[a] = n * r
    return _core.reshape(_core.contiguous(_core.broadcast_to(y, shape)), out_shape)


def tile(x, repetitions, /):
    tensor_arg(x, "tile")
    reps = [ops._int(r, "repetitions", "tile") for r in repetitions]
    if builtins.any(r < 0 for r in reps):
        raise ValueError(f"[tile] repetitions must be non-negative, got {tuple(reps)}")
    nd = builtins.max(x.ndim, len(reps))
    reps = [1] * (nd - len(reps)) + reps
    shape = [1] * (nd - x.ndim) + list(x.shape)
    y = _core.reshape(x, [v for s in shape for v in (1, s)])
    y = _core.broadcast_to(y, [v for r, s in zip(reps, shape) for v in (r, s)])
    return _core.reshape(_core.contiguous(y), [r * s for r, s in zip(reps, shape)])


def unstack(x, /, *, axis=0):
    tensor_arg(x, "unstack")
    a = _axis(axis, x.ndim, "unstack")
    key = [slice(None)] * x.ndim
    out = []
    for i in range(x.shape[a]):
        key[a] = i
        out.append(x[tuple(key)])
    return tuple(out)


def take(x, indices, /, *, axis=None):
    tensor_arg(x, "take")
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"[take] axis is required for a {x.ndim}-d tensor")
        axis = 0
    a = _axis(axis, x.ndim, "take")
    indices = tensor_arg(indices, "take")
    n = x.shape[a]
    # Negative indices count from the end (the standard allows them).
    if indices.dtype != _core.Dtype.bool and indices.size:
        indices = _core.where(_core.lt(indices, 0), _core.add(indices, n), indices)
    return _core.index_select(x, a, indices)


def take_along_axis(x, indices, /, *, axis=-1):
    tensor_arg(x, "take_along_axis")
    tensor_arg(indices, "take_along_axis")
    if x.ndim != indices.ndim:
        raise ValueError(f"[take_along_axis] x and indices need the same ndim, got {x.ndim} and {indices.ndim}")
    a = _axis(axis, x.ndim, "take_along_axis")
    shape = [builtins.max(s, t) if d != a else t for d, (s, t) in enumerate(zip(x.shape, indices.shape))]
    xs = list(shape)
    xs[a] = x.shape[a]
    n = x.shape[a]
    indices = _core.where(_core.lt(indices, 0), _core.add(indices, n), indices)
    return _core.gather(_core.broadcast_to(x, xs), a, _core.contiguous(_core.broadcast_to(indices, shape)))
