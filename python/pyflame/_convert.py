"""Conversions from Python and NumPy values to what the core accepts."""
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


def dtype_name(obj):
    """Name of a supported dtype given a NumPy dtype or scalar type, else None."""
    try:
        name = np.dtype(obj).name
    except TypeError:
        return None
    return name if name in _SUPPORTED else None


def to_array(obj, fn="tensor"):
    """Any array-like as a C-contiguous NumPy array of a supported dtype."""
    try:
        arr = np.asarray(obj)
    except (ValueError, TypeError) as e:
        raise ValueError(f"[{fn}] cannot convert {type(obj).__name__} to a tensor: {e}") from None
    target = _FROM_NUMPY.get(arr.dtype.name)
    if target == "float64" and not isinstance(obj, (np.ndarray, np.generic)):
        # Python floats (and lists of them) give the default float32, as in
        # torch.tensor; NumPy float64 data stays float64, as in PyTorch.
        target = "float32"
    if target is None:
        raise ValueError(f"[{fn}] cannot convert data of dtype {arr.dtype} to a tensor "
                         "(expected numbers or booleans)")
    if arr.dtype == np.uint64 and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
        raise ValueError(f"[{fn}] value {int(arr.max())} does not fit int64")
    # Not np.ascontiguousarray: it turns 0-d arrays (scalars) into 1-d ones.
    return np.asarray(arr, dtype=target, order="C")


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
