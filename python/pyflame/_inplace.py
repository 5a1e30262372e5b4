"""In-place updates on a lazy graph: item assignment, the ``_`` methods and
``+=`` (design: docs/design/inplace.md).

A write never mutates a graph node. It records a new node computing the
updated value (``pf.put`` at the written positions, or the op's result) and
rebinds the written tensor's handle to it; evaluation reuses the old buffer
when nothing else can observe it (buffer donation). Views made through
indexing and the shape methods remember their base (``_pf_base``) and how to
derive themselves from it (``_pf_view_fn``): a write through a view is a write
of the base at the view's positions, and after any write the base's live views
are derived again, so every view sees it, as views of shared storage do in
PyTorch. Version counters (``_version``) implement PyTorch's autograd rules.
"""
import functools
import weakref

import numpy as np

from . import _core
from ._convert import scalar_full, scalar_value, to_array
from ._core import Tensor

_INT64 = _core.Dtype.int64


# ---------------------------------------------------------------- views

def _track(base, out, derive):
    """Records ``out`` (made by ``derive(base)``) as a view of base's storage."""
    if not isinstance(out, Tensor) or out is base:
        return out
    # The same node (a squeeze with nothing to squeeze, contiguous() of a
    # row-major tensor) is an alias: PyTorch returns a view there too.
    if out._node_id != base._node_id and not out._is_view_of(base):
        return out
    root = getattr(base, "_pf_base", None)
    if root is None:
        root, fn = base, derive
    else:
        parent = base._pf_view_fn
        fn = lambda r: derive(parent(r))  # noqa: E731
    out._pf_base = root
    out._pf_view_fn = fn
    views = root.__dict__.setdefault("_pf_views", [])
    views.append(weakref.ref(out))
    if len(views) % 64 == 0:  # drop the dead ones now and then
        views[:] = [r for r in views if r() is not None]
    return out


def viewing(fn):
    """Wraps a shape op so that its view results are tracked."""
    @functools.wraps(fn)
    def wrapper(x, *args, **kwargs):
        out = fn(x, *args, **kwargs)
        if isinstance(x, Tensor):
            _track(x, out, lambda b: fn(b, *args, **kwargs))
        return out
    return wrapper


def split_viewing(fn):
    """Like viewing, for ops returning a list of views (split, chunk)."""
    @functools.wraps(fn)
    def wrapper(x, *args, **kwargs):
        outs = fn(x, *args, **kwargs)
        if isinstance(x, Tensor):
            for i, o in enumerate(outs):
                _track(x, o, lambda b, i=i: fn(b, *args, **kwargs)[i])
        return outs
    return wrapper


def _live_views(root):
    refs = root.__dict__.get("_pf_views")
    if not refs:
        return []
    return [v for v in (r() for r in refs) if v is not None]


def _positions(t, root):
    """Flat row-major positions in root of t's elements (int64, t's shape)."""
    dev = root.device
    if root._is_contiguous:
        (strides, off), (_, roff) = t._layout, root._layout
        pos = _core.full([], float(off - roff), _INT64, dev)
        for d, (n, s) in enumerate(zip(t.shape, strides)):
            if n > 1:
                shape = [1] * t.ndim
                shape[d] = n
                step = _core.arange(0.0, float(n), 1.0, _INT64, dev) * s
                pos = pos + _core.reshape(step, shape)
        return _core.broadcast_to(pos, list(t.shape))
    grid = _core.reshape(_core.arange(0.0, float(root.size), 1.0, _INT64, dev), list(root.shape))
    return t._pf_view_fn(grid)


# ---------------------------------------------------------------- writes

_KIND = {"bool": 0}


def _scalar_dtype(v):
    if isinstance(v, (bool, np.bool_)):
        return _core.Dtype.bool
    return _core.Dtype.float32 if isinstance(v, (float, np.floating)) else _core.Dtype.int64


def _kind(dtype):
    return 2 if dtype.is_floating_point else _KIND.get(str(dtype), 1)


def _conform(value, shape, dtype, device, fn, strict):
    """value as a tensor of `shape` and `dtype`. strict (arithmetic): no
    float -> int or int -> bool result casts, as in PyTorch."""
    if not isinstance(value, Tensor):
        if isinstance(value, (bool, int, float, np.number, np.bool_)):
            if strict and _kind(_scalar_dtype(value)) > _kind(dtype):
                raise RuntimeError(f"[{fn}] result type {_scalar_dtype(value)} can't be cast "
                                   f"to the desired output type {dtype}")
            return scalar_full(shape, value, dtype, device, fn)
        value = _core.from_numpy(to_array(value, fn), device)
    if value.device != device:
        value = value.to(device)
    if value.dtype != dtype:
        if strict and _kind(value.dtype) > _kind(dtype):
            raise RuntimeError(f"[{fn}] result type {value.dtype} can't be cast to the desired "
                               f"output type {dtype}")
        value = value.astype(dtype)
    if tuple(value.shape) != tuple(shape):
        try:
            ok = np.broadcast_shapes(tuple(value.shape), tuple(shape)) == tuple(shape)
        except ValueError:
            ok = False
        if not ok:
            raise RuntimeError(f"[{fn}] output with shape {tuple(shape)} doesn't match the "
                               f"broadcast shape of a value of shape {tuple(value.shape)}")
        value = _core.broadcast_to(value, list(shape))
    return value


