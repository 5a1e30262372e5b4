"""Linear algebra: the Array API's ``linalg`` extension (``pf.linalg`` and
``pyflame.array_api.linalg``).

Decompositions (cholesky, inv, det, slogdet, solve, qr, eigh, svd) run LAPACK
on the CPU and hipSOLVER (AMD) or cuSOLVER (NVIDIA) on 'rocm'. They compute in
float32 for integer and 16-bit inputs; inv, det, slogdet, solve, cholesky and
eigh are differentiable, qr and svd not yet. The rest are compositions of
differentiable ops.
"""
import builtins
import math
import numbers
import operator
from collections import namedtuple

from . import _core, ops

EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
QRResult = namedtuple("QRResult", ["Q", "R"])
SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])

matmul = _core.matmul


def _t(x, fn):
    if not isinstance(x, _core.Tensor):
        raise TypeError(f"[linalg.{fn}] expected a pyflame.Tensor, got {type(x).__name__}")
    return x


def _float(x):
    return x if x.dtype.is_floating_point else _core.astype(x, "float32")


def cholesky(x, /, *, upper=False):
    return _core._linalg_cholesky(_t(x, "cholesky"), upper)


def inv(x, /):
    return _core._linalg_inv(_t(x, "inv"))


def det(x, /):
    return _core._linalg_det(_t(x, "det"))


def slogdet(x, /):
    return SlogdetResult(*_core._linalg_slogdet(_t(x, "slogdet")))


def solve(x1, x2, /):
    return _core._linalg_solve(_t(x1, "solve"), _t(x2, "solve"))


def qr(x, /, *, mode="reduced"):
    if mode not in ("reduced", "complete"):
        raise ValueError(f"[linalg.qr] mode must be 'reduced' or 'complete', got {mode!r}")
    return QRResult(*_core._linalg_qr(_t(x, "qr"), mode == "complete"))


def eigh(x, /):
    return EighResult(*_core._linalg_eigh(_t(x, "eigh")))


def eigvalsh(x, /):
    return _core._linalg_eigvalsh(_t(x, "eigvalsh"))


def svd(x, /, *, full_matrices=True):
    return SVDResult(*_core._linalg_svd(_t(x, "svd"), builtins.bool(full_matrices)))


def svdvals(x, /):
    return _core._linalg_svdvals(_t(x, "svdvals"))


def matrix_transpose(x, /):
    if _t(x, "matrix_transpose").ndim < 2:
        raise ValueError(f"[matrix_transpose] expected at least 2 dimensions, got shape {tuple(x.shape)}")
    return _core.swapaxes(x, -1, -2)


def diagonal(x, /, *, offset=0):
    """The diagonal ``offset`` of each matrix (..., M, N), gathered from a flat view."""
    if _t(x, "diagonal").ndim < 2:
        raise ValueError(f"[linalg.diagonal] expected at least 2 dimensions, got shape {tuple(x.shape)}")
    offset = ops._int(offset, "offset", "linalg.diagonal")
    m, n = x.shape[-2], x.shape[-1]
    r0, c0 = builtins.max(-offset, 0), builtins.max(offset, 0)
    length = builtins.max(0, builtins.min(m - r0, n - c0))
    flat = _core.reshape(_core.contiguous(x), list(x.shape[:-2]) + [m * n])
    i = ops.arange(length, device=x.device)
    idx = _core.add(_core.mul(i, n + 1), r0 * n + c0) if length else i  # (i + r0, i + c0)
    return _core.index_select(flat, flat.ndim - 1, idx)


def trace(x, /, *, offset=0, dtype=None):
    d = diagonal(x, offset=offset)
    if dtype is None and (d.dtype == _core.Dtype.bool or not d.dtype.is_floating_point):
        dtype = "int64"
    if dtype is not None:
        d = _core.astype(d, _core._dtype(dtype, "linalg.trace"))
    return _core.sum(d, [d.ndim - 1], False)


def outer(x1, x2, /):
    if _t(x1, "outer").ndim != 1 or _t(x2, "outer").ndim != 1:
        raise ValueError(f"[linalg.outer] expected 1-d tensors, got {tuple(x1.shape)} and {tuple(x2.shape)}")
    return _core.mul(_core.unsqueeze(x1, 1), _core.unsqueeze(x2, 0))


