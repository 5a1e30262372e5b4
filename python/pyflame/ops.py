"""Python-side signatures for the ops: varargs shapes, defaults and
conversions; the work happens in the C++ core."""
import builtins
import operator

import numpy as np

from . import _core
from ._convert import scalar_full, to_array
from ._inplace import viewing, split_viewing


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
    if any(not _INT64_MIN <= d <= _INT64_MAX for d in shape):
        raise ValueError(f"[{fn}] dimension out of the int64 range in shape {tuple(shape)}")
    return shape


_INT64_MIN, _INT64_MAX = -2**63, 2**63 - 1


def _int(value, what, fn, optional=False):
    """An integer argument that fits int64 (None where optional)."""
    if value is None and optional:
        return None
    if isinstance(value, bool):
        raise TypeError(f"[{fn}] {what} must be an integer, got a bool")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"[{fn}] {what} must be an integer, got {type(value).__name__}") from None
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"[{fn}] {what} {value} is out of the int64 range")
    return value


def _number(value, what, fn):
    """A real number argument (Python, NumPy or a one-element tensor) as float."""
    if isinstance(value, _core.Tensor) and value.size == 1:
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (builtins.int, builtins.float,
                                                                      np.integer, np.floating)):
        raise TypeError(f"[{fn}] {what} must be a real number, got {type(value).__name__}")
    try:
        return builtins.float(value)
    except OverflowError:  # a Python int beyond float64's range
        raise ValueError(f"[{fn}] {what} {value} is out of range") from None


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
        arr = to_array(data)
        if dtype is not None:
            _check_fits(arr, dtype, "tensor")
        out = _core.from_numpy(arr, device)
    return _leaf(out if dtype is None or out.dtype == dtype else out.astype(dtype), requires_grad)


_INT_DTYPES = (_core.Dtype.int32, _core.Dtype.int64)


def _check_fits(arr, dtype, fn):
    """Data given for an integer dtype must be finite and within its range,
    as PyTorch requires (NaN would become INT_MIN, 2**40 wrap to 0). The
    cast truncates toward zero, hence the open bounds."""
    if dtype not in _INT_DTYPES or arr.size == 0:
        return
    kind = arr.dtype.kind
    if kind == "b" or (kind in "iu" and dtype == _core.Dtype.int64):
        return
    lo, hi = (-(2**31) - 1, 2**31) if dtype == _core.Dtype.int32 else (-(2**63), 2**63)
    wide = arr.astype(np.float64) if arr.dtype.kind == "f" else arr
    ok = (wide > lo) & (wide < hi) if dtype == _core.Dtype.int32 else (wide >= lo) & (wide < hi)
    if not ok.all():
        bad = arr.reshape(-1)[np.argmin(ok.reshape(-1))]
        raise ValueError(f"[{fn}] value {bad} cannot be converted to {dtype.name} without overflow")


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
        _int(fill_value, "fill_value", "full")
        if str(dtype) in ("int8", "uint8", "int16", "int32"):
            raise ValueError(f"[full] value {fill_value} cannot be converted to {dtype} "
                             "without overflow")
        # Beyond float64's exact integers: fill on the host rather than round.
        out = tensor(np.full(_shape((shape,), "full"), fill_value, dtype=np.int64), device=device)
        return out.astype(dtype)
    try:
        value = builtins.float(fill_value)
    except (TypeError, ValueError):
        raise ValueError(f"[full] fill_value must be a number, got {fill_value!r}") from None
    return _core.full(_shape((shape,), "full"), value, dtype, device)


def _like(x, value, dtype, device, fn):
    if not isinstance(x, _core.Tensor):
        raise TypeError(f"[{fn}] expected a pyflame.Tensor, got {type(x).__name__}")
    return _core.full(list(x.shape), value, x.dtype if dtype is None else dtype,
                      x.device if device is None else device, fn)


def zeros_like(x, dtype=None, device=None):
    return _like(x, 0.0, dtype, device, "zeros_like")


def ones_like(x, dtype=None, device=None):
    return _like(x, 1.0, dtype, device, "ones_like")


