"""Tensor methods that forward to the module-level ops, and repr."""
import numpy as np

from . import _core, _inplace, ops
from ._core import Tensor


def _repr(self):
    body = np.array2string(self.numpy(), separator=", ", prefix="tensor(")
    grad = ", requires_grad=True" if self.requires_grad else ""
    return f"tensor({body}, dtype={self.dtype}, device='{self.device}'{grad})"


def _method(fn):
    def m(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    m.__name__ = fn.__name__
    m.__doc__ = fn.__doc__
    return m


def _sizes(args):
    return tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else args


def _view(self, *shape):
    """torch's view: reshape without a copy; a tensor whose layout is not
    row-major cannot be viewed (reshape copies it instead)."""
    if not self._is_contiguous:
        raise RuntimeError("[view] view size is not compatible with input tensor's size and "
                           "stride (the tensor is not contiguous); use .reshape(...) instead")
    return ops.reshape(self, *shape)


def _expand(self, *sizes):
    """torch's expand: -1 keeps a size; new leading axes may be added."""
    sizes = _sizes(sizes)
    lead = len(sizes) - self.ndim
    if lead < 0:
        raise ValueError(f"[expand] the number of sizes ({len(sizes)}) must be at least the "
                         f"tensor's ndim ({self.ndim})")
    shape = [self.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(sizes)]
    if any(s == -1 for s in shape[:lead]):
        raise ValueError("[expand] -1 is not allowed for a new leading dimension")
    return ops.broadcast_to(self, *shape)


def _permute(self, *dims):
    dims = _sizes(dims)
    if len(dims) != self.ndim:
        raise ValueError(f"[permute] number of dims ({len(dims)}) does not match the tensor's "
                         f"ndim ({self.ndim})")
    return ops.transpose(self, list(dims))


def _cast(name):
    def m(self):
        return self.astype(getattr(_core.Dtype, name))
    m.__name__ = name
    return m


def _rebuild(bits, dtype, device, requires_grad):
    """A pickled tensor: its exact bits (bfloat16 included), dtype, device
    and whether it was a grad leaf."""
    t = _core._from_host_bits(bits, dtype).to(device)
    if requires_grad:
        t.requires_grad = True
    return t


def _reduce(self):
    """pickle and copy.copy / copy.deepcopy: the values (evaluated), dtype,
    device and requires_grad, as torch pickles a tensor (a copy is a new leaf)."""
    return _rebuild, (_core._to_host_bits(self), str(self.dtype), str(self.device), self.requires_grad)


def _format(self, spec):
    """format(t, ".3f"): a 0-d tensor formats its value, as
    torch does; other tensors take no format spec."""
    if self.ndim == 0 and spec:
        return format(self.item(), spec)
    if spec:
        raise TypeError(f"[format] a format spec ({spec!r}) applies to 0-d tensors only, got shape "
                        f"{tuple(self.shape)}")
    return str(self)


Tensor.__repr__ = _repr
Tensor.__str__ = _repr
Tensor.__reduce__ = _reduce
Tensor.__format__ = _format
Tensor.tolist = lambda self: self.numpy().tolist()
Tensor.reshape = lambda self, *shape: ops.reshape(self, *shape)
Tensor.view = _view
Tensor.transpose = lambda self, *axes: ops.transpose(self, *axes)
Tensor.permute = _permute
Tensor.T = property(lambda self: ops.transpose(self))
Tensor.squeeze = lambda self, axis=None: ops.squeeze(self, axis)
Tensor.broadcast_to = lambda self, *shape: ops.broadcast_to(self, *shape)
Tensor.expand = _expand
Tensor.unsqueeze = lambda self, axis: ops.unsqueeze(self, axis)
Tensor.flatten = lambda self, *a, **k: ops.flatten(self, *a, **k)
Tensor.swapaxes = lambda self, a, b: ops.swapaxes(self, a, b)
Tensor.split = lambda self, *a, **k: ops.split(self, *a, **k)
Tensor.chunk = lambda self, chunks, axis=0: ops.chunk(self, chunks, axis)
Tensor.contiguous = lambda self: ops.contiguous(self)
Tensor.dim = lambda self: self.ndim
Tensor.numel = lambda self: self.size
Tensor.nelement = Tensor.numel
Tensor.clone = lambda self: _core.clone(self)
for _name in ("float", "half", "bfloat16", "long", "int", "bool"):
    _dt = {"float": "float32", "half": "float16", "long": "int64", "int": "int32"}.get(_name, _name)
    setattr(Tensor, _name, _cast(_dt))
if hasattr(_core.Dtype, "float64"):  # once the build has float64
    Tensor.double = _cast("float64")
# (relu, exp, matmul and the other one-argument and two-operand methods are
# bound in C++, python/src/tensor.cc: no Python frame per call.)
for _name in ("sum", "mean", "max", "min", "prod", "softmax", "log_softmax", "gelu",
              "argmax", "argmin", "argsort", "sort", "topk", "cumsum"):
    setattr(Tensor, _name, _method(getattr(_core, _name)))
Tensor.clamp = lambda self, min=None, max=None: _inplace.clamp(self, min, max)  # noqa: A002

# Item assignment, in-place methods and operators (see _inplace).
Tensor.__getitem__ = _inplace.getitem
Tensor.__setitem__ = _inplace.setitem
for _name in ("add_", "sub_", "mul_", "div_", "pow_", "zero_", "fill_", "copy_", "clamp_",
              "masked_fill_", "scatter_", "scatter_add_", "index_add_"):
    setattr(Tensor, _name, getattr(_inplace, _name))
Tensor.masked_fill = _inplace.masked_fill
Tensor.scatter = _inplace.scatter
Tensor.scatter_add = lambda self, dim, index, src: _core.scatter_add(self, dim, index, src)
Tensor.index_add = _inplace.index_add
Tensor.__iadd__ = _inplace.iop(_inplace.add_)
Tensor.__isub__ = _inplace.iop(_inplace.sub_)
Tensor.__imul__ = _inplace.iop(_inplace.mul_)
Tensor.__itruediv__ = _inplace.iop(_inplace.div_)
Tensor.__array_priority__ = 1000  # ndarray + tensor goes to Tensor.__radd__