def vecdot(x1, x2, /, *, axis=-1):
    """Dot products along ``axis`` (negative: counted from the end), batch dims broadcast."""
    _t(x1, "vecdot"), _t(x2, "vecdot")
    if x1.ndim == 0 or x2.ndim == 0 or not -builtins.min(x1.ndim, x2.ndim) <= axis < 0:
        raise ValueError(f"[vecdot] axis {axis} must be negative and within shapes "
                         f"{tuple(x1.shape)} and {tuple(x2.shape)}")
    if x1.shape[axis] != x2.shape[axis]:
        raise ValueError(f"[vecdot] shapes {tuple(x1.shape)} and {tuple(x2.shape)} differ along axis {axis}")
    p = _core.mul(x1, x2)
    return _core.sum(p, [p.ndim + axis], False)


def tensordot(x1, x2, /, *, axes=2):
    """Contraction over ``axes`` (an int: the last/first axes; or two sequences)."""
    _t(x1, "tensordot"), _t(x2, "tensordot")
    if isinstance(axes, (tuple, list)):
        if len(axes) != 2:
            raise ValueError("[tensordot] axes must be an int or a pair of sequences")
        a1 = [operator.index(a) % builtins.max(x1.ndim, 1) for a in axes[0]]
        a2 = [operator.index(a) % builtins.max(x2.ndim, 1) for a in axes[1]]
    else:
        k = operator.index(axes)
        if k < 0 or k > x1.ndim or k > x2.ndim:
            raise ValueError(f"[tensordot] axes={k} is out of range for shapes {tuple(x1.shape)} and {tuple(x2.shape)}")
        a1, a2 = list(range(x1.ndim - k, x1.ndim)), list(range(k))
    if len(a1) != len(a2) or builtins.any(x1.shape[i] != x2.shape[j] for i, j in zip(a1, a2)):
        raise ValueError(f"[tensordot] contracted axes of {tuple(x1.shape)} and {tuple(x2.shape)} do not match")
    f1 = [d for d in range(x1.ndim) if d not in a1]
    f2 = [d for d in range(x2.ndim) if d not in a2]
    kk = math.prod(x1.shape[d] for d in a1)
    p1 = _core.reshape(_core.contiguous(_core.transpose(x1, f1 + a1)), [math.prod(x1.shape[d] for d in f1), kk])
    p2 = _core.reshape(_core.contiguous(_core.transpose(x2, a2 + f2)), [kk, math.prod(x2.shape[d] for d in f2)])
    out = _core.matmul(p1, p2)
    return _core.reshape(out, [x1.shape[d] for d in f1] + [x2.shape[d] for d in f2])


def cross(x1, x2, /, *, axis=-1):
    _t(x1, "cross"), _t(x2, "cross")
    if x1.ndim == 0 or x2.ndim == 0 or x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError(f"[linalg.cross] axis {axis} must have size 3 in both {tuple(x1.shape)} and {tuple(x2.shape)}")
    nd = builtins.max(x1.ndim, x2.ndim)
    a = axis if axis < 0 else axis - x1.ndim

    def comp(x, i):
        key = [slice(None)] * x.ndim
        key[x.ndim + a] = i
        return x[tuple(key)]

    u = [comp(x1, i) for i in range(3)]
    v = [comp(x2, i) for i in range(3)]
    c = [_core.sub(_core.mul(u[1], v[2]), _core.mul(u[2], v[1])),
         _core.sub(_core.mul(u[2], v[0]), _core.mul(u[0], v[2])),
         _core.sub(_core.mul(u[0], v[1]), _core.mul(u[1], v[0]))]
    return _core.stack(c, nd + a)


def matrix_power(x, n, /):
    _t(x, "matrix_power")
    n = ops._int(n, "n", "linalg.matrix_power")
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"[linalg.matrix_power] expected square matrices, got shape {tuple(x.shape)}")
    if n < 0:
        x, n = inv(x), -n
    result = None
    base = x
    while n:
        if n & 1:
            result = base if result is None else _core.matmul(result, base)
        n >>= 1
        if n:
            base = _core.matmul(base, base)
    if result is None:
        eye = ops.eye(x.shape[-1], dtype=x.dtype, device=x.device)
        result = _core.broadcast_to(eye, list(x.shape))
    return result


