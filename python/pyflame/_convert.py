"""Conversions from Python and NumPy values to what the core accepts."""
import math

import numpy as np

# NumPy dtype -> the PyFlame dtype it becomes; others (long double, complex,
# ...) are rejected. Unsigned 16-bit integers widen to int32, unsigned
# 32/64-bit ones to int64 (PyFlame has uint8 only, as PyTorch's full support).
_FROM_NUMPY = {
    "float64": "float64", "float32": "float32", "float16": "float16",
    "int64": "int64", "uint32": "int64", "uint64": "int64",
    "int32": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8", "uint16": "int32",
    "bool": "bool",
}
_SUPPORTED = ("float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8", "bool")


# NumPy's dtype.name is computed in Python (microseconds per call, the
# better part of making a small tensor): what a dtype maps to is looked up
# once per dtype object (byte orders are distinct keys) and kept.
_TARGETS = {}
_FLOAT32, _UINT64 = np.dtype(np.float32), np.dtype(np.uint64)


def _target(dt):
    """(PyFlame dtype name, NumPy dtype) that NumPy dtype dt becomes, or None."""
    t = _TARGETS.get(dt, False)
    if t is False:
        name = _FROM_NUMPY.get(dt.name)
        t = _TARGETS[dt] = None if name is None else (name, np.dtype(name))
    return t


_NAMES = {}


def dtype_name(obj):
    """Name of a supported dtype given a NumPy dtype or scalar type, else None."""
    try:
        return _NAMES[obj]
    except (KeyError, TypeError):  # TypeError: an unhashable object
        pass
    try:
        name = np.dtype(obj).name
    except TypeError:
        return None
    name = name if name in _SUPPORTED else None
    try:
        _NAMES[obj] = name
    except TypeError:
        pass
    return name


def to_array(obj, fn="tensor"):
    """Any array-like as a C-contiguous NumPy array of a supported dtype."""
    try:
        arr = np.asarray(obj)
    except (ValueError, TypeError) as e:
        raise ValueError(f"[{fn}] cannot convert {type(obj).__name__} to a tensor: {e}") from None
    t = _target(arr.dtype)
    if t is None:
        raise ValueError(f"[{fn}] cannot convert data of dtype {arr.dtype} to a tensor "
                         "(expected numbers or booleans)")
    target = t[1]
    if t[0] == "float64" and not isinstance(obj, (np.ndarray, np.generic)):
        # Python floats (and lists of them) give the default float32, as in
        # torch.tensor; NumPy float64 data stays float64, as in PyTorch.
        target = _FLOAT32
    if arr.dtype == _UINT64 and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
        raise ValueError(f"[{fn}] value {int(arr.max())} does not fit int64")
    # Not np.ascontiguousarray: it turns 0-d arrays (scalars) into 1-d ones.
    return np.asarray(arr, dtype=target, order="C")


def scalar_value(value, dtype, fn, what="value"):
    """A Python or NumPy real number (or a one-element tensor) as the float
    the core's ``full`` takes for dtype, converted as an assignment does:
    true/false for bool, truncated toward zero for integers. Anything else is
    a TypeError under fn; a value the dtype cannot hold (NaN or 1e20 into
    int32) is left for ``full`` to reject under fn."""
    if hasattr(value, "item") and getattr(value, "size", None) == 1 and not isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        raise TypeError(f"[{fn}] {what} must be a real number, got {type(value).__name__}")
    if str(dtype) == "bool":
        return float(bool(value))
    if not dtype.is_floating_point and isinstance(value, (float, np.floating)) and math.isfinite(value):
        value = math.trunc(value)
    try:
        return float(value)
    except OverflowError:  # a Python int beyond float64's range
        raise ValueError(f"[{fn}] {what} {value} cannot be converted to {dtype} without overflow") from None


def scalar_full(shape, value, dtype, device, fn, what="value"):
    """A tensor of shape filled with a scalar (scalar_value's rules). An
    integer beyond float64's exact range (2**53) is filled on the host, so
    int64 tensors get it exactly."""
    from . import _core
    v = scalar_value(value, dtype, fn, what)
    if (str(dtype) == "int64" and isinstance(value, (int, np.integer)) and not isinstance(value, bool)
            and abs(int(value)) > 2**53 and -2**63 <= int(value) < 2**63):
        return _core.from_numpy(np.full(list(shape), int(value), dtype=np.int64), device)
    return _core.full(list(shape), v, dtype, device, fn)


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or platform.machine()