def arange(start, stop=None, step=1, dtype=None, device=None):
    """Like numpy.arange: integer arguments give int64 unless a dtype is given."""
    if stop is None:
        start, stop = 0, start
    values = [_number(v, what, "arange") for v, what in ((start, "start"), (stop, "stop"),
                                                          (step, "step"))]
    ints = all(isinstance(v, (builtins.int, np.integer)) for v in (start, stop, step))
    if dtype is None:
        dtype = "int64" if ints else "float32"
    if ints and builtins.max(builtins.abs(int(v)) for v in (start, stop, step)) > 2**53 and \
            str(_core._dtype(dtype, "arange")) == "int64" and step != 0:
        # Beyond float64's exact integers: count and offset in integers.
        start, stop, step = int(start), int(stop), int(step)
        n = builtins.max(0, -((start - stop) // step))
        idx = _core.arange(0.0, builtins.float(n), 1.0, "int64", device)
        return idx * step + start if n else idx
    return _core.arange(*values, dtype, device)


def eye(n, m=None, k=0, dtype=None, device=None):
    n, m = _int(n, "n", "eye"), _int(m, "m", "eye", optional=True)
    if n < 0 or (m is not None and m < 0):  # the core reads m=-1 as "m = n"
        raise ValueError(f"[eye] negative dimension: n={n}, m={m}")
    return _core.eye(n, m, _int(k, "k", "eye"), dtype, device)


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
    return _core.randint(_int(low, "low", "randint"), _int(high, "high", "randint"),
                         _shape((size,), "randint"), dtype, device)


@viewing
def reshape(x, *shape):
    return _core.reshape(x, _shape(shape, "reshape", allow_minus_one=True))


@viewing
def transpose(x, *axes):
    """Reverses the axes, or permutes them as given (NumPy semantics)."""
    if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
        axes = axes[0]
    return _core.transpose(x, list(axes) if axes else None)


@viewing
def squeeze(x, axis=None):
    return _core.squeeze(x, axis)


@viewing
def broadcast_to(x, *shape):
    return _core.broadcast_to(x, _shape(shape, "broadcast_to"))


unsqueeze = viewing(_core.unsqueeze)
contiguous = viewing(_core.contiguous)  # a row-major tensor comes back as itself: an alias
flatten = viewing(_core.flatten)
swapaxes = viewing(_core.swapaxes)
split = split_viewing(_core.split)


@split_viewing
def chunk(x, chunks, axis=0):
    """torch.chunk: at most ``chunks`` views of equal size along ``axis`` (the
    last may be smaller; fewer pieces when the size does not divide)."""
    chunks = _int(chunks, "chunks", "chunk")
    if chunks <= 0:
        raise ValueError(f"[chunk] chunks must be positive, got {chunks}")
    if not isinstance(x, _core.Tensor):
        raise TypeError(f"[chunk] expected a pyflame.Tensor, got {type(x).__name__}")
    if x.ndim == 0:
        raise ValueError("[chunk] a 0-d tensor cannot be chunked")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"[chunk] axis {axis} is out of range for a {x.ndim}-d tensor")
    n = x.shape[axis]
    size = max(-(-n // chunks), 1)
    return _core.split(x, size, axis)


def _scalar_dtype(v):
    return "bool" if isinstance(v, (bool, np.bool_)) else (
        "int64" if isinstance(v, (builtins.int, np.integer)) else "float32")


def where(condition, a, b):
    """Elements of a where condition holds, else of b. a and b may be Python
    scalars (both of them too: a tensor on condition's device, dtype from
    the scalars as in torch)."""
    if not isinstance(a, _core.Tensor) and not isinstance(b, _core.Tensor) and \
            isinstance(condition, _core.Tensor) and np.isscalar(a) and np.isscalar(b):
        kinds = [_scalar_dtype(v) for v in (a, b)]
        dtype = max(kinds, key=["bool", "int64", "float32"].index)
        dtype = _core._dtype(dtype, "where")
        a = scalar_full([], a, dtype, condition.device, "where", "a")
    return _core.where(condition, a, b)


def eval(*tensors):  # noqa: A001  (pf.eval, as in MLX)
    """Evaluates the given tensors (and lists of tensors) in one pass."""
    if len(tensors) == 1 and type(tensors[0]) is _core.Tensor:  # eager code's case, no copies
        _core.eval(tensors)
        return tensors[0]
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