def _tolerance(s, x, rtol):
    if rtol is None:
        rtol = builtins.max(x.shape[-2], x.shape[-1]) * _finfo_eps(s.dtype)
    smax = _core.max(s, [s.ndim - 1], True) if s.shape[-1] else s
    if isinstance(rtol, _core.Tensor):
        return _core.mul(smax, _core.unsqueeze(rtol, rtol.ndim))
    return _core.mul(smax, _core.full([], builtins.float(rtol), s.dtype, s.device))


def _finfo_eps(dtype):
    from .array_api._dtypes import finfo
    return finfo(dtype).eps


def matrix_rank(x, /, *, rtol=None):
    s = svdvals(_t(x, "matrix_rank"))
    big = _core.gt(s, _tolerance(s, x, rtol))
    return _core.sum(_core.astype(big, "int64"), [s.ndim - 1], False)


def pinv(x, /, *, rtol=None):
    u, s, vh = svd(_t(x, "pinv"), full_matrices=False)
    keep = _core.gt(s, _tolerance(s, x, rtol))
    one = _core.full([], 1.0, s.dtype, s.device)
    zero = _core.full([], 0.0, s.dtype, s.device)
    sinv = _core.where(keep, _core.div(one, _core.where(keep, s, one)), zero)
    return _core.matmul(_core.mul(matrix_transpose(vh), _core.unsqueeze(sinv, sinv.ndim - 1)),
                        matrix_transpose(u))


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):  # noqa: A002
    from .array_api._helpers import axes_arg
    x = _float(_t(x, "vector_norm"))
    if isinstance(ord, bool) or not isinstance(ord, numbers.Real):
        raise ValueError(f"[linalg.vector_norm] ord must be a number, got {ord!r}")
    axes = axes_arg(axis, x.ndim, "vector_norm")
    if x.ndim == 0:
        x, axes = _core.reshape(x, [1]), [0]
    a = _core.abs(x)
    if not axes:  # a norm over no axes: each element on its own
        return _core.astype(_core.ne(a, _core.full([], 0.0, a.dtype, a.device)), a.dtype) if ord == 0 else a
    if ord == math.inf:
        return _core.max(a, axes, keepdims)
    if ord == -math.inf:
        return _core.min(a, axes, keepdims)
    if ord == 0:
        return _core.sum(_core.astype(_core.ne(a, _core.full([], 0.0, a.dtype, a.device)), a.dtype), axes, keepdims)
    if ord == 1:
        return _core.sum(a, axes, keepdims)
    if ord == 2:
        return _core.sqrt(_core.sum(_core.mul(a, a), axes, keepdims))
    p = _core.full([], builtins.float(ord), a.dtype, a.device)
    inv_p = _core.full([], 1.0 / builtins.float(ord), a.dtype, a.device)
    return _core.pow(_core.sum(_core.pow(a, p), axes, keepdims), inv_p)


def matrix_norm(x, /, *, keepdims=False, ord="fro"):  # noqa: A002
    x = _float(_t(x, "matrix_norm"))
    if x.ndim < 2:
        raise ValueError(f"[linalg.matrix_norm] expected at least 2 dimensions, got shape {tuple(x.shape)}")
    nd = x.ndim
    if ord == "fro":
        out = _core.sqrt(_core.sum(_core.mul(x, x), [nd - 2, nd - 1], keepdims))
    elif ord in ("nuc", 2, -2):
        s = svdvals(x)
        red = _core.sum if ord == "nuc" else (_core.max if ord == 2 else _core.min)
        out = red(s, [s.ndim - 1], False)
        if keepdims:
            out = _core.reshape(out, list(out.shape) + [1, 1])
    elif ord in (1, -1, math.inf, -math.inf):
        axis = nd - 2 if ord in (1, -1) else nd - 1
        sums = _core.sum(_core.abs(x), [axis], True)
        red = _core.max if ord in (1, math.inf) else _core.min
        out = red(sums, [nd - 2, nd - 1], keepdims)
    else:
        raise ValueError(f"[linalg.matrix_norm] unsupported ord {ord!r}")
    return out
