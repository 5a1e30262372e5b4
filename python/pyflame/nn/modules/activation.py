"""Activation layers: ReLU, GELU, SiLU, Sigmoid, Tanh, Softmax, LogSoftmax,
LeakyReLU, ELU, SELU, Softplus, Mish, Hardswish, Hardsigmoid, LogSigmoid."""
from ... import _core
from .. import functional as F
from .module import Module


class _Inplace(Module):
    # ``inplace`` is accepted for torch compatibility; the result is always a
    # new tensor and the input keeps its value.
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


class LeakyReLU(_Inplace):
    """x for x > 0, negative_slope * x otherwise."""

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__(inplace)
        self.negative_slope = negative_slope

    def forward(self, input):  # noqa: A002
        return F.leaky_relu(input, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(_Inplace):
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__(inplace)
        self.alpha = alpha

    def forward(self, input):  # noqa: A002
        return F.elu(input, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class SELU(_Inplace):
    """scale * elu(x, alpha) with the self-normalizing constants."""

    def forward(self, input):  # noqa: A002
        return F.selu(input)


class Softplus(Module):
    """log(1 + exp(beta * x)) / beta, linear above threshold."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):  # noqa: A002
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Mish(_Inplace):
    """x * tanh(softplus(x))."""

    def forward(self, input):  # noqa: A002
        return F.mish(input)


class Hardswish(_Inplace):
    """x * relu6(x + 3) / 6."""

    def forward(self, input):  # noqa: A002
        return F.hardswish(input)


class Hardsigmoid(_Inplace):
    """relu6(x + 3) / 6."""

    def forward(self, input):  # noqa: A002
        return F.hardsigmoid(input)


class LogSigmoid(Module):
    """log(sigmoid(x)), finite for any x."""

    def forward(self, input):  # noqa: A002
        return F.logsigmoid(input)
