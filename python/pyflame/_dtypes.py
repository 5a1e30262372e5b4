"""``pf.finfo`` / ``pf.iinfo``: range and precision of a dtype, with the
attributes of ``numpy.finfo`` / ``numpy.iinfo`` (and ``torch.finfo``)."""
from . import _core


class finfo:  # noqa: N801  (NumPy's and PyTorch's name)
    """Floating dtype limits: bits, eps, max, min, smallest_normal (alias
    tiny) and resolution."""

    def __init__(self, dtype):
        self.dtype = _core._dtype(dtype, "finfo")
        (self.bits, self.eps, self.max, self.min, self.smallest_normal,
         self.resolution) = _core._finfo(self.dtype)
        self.tiny = self.smallest_normal

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, bits={self.bits}, "
                f"dtype={self.dtype})")


class iinfo:  # noqa: N801
    """Integer dtype limits: bits, min and max."""

    def __init__(self, dtype):
        self.dtype = _core._dtype(dtype, "iinfo")
        self.bits, self.min, self.max = _core._iinfo(self.dtype)

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, bits={self.bits}, dtype={self.dtype})"
