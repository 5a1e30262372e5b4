"""Convolutions: Conv1d/2d/3d and ConvTranspose1d/2d/3d."""

from ... import _core
from .. import functional as F
from ._utils import (_single, _pair, _triple, check_positive_int, empty_parameter,
                     reset_weight_and_bias)
from .module import Module

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    _dims = 0
    _ntuple = None
    _op = ""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation,
                 transposed, output_padding, groups, bias, padding_mode, device=None,
                 dtype=None):
        super().__init__()
        name = type(self).__name__
        check_positive_int(in_channels, "in_channels", name, allow_zero=True)
        check_positive_int(out_channels, "out_channels", name, allow_zero=True)
        if not isinstance(groups, int) or isinstance(groups, bool) or groups <= 0:
            raise ValueError(f"[{name}] groups must be a positive integer, got {groups!r}")
        if in_channels % groups != 0:
            raise ValueError(f"[{name}] in_channels ({in_channels}) must be divisible by "
                             f"groups ({groups})")
        if out_channels % groups != 0:
            raise ValueError(f"[{name}] out_channels ({out_channels}) must be divisible by "
                             f"groups ({groups})")
        nt = type(self)._ntuple
        kernel_size, stride, dilation = nt(kernel_size), nt(stride), nt(dilation)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"[{name}] invalid padding string {padding!r}, should be one "
                                 "of ['valid', 'same']")
            if transposed:
                raise ValueError(f"[{name}] padding={padding!r} is not supported for "
                                 "transposed convolutions")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError(f"[{name}] padding='same' is not supported for strided "
                                 "convolutions")
        else:
            padding = nt(padding)
        output_padding = nt(output_padding)
        checks = [("kernel_size", kernel_size, 1), ("stride", stride, 1),
                  ("dilation", dilation, 1), ("output_padding", output_padding, 0)]
        if not isinstance(padding, str):
            checks.append(("padding", padding, 0))
        for what, vals, low in checks:
            if len(vals) != self._dims or any(
                    not isinstance(v, int) or isinstance(v, bool) or v < low for v in vals):
                kind = "a positive" if low else "a non-negative"
                raise ValueError(f"[{name}] {what} must be {kind} int or a tuple of "
                                 f"{self._dims} such ints, got {vals!r}")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"[{name}] padding_mode must be one of {list(_PADDING_MODES)}, "
                             f"but got padding_mode='{padding_mode}'")
        if transposed and padding_mode != "zeros":
            raise ValueError(f'[{name}] only "zeros" padding mode is supported')
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.transposed = transposed
        self.output_padding = output_padding
        self.groups = groups
        self.padding_mode = padding_mode
        # F.pad amounts (last dim first), as torch computes them.
        if isinstance(padding, str):
            rp = [0, 0] * len(kernel_size)
            if padding == "same":
                for d, k, i in zip(dilation, kernel_size, range(len(kernel_size) - 1, -1, -1)):
                    total = d * (k - 1)
                    rp[2 * i] = total // 2
                    rp[2 * i + 1] = total - total // 2
            self._reversed_padding_repeated_twice = rp
        else:
            self._reversed_padding_repeated_twice = [p for p in reversed(padding) for _ in (0, 1)]
        if transposed:
            shape = (in_channels, out_channels // groups) + kernel_size
        else:
            shape = (out_channels, in_channels // groups) + kernel_size
        self.weight = empty_parameter(shape, device, dtype)
        if bias:
            self.bias = empty_parameter((out_channels,), device, dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        # fan_in = weight.shape[1] * prod(kernel_size); for transposed
        # convolutions that is out_channels / groups, as in torch.
        reset_weight_and_bias(self)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, " \
            f"stride={self.stride}"
        if self.padding != (0,) * len(self.padding):
            s += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s

    def _check_input(self, x):
        if not isinstance(x, _core.Tensor):
            raise TypeError(f"[{type(self).__name__}] expected a pyflame.Tensor input, got "
                            f"{type(x).__name__}")
        if x.ndim not in (self._dims + 1, self._dims + 2):
            raise ValueError(f"[{type(self).__name__}] expected a {self._dims + 1}-D (unbatched) "
                             f"or {self._dims + 2}-D (batched) input, got shape {tuple(x.shape)}")

    def _run(self, fn, x, *args):
        # Unbatched input (C, *spatial): add a batch dim of 1 and remove it after.
        if x.ndim == self._dims + 1:
            return _core.squeeze(fn(_core.unsqueeze(x, 0), *args), 0)
        return fn(x, *args)


class _Conv(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         False, 0, groups, bias, padding_mode, device, dtype)

    def _conv(self, x):
        op = getattr(F, self._op)
        w, b = self.weight, self.bias
        zero = (0,) * self._dims
        if self.padding_mode != "zeros":
            x = F.pad(x, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return op(x, w, b, self.stride, zero, self.dilation, self.groups)
        if isinstance(self.padding, str):
            rp = self._reversed_padding_repeated_twice
            left = tuple(rp[2 * i] for i in range(self._dims - 1, -1, -1))
            extra = [0, 0] * self._dims
            for i in range(self._dims):  # asymmetric 'same': the odd pixel goes at the end
                extra[2 * i + 1] = rp[2 * i + 1] - rp[2 * i]
            if any(extra):
                x = F.pad(x, extra)
            return op(x, w, b, self.stride, left, self.dilation, self.groups)
        return op(x, w, b, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):  # noqa: A002
        self._check_input(input)
        return self._run(self._conv, input)


class Conv1d(_Conv):
    """1-D convolution over (N, C_in, L) (or unbatched (C_in, L)) input; weight
    (C_out, C_in/groups, k). padding: int, tuple, 'valid' or 'same';
    padding_mode: 'zeros', 'reflect', 'replicate' or 'circular'."""
    _dims, _ntuple, _op = 1, staticmethod(_single), "conv1d"


class Conv2d(_Conv):
    """2-D convolution over (N, C_in, H, W) input; weight (C_out, C_in/groups,
    kH, kW). See Conv1d for the options."""
    _dims, _ntuple, _op = 2, staticmethod(_pair), "conv2d"


class Conv3d(_Conv):
    """3-D convolution over (N, C_in, D, H, W) input. See Conv1d."""
    _dims, _ntuple, _op = 3, staticmethod(_triple), "conv3d"


class _ConvTransposeNd(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         True, output_padding, groups, bias, padding_mode, device, dtype)
        name = type(self).__name__
        for op, s, d in zip(self.output_padding, self.stride, self.dilation):
            if op >= s and op >= d:
                raise ValueError(f"[{name}] output_padding ({self.output_padding}) must be "
                                 f"smaller than either stride ({self.stride}) or dilation "
                                 f"({self.dilation})")

    def _output_padding(self, x, output_size):
        """output_padding for a requested output_size (torch's rule)."""
        if output_size is None:
            return self.output_padding
        k = self._dims
        output_size = [int(s) for s in output_size]
        if len(output_size) == k + 2 or (len(output_size) == k + 1 and x.ndim == k + 1):
            output_size = output_size[-k:]
        if len(output_size) != k:
            raise ValueError(f"[{type(self).__name__}] output_size must have {k} or {k + 2} "
                             f"elements (got {len(output_size)})")
        spatial = tuple(x.shape)[-k:]
        result = []
        for d in range(k):
            min_size = ((spatial[d] - 1) * self.stride[d] - 2 * self.padding[d]
                        + self.dilation[d] * (self.kernel_size[d] - 1) + 1)
            max_size = min_size + self.stride[d] - 1
            if not min_size <= output_size[d] <= max_size:
                raise ValueError(f"[{type(self).__name__}] requested an output size of "
                                 f"{output_size}, but valid sizes range from {min_size} to "
                                 f"{max_size} along spatial dim {d} (for an input of "
                                 f"{tuple(x.shape)})")
            result.append(output_size[d] - min_size)
        return tuple(result)

    def forward(self, input, output_size=None):  # noqa: A002
        self._check_input(input)
        op = getattr(F, self._op)
        output_padding = self._output_padding(input, output_size)
        return self._run(lambda x: op(x, self.weight, self.bias, self.stride, self.padding,
                                      output_padding, self.groups, self.dilation), input)


class ConvTranspose1d(_ConvTransposeNd):
    """1-D transposed convolution; weight (C_in, C_out/groups, k)."""
    _dims, _ntuple, _op = 1, staticmethod(_single), "conv_transpose1d"


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution over (N, C_in, H, W) input; weight
    (C_in, C_out/groups, kH, kW). ``forward(x, output_size=None)``."""
    _dims, _ntuple, _op = 2, staticmethod(_pair), "conv_transpose2d"


class ConvTranspose3d(_ConvTransposeNd):
    """3-D transposed convolution; weight (C_in, C_out/groups, kD, kH, kW)."""
    _dims, _ntuple, _op = 3, staticmethod(_triple), "conv_transpose3d"