def _check_writable(t, root, fn):
    if _core.is_grad_enabled() and root.requires_grad and root.is_leaf:
        what = "a leaf tensor" if t is root else "a view of a leaf tensor"
        raise RuntimeError(f"[{fn}] {what} that requires grad cannot be modified in place; "
                           "update it under pf.no_grad() (as optimizers do) or use the "
                           "out-of-place op")
    if t is not root:
        strides, _ = t._layout
        if any(s == 0 and n > 1 for s, n in zip(strides, t.shape)):
            raise RuntimeError(f"[{fn}] cannot write through an expanded view: more than one "
                               "element refers to the same memory location; clone() it first")


def write(t, fn, compute, index=None, strict=False):
    """Makes the new version of t: compute() gives t's new value (or, with
    ``index``, int64 flat positions of t, the values at those positions).
    The storage's views see it; its version counter counts it."""
    root = getattr(t, "_pf_base", None)
    if root is None:
        root = t
    _check_writable(t, root, fn)
    views = _live_views(root)
    # Bump first: nodes recorded from here on read the new count, so only
    # those recorded before the write fail the check at backward().
    root._bump_version()
    for v in views:
        v._share_version(root)
    if t is not root and not any(v is t for v in views):
        t._share_version(root)
    first = _core._next_node_id()
    shape = t.shape if index is None else index.shape
    value = _conform(compute(), shape, t.dtype, t.device, fn, strict)
    if index is None and t is root:
        new_root = _core.contiguous(value)
        if new_root._node_id < first:  # the caller's own tensor: copy, never alias
            new_root = _core.clone(new_root)
    else:
        pos = _positions(t, root) if t is not root else None
        if index is not None:
            if pos is None:
                pos = index
            else:
                flat = _core.index_select(_core.reshape(pos, [-1]), 0, _core.reshape(index, [-1]))
                pos = _core.reshape(flat, list(index.shape))
        new_root = _core.put(root, pos, value)
    new_root._share_version(root)
    root._replace(new_root)
    root._share_version(new_root)  # a grad leaf's handle was detached: keep counting
    for v in views:
        nv = v._pf_view_fn(root)
        nv._share_version(root)
        v._replace(nv)
    return t


# ---------------------------------------------------------------- indexing

def _is_advanced(key):
    items = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, (Tensor, np.ndarray, list)) for k in items)


def _host_positions(x, key, fn):
    """NumPy's advanced indexing of x's flat positions (an int64 tensor on
    x's device): tensors in the key are read back to the host."""
    items = key if isinstance(key, tuple) else (key,)
    conv = []
    for k in items:
        if isinstance(k, Tensor):
            k = k.numpy()
        elif isinstance(k, list):
            k = np.asarray(k)
            if k.size == 0:
                k = k.astype(np.int64)
        conv.append(k)
    grid = np.arange(x.size, dtype=np.int64).reshape(x.shape)
    try:
        pos = grid[tuple(conv)]
    except IndexError as e:
        raise IndexError(f"[{fn}] {e}") from None
    return _core.from_numpy(np.ascontiguousarray(pos), x.device)


_basic_getitem = Tensor.__getitem__


def getitem(self, key):
    if _is_advanced(key):
        pos = _host_positions(self, key, "getitem")
        flat = _core.index_select(_core.reshape(self, [-1]), 0, _core.reshape(pos, [-1]))
        return _core.reshape(flat, list(pos.shape))
    out = _basic_getitem(self, key)
    return _track(self, out, lambda b: _basic_getitem(b, key))


def setitem(self, key, value):
    if _is_advanced(key):
        pos = _host_positions(self, key, "setitem")
        write(self, "setitem", lambda: value, index=pos)
        return
    view = getitem(self, key)
    if view._node_id == self._node_id:  # x[...] and x[()]: x itself
        view = self
    elif getattr(view, "_pf_base", None) is None:  # not a view: write its positions
        write(self, "setitem", lambda: value, index=_host_positions(self, key, "setitem"))
        return
    write(view, "setitem", lambda: value)


# ---------------------------------------------------------------- the `_` methods

def _scaled(other, alpha):
    return other if alpha is None or alpha == 1 else other * alpha


def add_(self, other, *, alpha=None):
    return write(self, "add_", lambda: self + _scaled(other, alpha), strict=True)


