"""Activation layers: ReLU, GELU, SiLU, Sigmoid, Tanh, Softmax, LogSoftmax."""
from ... import _core
from .. import functional as F
from .module import Module


class _Inplace(Module):
    # ``inplace`` is accepted for torch compatibility; results are always new
    # tensors (a lazy graph has no in-place kernels).
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class ReLU(_Inplace):
    """max(x, 0)."""

    def forward(self, input):  # noqa: A002
        return _core.relu(input)


class SiLU(_Inplace):
    """x * sigmoid(x)."""

    def forward(self, input):  # noqa: A002
        return _core.silu(input)


class GELU(Module):
    """x * Phi(x); approximate='tanh' uses the tanh approximation."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"[GELU] approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input):  # noqa: A002
        return _core.gelu(input, self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Sigmoid(Module):
    def forward(self, input):  # noqa: A002
        return _core.sigmoid(input)


class Tanh(Module):
    def forward(self, input):  # noqa: A002
        return _core.tanh(input)


class _SoftmaxBase(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax(_SoftmaxBase):
    """softmax along ``dim`` (None: torch's legacy implicit choice, with a
    warning)."""

    def forward(self, input):  # noqa: A002
        return F.softmax(input, self.dim)


class LogSoftmax(_SoftmaxBase):
    """log(softmax(x)) along ``dim``, computed stably."""

    def forward(self, input):  # noqa: A002
        return F.log_softmax(input, self.dim)
