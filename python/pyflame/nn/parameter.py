"""``nn.Parameter``: marks a tensor as a trainable parameter of a Module.

Design. ``pf.Tensor`` is a C++-bound class without a Python constructor, so a
``Parameter`` cannot be a ``Tensor`` subclass. It is a small record instead:
``Parameter(t)`` holds the tensor in ``.data`` and makes it a grad leaf
(``requires_grad=True`` on the tensor itself; a tensor with autograd history
is detached first). Assigning one to a Module attribute registers it
(``module._parameters``), and reading the attribute back returns the tensor
itself::

    self.weight = nn.Parameter(pf.randn(4, 3))
    type(self.weight)                     # pyflame.Tensor: usable in any op
    pf.matmul(x, self.weight.T)
    self.weight.requires_grad             # True: the flag lives on the tensor
    loss.backward(); self.weight.grad     # gradients land on the tensor
    self._parameters['weight']            # the Parameter record

``module.parameters()`` yields those same tensor objects, which is what an
optimizer takes. In-place updates (``load_state_dict``, ``module.to(device)``,
``nn.init``, an optimizer step) rebind the tensor handle with
``Tensor._replace``, which keeps a leaf's ``requires_grad`` (and its ``.grad``
when the shape and device stay), so every holder of ``module.weight`` or of
the ``parameters()`` list sees the new values and the parameter stays
trainable.

``Parameter.requires_grad`` reads and writes the tensor's flag. Only
floating-point tensors can require grad: ``Parameter(int_tensor)`` raises
unless ``requires_grad=False``.

A ``Parameter`` held directly forwards attribute access (``p.shape``,
``p.grad``, ``p.numpy()``, ``p.sum()``) and Python operators (``p * 2``,
``p @ x``) to ``p.data``; the module-level ops (``pf.matmul(x, p)``) need the
tensor: pass ``p.data`` or the module attribute.
"""
from .. import _core
from .. import ops as _ops

Tensor = _core.Tensor


def _as_leaf(t, requires_grad):
    """t as a grad leaf with the given flag (detached if it has history)."""
    if not t.is_leaf:
        t = _core.detach(t)
    t.requires_grad = bool(requires_grad)
    return t


class Parameter:
    """A tensor registered as a module parameter (see the module docstring)."""

    __slots__ = ("data",)

    def __init__(self, data=None, requires_grad=True):
        if isinstance(data, Parameter):
            data = data.data
        elif data is None:
            data = _ops.zeros(0)
        elif not isinstance(data, Tensor):
            data = _ops.tensor(data)
        object.__setattr__(self, "data", _as_leaf(data, requires_grad))

    def __reduce__(self):
        # pickle and copy.deepcopy (of a module too): a Parameter of a copy
        # of the tensor (Tensor.__reduce__).
        return Parameter, (self.data, self.data.requires_grad)

    def __getattr__(self, name):
        if name in Parameter.__slots__ or name.startswith("__"):
            raise AttributeError(name)
        return getattr(object.__getattribute__(self, "data"), name)

    @property
    def requires_grad(self):
        return self.data.requires_grad

    def __setattr__(self, name, value):
        if name == "data":
            if isinstance(value, Parameter):
                value = value.data
            if not isinstance(value, Tensor):
                raise TypeError("Parameter.data must be a pyflame.Tensor, got "
                                f"{type(value).__name__}")
            object.__setattr__(self, "data", _as_leaf(value, self.data.requires_grad))
        elif name == "requires_grad":
            self.data.requires_grad = bool(value)
        elif name == "grad":
            self.data.grad = value
        else:
            raise AttributeError(f"cannot set attribute {name!r} of a Parameter "
                                 "(set it on param.data)")

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
