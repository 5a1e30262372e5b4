"""Element-wise functions of the Array API (real dtypes).

The core's kernels do the work (pf.acos, pf.log1p, ...); this file maps the
standard's names and Python-scalar rules onto them.
"""
from .. import _core
from ._helpers import scalar_like, tensor_arg

# Same name, same semantics in the core.
from .._core import (  # noqa: F401
    abs, acos, acosh, asin, asinh, atan, atan2, atanh, bitwise_and, bitwise_invert,
    bitwise_left_shift, bitwise_or, bitwise_right_shift, bitwise_xor, ceil, copysign, cos, cosh,
    exp, expm1, floor, floor_divide, hypot, isfinite, isinf, isnan, log, log1p, log2, log10,
    logaddexp, logical_and, logical_not, logical_or, logical_xor, maximum, minimum, nextafter,
    remainder, round, sign, signbit, sin, sinh, sqrt, tan, tanh, trunc,
)

add = _core.add
subtract = _core.sub
multiply = _core.mul
divide = _core.div
pow = _core.pow  # noqa: A001
negative = _core.neg
equal = _core.eq
not_equal = _core.ne
less = _core.lt
less_equal = _core.le
greater = _core.gt
greater_equal = _core.ge


def positive(x, /):
    return tensor_arg(x, "positive")


def square(x, /):
    tensor_arg(x, "square")
    return _core.mul(x, x)


def reciprocal(x, /):
    tensor_arg(x, "reciprocal")
    return _core.div(_core.full([], 1.0, x.dtype if x.dtype.is_floating_point else "float32", x.device), x)


def conj(x, /):
    return tensor_arg(x, "conj")


def real(x, /):
    return tensor_arg(x, "real")


def imag(x, /):
    tensor_arg(x, "imag")
    return _core.full(list(x.shape), 0.0, x.dtype, x.device)


def _bound(b, x, fn):
    if isinstance(b, _core.Tensor):
        if b.device != x.device:
            raise ValueError(f"[{fn}] bounds must be on the tensor's device ({x.device}), got {b.device}")
        return _core.astype(b, x.dtype)
    return scalar_like(b, x)


def clip(x, /, min=None, max=None):  # noqa: A002
    """Bounds x elementwise; the result keeps x's dtype and shape (NaN stays NaN)."""
    tensor_arg(x, "clip")
    if x.dtype == _core.Dtype.bool:
        raise ValueError("[clip] not supported for bool tensors")
    y = x
    if min is not None:
        lo = _bound(min, x, "clip")
        y = _core.where(_core.lt(y, lo), lo, y)
    if max is not None:
        hi = _bound(max, x, "clip")
        y = _core.where(_core.gt(y, hi), hi, y)
    if tuple(y.shape) != tuple(x.shape):
        raise ValueError(f"[clip] bounds of shape {tuple(y.shape)} do not broadcast to {tuple(x.shape)}")
    return y


__all__ = [n for n in dir() if not n.startswith("_") and n not in ("scalar_like", "tensor_arg")]
