"""Dtype objects, promotion and the inspection namespace of the Array API.

Dtypes are whatever the core provides (pf.Dtype); functions here look them
up by name, so dtypes added to the core flow in without changes.
"""
import builtins

import numpy as np

from .. import _core

_REAL_FLOAT_NAMES = ("float16", "bfloat16", "float32", "float64")
_SIGNED_NAMES = ("int8", "int16", "int32", "int64")
_UNSIGNED_NAMES = ("uint8", "uint16", "uint32", "uint64")


def _have(names):
    return tuple(getattr(_core.Dtype, n) for n in names if hasattr(_core.Dtype, n))


bool = _core.Dtype.bool  # noqa: A001  (the standard's name)
real_floating = _have(_REAL_FLOAT_NAMES)
signed_integer = _have(_SIGNED_NAMES)
unsigned_integer = _have(_UNSIGNED_NAMES)
integral = signed_integer + unsigned_integer
numeric = integral + real_floating
all_dtypes = (bool,) + numeric
default_float = _core.Dtype.float32
default_int = _core.Dtype.int64


def dtype(obj, fn="dtype"):
    """A pf.Dtype from a dtype, name or NumPy dtype."""
    if isinstance(obj, _core.Dtype):
        return obj
    return _core._dtype(obj, fn)


def _check_dtype(d, fn):
    if not isinstance(d, _core.Dtype):
        raise TypeError(f"[{fn}] expected a dtype, got {type(d).__name__}")


_KINDS = {
    "bool": lambda d: d == bool,
    "signed integer": lambda d: d in signed_integer,
    "unsigned integer": lambda d: d in unsigned_integer,
    "integral": lambda d: d in integral,
    "real floating": lambda d: d in real_floating,
    "complex floating": lambda d: False,
    "numeric": lambda d: d in numeric,
}


def isdtype(dtype, kind):
    """Whether ``dtype`` is of ``kind`` (a dtype, a kind name or a tuple of them)."""
    _check_dtype(dtype, "isdtype")
    if isinstance(kind, tuple):
        return builtins.any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, _core.Dtype):
        return dtype == kind
    if isinstance(kind, str) and kind in _KINDS:
        return _KINDS[kind](dtype)
    raise ValueError(f"[isdtype] unknown kind {kind!r}; expected a dtype or one of {sorted(_KINDS)}")


def _promote2(a, b):
    # The core's promotion table, read off a recorded (never evaluated) add.
    x = _core.full([], 0.0, a, "cpu")
    y = _core.full([], 0.0, b, "cpu")
    return _core.add(x, y).dtype


def result_type(*arrays_and_dtypes):
    """The dtype of an operation on the arguments (arrays, dtypes, Python scalars)."""
    dts, scalars = [], []
    for a in arrays_and_dtypes:
        if isinstance(a, _core.Tensor):
            dts.append(a.dtype)
        elif isinstance(a, _core.Dtype):
            dts.append(a)
        elif isinstance(a, (builtins.bool, builtins.int, builtins.float)):
            scalars.append(a)
        else:
            raise TypeError(f"[result_type] expected arrays, dtypes or Python scalars, got {type(a).__name__}")
    if not dts:
        raise ValueError("[result_type] at least one array or dtype is required")
    out = dts[0]
    for d in dts[1:]:
        out = _promote2(out, d)
    for s in scalars:  # weak: a scalar only raises the category
        if isinstance(s, builtins.bool):
            continue
        if isinstance(s, builtins.int) and out == bool:
            out = default_int
        elif isinstance(s, builtins.float) and out not in real_floating:
            out = default_float
    return out


def can_cast(from_, to, /):
    """Whether the promotion rules allow ``from_`` to become ``to``."""
    if isinstance(from_, _core.Tensor):
        from_ = from_.dtype
    _check_dtype(from_, "can_cast")
    _check_dtype(to, "can_cast")
    return _promote2(from_, to) == to


class finfo_object:
    def __init__(self, bits, eps, max, min, smallest_normal, dtype):  # noqa: A002
        self.bits, self.eps, self.max, self.min = bits, eps, max, min
        self.smallest_normal, self.dtype = smallest_normal, dtype

    def __repr__(self):
        return f"finfo(dtype={self.dtype}, bits={self.bits}, eps={self.eps}, max={self.max})"


class iinfo_object:
    def __init__(self, bits, max, min, dtype):  # noqa: A002
        self.bits, self.max, self.min, self.dtype = bits, max, min, dtype

    def __repr__(self):
        return f"iinfo(dtype={self.dtype}, bits={self.bits}, min={self.min}, max={self.max})"


def finfo(type, /):  # noqa: A002
    d = type.dtype if isinstance(type, _core.Tensor) else dtype(type, "finfo")
    if d not in real_floating:
        raise ValueError(f"[finfo] expected a floating-point dtype, got {d}")
    if str(d) == "bfloat16":  # NumPy has no bfloat16: 8 exponent bits, 7 mantissa bits
        m = builtins.float.fromhex("0x1.fep127")
        return finfo_object(16, 2.0 ** -7, m, -m, 2.0 ** -126, d)
    f = np.finfo(str(d))
    return finfo_object(f.bits, builtins.float(f.eps), builtins.float(f.max), builtins.float(f.min),
                        builtins.float(f.smallest_normal), d)


def iinfo(type, /):  # noqa: A002
    d = type.dtype if isinstance(type, _core.Tensor) else dtype(type, "iinfo")
    if d not in integral:
        raise ValueError(f"[iinfo] expected an integer dtype, got {d}")
    i = np.iinfo(str(d))
    return iinfo_object(i.bits, builtins.int(i.max), builtins.int(i.min), d)


class Info:
    """What ``__array_namespace_info__()`` returns."""

    def capabilities(self):
        return {"boolean indexing": False, "data-dependent shapes": True, "max dimensions": 64}

    def default_device(self):
        return _core.get_device()

    def default_dtypes(self, *, device=None):
        return {"real floating": default_float, "complex floating": None,
                "integral": default_int, "indexing": default_int}

    def dtypes(self, *, device=None, kind=None):
        return {str(d): d for d in all_dtypes if kind is None or isdtype(d, kind)}

    def devices(self):
        n = _core.rocm_device_count() if _core.rocm_is_available() else 0
        return ["cpu"] + [f"rocm:{i}" for i in range(n)]


def __array_namespace_info__():
    return Info()
