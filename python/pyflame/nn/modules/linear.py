"""Identity, Linear, Flatten."""

from ... import _core
from .. import functional as F
from ._utils import check_positive_int, empty_parameter, reset_weight_and_bias
from .module import Module


class Identity(Module):
    """Returns its input; any constructor arguments are ignored."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):  # noqa: A002
        return input


class Linear(Module):
    """y = x @ weight.T + bias; weight (out_features, in_features), bias
    (out_features,), both U(-1/sqrt(in_features), 1/sqrt(in_features))."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = check_positive_int(in_features, "in_features", "Linear", True)
        self.out_features = check_positive_int(out_features, "out_features", "Linear", True)
        self.weight = empty_parameter((out_features, in_features), device, dtype)
        if bias:
            self.bias = empty_parameter((out_features,), device, dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        reset_weight_and_bias(self)

    def forward(self, input):  # noqa: A002
        # The records straight from _parameters (F.linear unwraps them):
        # attribute access goes through Module.__getattr__, twice per step.
        p = self._parameters
        try:
            weight, bias = p["weight"], p["bias"]
        except KeyError:  # deleted, or replaced by a property: as attributes
            weight, bias = self.weight, self.bias
        return F.linear(input, weight, bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Flatten(Module):
    """Flattens dims start_dim..end_dim (default: all but the batch dim)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):  # noqa: A002
        return _core.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"