def sub_(self, other, *, alpha=None):
    return write(self, "sub_", lambda: self - _scaled(other, alpha), strict=True)


def mul_(self, other):
    return write(self, "mul_", lambda: self * other, strict=True)


def div_(self, other):
    return write(self, "div_", lambda: self / other, strict=True)


def pow_(self, other):
    return write(self, "pow_", lambda: self ** other, strict=True)


def zero_(self):
    return write(self, "zero_", lambda: 0)


def fill_(self, value):
    if isinstance(value, Tensor) and value.ndim != 0:
        raise RuntimeError(f"[fill_] only supports 0-dimension value tensors, got shape "
                           f"{tuple(value.shape)}")
    if not isinstance(value, Tensor):
        scalar_value(value, self.dtype, "fill_")  # a number, as torch's fill_ takes
    return write(self, "fill_", lambda: value)


def copy_(self, src):
    if not isinstance(src, Tensor):
        raise TypeError(f"[copy_] src must be a pyflame.Tensor, got {type(src).__name__}")
    return write(self, "copy_", lambda: src)


def clamp_(self, min=None, max=None):  # noqa: A002  (torch's names)
    return write(self, "clamp_", lambda: clamp(self, min, max), strict=True)


def clamp(x, min=None, max=None):  # noqa: A002
    """Scalar or tensor bounds (tensors broadcast), as torch.clamp."""
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        out = x
        if min is not None:
            out = _core.maximum(out, min)
        if max is not None:
            out = _core.minimum(out, max)
        return out
    return _core.clamp(x, min, max)


def masked_fill(x, mask, value):
    """x with ``value`` where the bool ``mask`` (broadcast to x) is true."""
    if not isinstance(mask, Tensor) or mask.dtype != _core.Dtype.bool:
        what = mask.dtype if isinstance(mask, Tensor) else type(mask).__name__
        raise TypeError(f"[masked_fill] mask must be a bool tensor, got {what}")
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError("[masked_fill] only supports a 0-dimension value tensor, got "
                               f"shape {tuple(value.shape)}")
        value = value.astype(x.dtype)
    else:
        value = scalar_full([], value, x.dtype, x.device, "masked_fill")
    return _core.where(mask, value, x)


def masked_fill_(self, mask, value):
    out = masked_fill(self, mask, value)  # checks first; the value reads self's old version
    if tuple(out.shape) != tuple(self.shape):
        raise RuntimeError(f"[masked_fill_] mask of shape {tuple(mask.shape)} does not "
                           f"broadcast to {tuple(self.shape)}")
    return write(self, "masked_fill_", lambda: masked_fill(self, mask, value))


def scatter(x, dim, index, src=None, value=None):
    """torch.scatter with a tensor ``src`` or a scalar ``value``."""
    if (src is None) == (value is None):
        raise TypeError("[scatter] give exactly one of src and value")
    return _core.scatter(x, dim, index, src if src is not None else value)


def scatter_(self, dim, index, src=None, value=None):
    return write(self, "scatter_", lambda: scatter(self, dim, index, src, value))


def scatter_add_(self, dim, index, src):
    return write(self, "scatter_add_", lambda: _core.scatter_add(self, dim, index, src))


def index_add(x, dim, index, source, alpha=1):
    """torch.index_add: x with ``alpha * source`` added at entries ``index``
    (1-d) along ``dim``; repeated indices accumulate. Floating point."""
    if not isinstance(index, Tensor) or index.ndim > 1:
        raise ValueError("[index_add] index must be a 0-d or 1-d integer tensor")
    if not isinstance(source, Tensor):
        raise TypeError(f"[index_add] source must be a tensor, got {type(source).__name__}")
    nd = x.ndim
    d = dim + nd if dim < 0 else dim
    if not 0 <= d < max(nd, 1):
        raise ValueError(f"[index_add] dim {dim} is out of range for a {nd}-d tensor")
    index = _core.reshape(index, [-1])
    src = source if source.ndim else _core.reshape(source, [1] * max(nd, 1))
    if src.ndim != max(nd, 1) or src.shape[d] != index.shape[0]:
        raise ValueError(f"[index_add] source of shape {tuple(source.shape)} does not match "
                         f"index of length {index.shape[0]} along dim {dim} of "
                         f"{tuple(x.shape)}")
    shape = [1] * src.ndim
    shape[d] = -1
    idx = _core.broadcast_to(_core.reshape(index, shape), list(src.shape))
    return _core.scatter_add(x, d, idx, _scaled(src, alpha if alpha != 1 else None))


def index_add_(self, dim, index, source, alpha=1):
    return write(self, "index_add_", lambda: index_add(self, dim, index, source, alpha))


def iop(method):
    """``x += y`` and friends: the in-place method, returning x."""
    def m(self, other):
        return method(self, other)
    m.__name__ = method.__name__
    return m
