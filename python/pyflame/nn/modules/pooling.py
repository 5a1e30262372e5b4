"""Pooling: MaxPool1d/2d/3d, AvgPool1d/2d/3d, AdaptiveAvgPool2d."""
from .. import functional as F
from ._utils import _single
from .module import Module


class _MaxPoolNd(Module):
    _op = ""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        if return_indices:
            raise ValueError(f"[{type(self).__name__}] return_indices=True is not supported")
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input):  # noqa: A002
        return getattr(F, self._op)(input, self.kernel_size, self.stride, self.padding,
                                    self.dilation, self.ceil_mode)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """Max over windows of (N, C, L) input (F.max_pool1d)."""
    _op = "max_pool1d"


class MaxPool2d(_MaxPoolNd):
    """Max over windows of (N, C, H, W) input (F.max_pool2d)."""
    _op = "max_pool2d"


class MaxPool3d(_MaxPoolNd):
    """Max over windows of (N, C, D, H, W) input (F.max_pool3d)."""
    _op = "max_pool3d"


class _AvgPoolNd(Module):
    _op = ""

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(self, input):  # noqa: A002
        return getattr(F, self._op)(input, self.kernel_size, self.stride, self.padding,
                                    self.ceil_mode, self.count_include_pad)


class AvgPool1d(_AvgPoolNd):
    """Average over windows of (N, C, L) input (F.avg_pool1d)."""
    _op = "avg_pool1d"

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if stride is not None else kernel_size)
        self.padding = _single(padding)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad


class _AvgPool23(_AvgPoolNd):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):  # noqa: A002
        return getattr(F, self._op)(input, self.kernel_size, self.stride, self.padding,
                                    self.ceil_mode, self.count_include_pad, self.divisor_override)


class AvgPool2d(_AvgPool23):
    """Average over windows of (N, C, H, W) input (F.avg_pool2d)."""
    _op = "avg_pool2d"


class AvgPool3d(_AvgPool23):
    """Average over windows of (N, C, D, H, W) input (F.avg_pool3d)."""
    _op = "avg_pool3d"


class AdaptiveAvgPool2d(Module):
    """Average pooling to a fixed output size (H_out, W_out) for any input
    size; an int means a square output, None keeps the input's size."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):  # noqa: A002
        size = self.output_size
        if isinstance(size, (tuple, list)):
            if len(size) != 2:
                raise ValueError(f"[AdaptiveAvgPool2d] output_size must be an int or a pair, "
                                 f"got {size!r}")
            spatial = tuple(input.shape)[-2:]
            size = tuple(spatial[i] if s is None else s for i, s in enumerate(size))
        elif size is None:
            size = tuple(input.shape)[-2:]
        return F.adaptive_avg_pool2d(input, size)

    def extra_repr(self):
        return f"output_size={self.output_size}"
