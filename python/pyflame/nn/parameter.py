"""``nn.Parameter``: marks a tensor as a trainable parameter of a Module.

Design. ``pf.Tensor`` is a C++-bound class without a Python constructor, so a
``Parameter`` cannot be a ``Tensor`` subclass. It is a small record instead:
``Parameter(t)`` holds the tensor in ``.data`` and the flag ``.requires_grad``.
Assigning one to a Module attribute registers it (``module._parameters``), and
reading the attribute back returns the tensor itself::

    self.weight = nn.Parameter(pf.randn(4, 3))
    type(self.weight)                     # pyflame.Tensor: usable in any op
    pf.matmul(x, self.weight.T)
    self._parameters['weight']            # the Parameter record
    self.get_parameter('weight').requires_grad   # True

``module.parameters()`` yields those same tensor objects. In-place updates
(``load_state_dict``, ``module.to(device)``, running statistics, a future
optimizer step) rebind the tensor handle with ``Tensor._replace``, so every
holder of ``module.weight`` or of the ``parameters()`` list sees them.

Autograd seam: ``requires_grad`` is recorded per parameter (``Module.
requires_grad_`` sets it). When gradients arrive, the flag moves onto the
tensor and ``Parameter`` only needs to set it there.

A ``Parameter`` held directly forwards attribute access (``p.shape``,
``p.numpy()``, ``p.sum()``) and Python operators (``p * 2``, ``p @ x``) to
``p.data``; the module-level ops (``pf.matmul(x, p)``) need the tensor:
pass ``p.data`` or the module attribute.
"""
from .. import _core
from .. import ops as _ops

Tensor = _core.Tensor


class Parameter:
    """A tensor registered as a module parameter (see the module docstring)."""

    __slots__ = ("data", "requires_grad")

    def __init__(self, data=None, requires_grad=True):
        if isinstance(data, Parameter):
            data = data.data
        elif data is None:
            data = _ops.zeros(0)
        elif not isinstance(data, Tensor):
            data = _ops.tensor(data)
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "requires_grad", bool(requires_grad))

    def __getattr__(self, name):
        if name in Parameter.__slots__ or name.startswith("__"):
            raise AttributeError(name)
        return getattr(object.__getattribute__(self, "data"), name)

    def __setattr__(self, name, value):
        if name == "data":
            if isinstance(value, Parameter):
                value = value.data
            if not isinstance(value, Tensor):
                raise TypeError("Parameter.data must be a pyflame.Tensor, got "
                                f"{type(value).__name__}")
        elif name == "requires_grad":
            value = bool(value)
        else:
            raise AttributeError(f"cannot set attribute {name!r} of a Parameter "
                                 "(set it on param.data)")
        object.__setattr__(self, name, value)

    def requires_grad_(self, requires_grad=True):
        self.requires_grad = requires_grad
        return self

    def __repr__(self):
        flag = "" if self.requires_grad else " (requires_grad=False)"
        return f"Parameter containing{flag}:\n{self.data!r}"

    # NumPy conversion would silently copy through the host (and make
    # pf.add(x, param) "work" slowly); refuse it with a pointer to .data.
    def __array__(self, dtype=None, copy=None):
        raise TypeError("nn.Parameter is a marker around a tensor, not a tensor: use "
                        "param.data (or the module attribute, e.g. module.weight), or "
                        "param.numpy() for a NumPy copy")

    __hash__ = object.__hash__  # identity, like torch's Parameter (== is elementwise)


def _unwrap(v):
    return v.data if isinstance(v, Parameter) else v


def _forward_dunder(name):
    def method(self, *args):
        return getattr(self.data, name)(*[_unwrap(a) for a in args])
    method.__name__ = name
    return method


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__truediv__", "__rtruediv__", "__pow__", "__rpow__", "__matmul__",
              "__rmatmul__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
              "__neg__", "__abs__", "__getitem__", "__len__", "__bool__", "__float__",
              "__int__"):
    setattr(Parameter, _name, _forward_dunder(_name))
del _name
