"""Tensor methods that forward to the module-level ops, and repr."""
import numpy as np

from . import _core, ops
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


Tensor.__repr__ = _repr
Tensor.__str__ = _repr
Tensor.tolist = lambda self: self.numpy().tolist()
Tensor.reshape = lambda self, *shape: ops.reshape(self, *shape)
Tensor.view = Tensor.reshape
Tensor.transpose = lambda self, *axes: ops.transpose(self, *axes)
Tensor.permute = Tensor.transpose
Tensor.squeeze = lambda self, axis=None: ops.squeeze(self, axis)
Tensor.broadcast_to = lambda self, *shape: ops.broadcast_to(self, *shape)
for _name in ("sum", "mean", "max", "min", "prod", "softmax", "log_softmax", "flatten",
              "unsqueeze", "swapaxes", "exp", "log", "sqrt", "abs", "sin", "cos", "tanh",
              "relu", "sigmoid", "silu", "gelu", "clamp", "matmul", "maximum", "minimum",
              "argmax", "argmin", "argsort", "sort", "topk", "cumsum"):
    setattr(Tensor, _name, _method(getattr(_core, _name)))
Tensor.__array_priority__ = 1000  # ndarray + tensor goes to Tensor.__radd__
