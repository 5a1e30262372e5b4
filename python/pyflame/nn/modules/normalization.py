"""Normalization layers: BatchNorm1d/2d/3d, LayerNorm, GroupNorm, RMSNorm."""
import numbers

from ... import _core
from ... import ops as _ops
from .. import functional as F
from .. import init
from ._utils import check_positive_int, check_real, empty_parameter
from .module import Module


class _BatchNorm(Module):
    """Batch normalization over the channel dim 1 (torch's _BatchNorm).

    Training: normalizes with the batch statistics and, with
    ``track_running_stats``, updates ``running_mean``/``running_var`` (unbiased
    variance) by ``momentum`` (or a cumulative average when momentum is None)
    and counts ``num_batches_tracked``. Eval: normalizes with the running
    statistics (or the batch's when they are not tracked).

    The updates rebind the buffer tensors lazily, like every op, detached
    from the autograd graph (the buffers never require grad). So that a
    training loop that never reads them does not grow their graph (each update
    holds on to its batch), a training-mode call first evaluates the previous
    call's pending updates: at most one batch per layer stays referenced.
    """
    _version = 2
    _expected_dims = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        self.num_features = check_positive_int(num_features, "num_features", name)
        self.eps = check_real(eps, "eps", name, low=0)
        self.momentum = check_real(momentum, "momentum", name, allow_none=True)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = empty_parameter((num_features,), device, dtype)
            self.bias = empty_parameter((num_features,), device, dtype)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", _ops.zeros(num_features, dtype=dtype,
                                                            device=device))
            self.register_buffer("running_var", _ops.ones(num_features, dtype=dtype,
                                                          device=device))
            self.register_buffer("num_batches_tracked",
                                 _ops.zeros((), dtype=_core.Dtype.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self._parameters["weight"])
            init.zeros_(self._parameters["bias"])

    def _check_input_dim(self, x):
        if not isinstance(x, _core.Tensor):
            raise TypeError(f"[{type(self).__name__}] expected a pyflame.Tensor input, got "
                            f"{type(x).__name__}")
        if x.ndim not in self._expected_dims:
            want = " or ".join(f"{d}D" for d in self._expected_dims)
            raise ValueError(f"[{type(self).__name__}] expected {want} input (got {x.ndim}D "
                             f"input of shape {tuple(x.shape)})")

    def forward(self, input):  # noqa: A002
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            pending = [t for t in (self.running_mean, self.running_var, self.num_batches_tracked)
                       if t is not None and not t.is_evaluated]
            if pending:
                _ops.eval(*pending)
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            nbt = self.num_batches_tracked
            nbt._replace(nbt + 1)
            if self.momentum is None:  # cumulative moving average
                factor = 1.0 / float(nbt.item())
        use_batch_stats = self.training or (self.running_mean is None and
                                            self.running_var is None)
        # Buffers go to the op when they are updated (training and tracked) or
        # used (eval); pf.batch_norm rebinds them to their updated values.
        track = not self.training or self.track_running_stats
        out = F.batch_norm(input, self.running_mean if track else None,
                           self.running_var if track else None, self.weight, self.bias,
                           use_batch_stats, factor, self.eps)
        if self.training and self.track_running_stats:
            # Statistics of an input that requires grad would carry its graph
            # (and each batch's, chained) into the buffers: keep the values only.
            for name in ("running_mean", "running_var"):
                b = self._buffers.get(name)
                if b is not None and b.requires_grad:
                    b._replace(_core.detach(b))
        return out

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """BatchNorm over (N, C) or (N, C, L) input."""
    _expected_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """BatchNorm over (N, C, H, W) input."""
    _expected_dims = (4,)


class BatchNorm3d(_BatchNorm):
    """BatchNorm over (N, C, D, H, W) input."""
    _expected_dims = (5,)


def _shape_tuple(normalized_shape, layer):
    dims = (normalized_shape,) if isinstance(normalized_shape, numbers.Integral) else \
        normalized_shape
    try:
        shape = tuple(dims)
    except TypeError:
        shape = None
    if shape is None or isinstance(normalized_shape, (str, bool)) or not all(
            isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in shape):
        raise TypeError(f"[{layer}] normalized_shape must be an int or a sequence of ints, got "
                        f"{normalized_shape!r}")
    shape = tuple(int(d) for d in shape)
    if any(d <= 0 for d in shape):
        raise ValueError(f"[{layer}] normalized_shape must be positive, got {shape}")
    return shape


class LayerNorm(Module):
    """Normalizes over the trailing ``normalized_shape`` dims; weight (ones) and
    bias (zeros) of that shape when ``elementwise_affine`` (``bias=False``
    drops the bias, as in newer torch)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape, "LayerNorm")
        self.eps = check_real(eps, "eps", "LayerNorm", low=0)
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = empty_parameter(self.normalized_shape, device, dtype)
            if bias:
                self.bias = empty_parameter(self.normalized_shape, device, dtype)
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self._parameters["weight"])
            if self._parameters["bias"] is not None:
                init.zeros_(self._parameters["bias"])

    def forward(self, input):  # noqa: A002
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class GroupNorm(Module):
    """Normalizes (N, C, *) input over groups of C/num_groups channels; weight
    (ones) and bias (zeros) of shape (C,) when ``affine``."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None,
                 dtype=None):
        super().__init__()
        check_positive_int(num_groups, "num_groups", "GroupNorm")
        check_positive_int(num_channels, "num_channels", "GroupNorm")
        if num_channels % num_groups != 0:
            raise ValueError(f"[GroupNorm] num_channels ({num_channels}) must be divisible by "
                             f"num_groups ({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = check_real(eps, "eps", "GroupNorm", low=0)
        self.affine = affine
        if affine:
            self.weight = empty_parameter((num_channels,), device, dtype)
            self.bias = empty_parameter((num_channels,), device, dtype)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.affine:
            init.ones_(self._parameters["weight"])
            init.zeros_(self._parameters["bias"])

    def forward(self, input):  # noqa: A002
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, "
                f"affine={self.affine}")


class RMSNorm(Module):
    """x / sqrt(mean(x^2) + eps) * weight over the trailing ``normalized_shape``
    dims (torch 2.4's nn.RMSNorm; eps defaults to 1e-6 here, not dtype eps)."""

    def __init__(self, normalized_shape, eps=1e-6, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape, "RMSNorm")
        self.eps = 1e-6 if eps is None else check_real(eps, "eps", "RMSNorm", low=0)
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = empty_parameter(self.normalized_shape, device, dtype)
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self._parameters["weight"])

    def forward(self, input):  # noqa: A002
        k = len(self.normalized_shape)
        shape = tuple(input.shape)
        if shape[len(shape) - k:] != self.normalized_shape or len(shape) < k:
            raise ValueError(f"[RMSNorm] input of shape {shape} does not end in "
                             f"normalized_shape {self.normalized_shape}")
        if k == 1:
            return F.rms_norm(input, self.weight, self.eps)
        # Several trailing dims: normalize them as one.
        flat = _core.flatten(input, len(shape) - k, -1)
        w = None if self.weight is None else _core.flatten(self.weight, 0, -1)
        return F.rms_norm(flat, w, self.eps).reshape(*shape)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")
