"""The Array API's array object: the attributes and operators it adds to
pf.Tensor (``__array_namespace__``, ``mT``, ``to_device``, ``//``, ``%``,
bitwise operators and ``__index__``). Python scalars on either side adopt
the tensor's dtype (weak typing), as the standard asks."""
import operator

from .. import _core

_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12")


def __array_namespace__(self, /, *, api_version=None):
    if api_version is not None and api_version not in _VERSIONS:
        raise ValueError(f"[__array_namespace__] unsupported api_version {api_version!r}; "
                         f"expected one of {_VERSIONS}")
    from .. import array_api
    return array_api


def _mT(self):
    if self.ndim < 2:
        raise ValueError(f"[mT] expected at least 2 dimensions, got shape {tuple(self.shape)}")
    return _core.swapaxes(self, -1, -2)


def to_device(self, device, /, *, stream=None):
    if stream is not None:
        raise ValueError("[to_device] the stream argument is not supported; pass None")
    return self.to(str(device))


def __index__(self):
    if self.ndim != 0 or self.dtype.is_floating_point or self.dtype == _core.Dtype.bool:
        raise TypeError(f"[__index__] only 0-d integer tensors can be used as an index, got "
                        f"shape {tuple(self.shape)} and dtype {self.dtype}")
    return operator.index(self.item())


def __complex__(self):
    return complex(self.__float__())


def _binary(fn):
    return (lambda self, other: fn(self, other)), (lambda self, other: fn(other, self))


_OPS = {
    "floordiv": _core.floor_divide, "mod": _core.remainder, "and": _core.bitwise_and,
    "or": _core.bitwise_or, "xor": _core.bitwise_xor, "lshift": _core.bitwise_left_shift,
    "rshift": _core.bitwise_right_shift,
}


def install(cls):
    cls.__array_namespace__ = __array_namespace__
    cls.mT = property(_mT)
    cls.to_device = to_device
    cls.__index__ = __index__
    cls.__complex__ = __complex__
    cls.__pos__ = lambda self: self
    cls.__invert__ = lambda self: _core.bitwise_invert(self)
    for name, fn in _OPS.items():
        fwd, rev = _binary(fn)
        setattr(cls, f"__{name}__", fwd)
        setattr(cls, f"__r{name}__", rev)
