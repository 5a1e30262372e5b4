"""``nn.Module``: the base class of every layer (PyTorch's bookkeeping)."""
from collections import OrderedDict, namedtuple

import numpy as np

from ... import _core
from ... import ops as _ops
from ...autograd import no_grad as _no_grad
from ..parameter import Parameter

Tensor = _core.Tensor

_DTYPE_NAMES = {"float32", "float16", "bfloat16", "int32", "int64", "bool",
                "float", "half", "long"}


class IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What ``load_state_dict(strict=False)`` returns."""
    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class StateDictError(RuntimeError, ValueError):
    """A state dict that does not fit the module (torch raises RuntimeError;
    this is also a ValueError, the framework's bad-argument error)."""


def _addindent(s, num_spaces):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    first = lines.pop(0)
    return first + "\n" + "\n".join(num_spaces * " " + line for line in lines)


def _shape_str(shape):
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _parse_to_args(args, kwargs):
    """(device, dtype) from Module.to's torch-style arguments."""
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, _core.Dtype) or (isinstance(a, str) and a in _DTYPE_NAMES):
            dtype = a
        elif isinstance(a, str):
            device = a
        else:
            raise TypeError(f"to() expects a device string, a dtype or a tensor, got {a!r}")
    if dtype is not None:
        dtype = _core._dtype(dtype, "Module.to")
        if not dtype.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got "
                            f"desired dtype={dtype}")
    return device, dtype


class Module:
    """Base class for all layers.

    Assigning an ``nn.Parameter``, a ``Module`` or (for a registered buffer
    name) a tensor to an attribute registers it, in assignment order; reading it
    back gives the tensor (parameters and buffers) or the sub-module. Subclasses
    call ``super().__init__()`` first and define ``forward``.
    """

    _version = 1
    training: bool

    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", OrderedDict())

    # ------------------------------------------------------------ forward
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  '"forward" function')

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # ------------------------------------------------------- registration
    def _check_init(self, what):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call "
                                 f"(call super().__init__() first in {type(self).__name__})")

    @staticmethod
    def _check_name(name, what):
        if not isinstance(name, str):
            raise TypeError(f"{what} name should be a string, got {type(name).__name__}")
        if name == "":
            raise KeyError(f'{what} name can\'t be empty string ""')
        if "." in name:
            raise KeyError(f'{what} name can\'t contain ".", got: {name}')

    def register_parameter(self, name, param):
        """Adds a parameter (an ``nn.Parameter``, or None for an optional one)."""
        self._check_init("parameters")
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                            f"'{name}' (nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Adds a buffer: state that is not a parameter (e.g. running_mean).
        Persistent buffers are part of ``state_dict()``."""
        self._check_init("buffers")
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if isinstance(tensor, Parameter):
            raise TypeError(f"cannot assign a Parameter as buffer '{name}' "
                            "(use register_parameter)")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer "
                            f"'{name}' (pyflame.Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        """Adds a child module (or None as a placeholder)."""
        self._check_init("child modules")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string, got {type(name).__name__}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"[{type(self).__name__}.add_module] {type(module).__name__} is not a "
                            "Module subclass")
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            self._check_init("parameters")
            self._remove_from(name, d, self._buffers, self._modules,
                              self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                    f"(nn.Parameter or None expected; to change the values in place use "
                    f"module.{name}._replace(tensor))")
            params[name] = None
        elif isinstance(value, Module):
            self._check_init("child modules")
            self._remove_from(name, d, params, self._buffers, self._non_persistent_buffers_set)
            self._modules[name] = value
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module "
                                f"'{name}' (nn.Module or None expected)")
            d["_modules"][name] = None
        elif d.get("_buffers") is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(pyflame.Tensor or None expected)")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    @staticmethod
    def _remove_from(name, *containers):
        for c in containers:
            if isinstance(c, set):
                c.discard(name)
            elif name in c:
                del c[name]

    def __getattr__(self, name):
        d = self.__dict__
        if "_parameters" in d:
            if name in d["_parameters"]:
                p = d["_parameters"][name]
                return None if p is None else p.data
            if name in d["_buffers"]:
                return d["_buffers"][name]
            if name in d["_modules"]:
                return d["_modules"][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        keys = list(dir(type(self))) + list(self.__dict__) + list(self._parameters) + \
            list(self._modules) + list(self._buffers)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    # ---------------------------------------------------------- traversal
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(dotted name, module) for this module and every descendant, pre-order."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, get, prefix="", recurse=True, remove_duplicate=True):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        for mod_prefix, module in mods:
            for name, v in get(module):
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                if remove_duplicate:
                    seen.add(id(v))
                yield mod_prefix + ("." if mod_prefix else "") + name, v

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, tensor) for every parameter, in registration order
        (this module's own first, then each child's)."""
        for name, p in self._named_members(lambda m: m._parameters.items(), prefix, recurse,
                                           remove_duplicate):
            yield name, p.data

    def parameters(self, recurse=True):
        """The parameter tensors (the same objects as the module attributes).
        The order and de-duplication of named_parameters, without building
        the names: a training loop asks for them every step."""
        seen = set()
        for module in self._module_list() if recurse else (self,):
            for p in module._parameters.values():
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    yield p.data

    def _module_list(self, memo=None, out=None):
        """named_modules() without the names: this module and every
        descendant, pre-order, each once."""
        if memo is None:
            memo, out = set(), []
        if id(self) not in memo:
            memo.add(id(self))
            out.append(self)
            for module in self._modules.values():
                if module is not None:
                    module._module_list(memo, out)
        return out

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse,
                                       remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target):
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not isinstance(mod._modules.get(item), Module):
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = mod._modules[item]
        return mod

    def get_parameter(self, target):
        """The ``nn.Parameter`` record (tensor + requires_grad) at a dotted name."""
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._parameters or mod._parameters[name] is None:
            raise AttributeError(f"{mod._get_name()} has no parameter `{name}`")
        return mod._parameters[name]

    def get_buffer(self, target):
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._buffers:
            raise AttributeError(f"{mod._get_name()} has no buffer `{name}`")
        return mod._buffers[name]

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # --------------------------------------------------------- mode flags
    def train(self, mode=True):
        """Sets training mode on this module and all descendants; returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):  # noqa: A003  (torch's name)
        """Evaluation mode (``train(False)``); returns self."""
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        """Sets ``requires_grad`` on every parameter tensor (False freezes
        them: backward stops there and optimizers skip them); returns self."""
        for p in self.parameters():
            p.requires_grad = bool(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Clears the parameters' gradients: to None (the default, as in
        PyTorch 2) or, with ``set_to_none=False``, to zeros."""
        for p in self.parameters():
            g = p.grad
            if g is None:
                continue
            p.grad = None if set_to_none else _ops.zeros_like(g)

    # ------------------------------------------------- device and dtypes
    def _apply_to_tensors(self, fn):
        """Rebinds every parameter and buffer tensor to fn(tensor), in place
        (all or nothing: fn runs on every tensor before any is rebound).
        Parameters stay grad leaves; their gradients are converted too."""
        seen, pairs = set(), []
        with _no_grad():
            for m in self.modules():
                tensors = [p.data for p in m._parameters.values() if p is not None]
                tensors += [b for b in m._buffers.values() if b is not None]
                for t in tensors:
                    if id(t) not in seen:
                        seen.add(id(t))
                        g = t.grad
                        pairs.append((t, fn(t), None if g is None else fn(g)))
        for t, new, grad in pairs:
            if new is not t:
                t._replace(new)
                if grad is not None and t.requires_grad:
                    t.grad = grad
        return self

    def to(self, *args, **kwargs):
        """Moves and/or casts the parameters and buffers in place; returns self.

        ``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(tensor)`` or
        keywords ``device=``/``dtype=``. A dtype applies to floating-point
        tensors only (integer buffers such as num_batches_tracked keep theirs).
        """
        device, dtype = _parse_to_args(args, dict(kwargs))

        def convert(t):
            out = t
            if dtype is not None and t.dtype.is_floating_point and t.dtype != dtype:
                out = out.astype(dtype)
            if device is not None:
                out = out.to(device)
            return out
        return self._apply_to_tensors(convert)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        """Moves to the GPU backend ('rocm', or 'rocm:N' for an index)."""
        return self.to("rocm" if device is None else f"rocm:{int(device)}")

    rocm = cuda

    def float(self):  # noqa: A003
        return self.to(_core.Dtype.float32)

    def half(self):
        return self.to(_core.Dtype.float16)

    def bfloat16(self):
        return self.to(_core.Dtype.bfloat16)

    # -------------------------------------------------------- state dict
    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """An OrderedDict from dotted names to the parameter and persistent
        buffer tensors (this module's parameters, then its buffers, then each
        child's, as torch orders them). The values are the live tensors (like
        torch's, they share data with the module); with ``keep_vars=True``
        parameters come as their ``nn.Parameter`` records."""
        if destination is None:
            destination = OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.data
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".",
                             keep_vars=keep_vars)
        return destination

    def _state_targets(self):
        """name -> the live tensor that state_dict() holds under that name."""
        return OrderedDict(self.state_dict())

    def load_state_dict(self, state_dict, strict=True):
        """Copies values into the parameters and buffers, in place.

        Values may be pyflame tensors, NumPy arrays or anything array-like (a
        CPU torch tensor, nested lists); each is converted to the target's
        dtype and device. Shapes must match. With ``strict`` the keys must
        match exactly. Nothing is changed unless the whole dict fits (torch
        copies the matching entries before raising). Raises ``StateDictError``
        (a RuntimeError and a ValueError) naming the missing and unexpected keys
        and the size mismatches; returns ``IncompatibleKeys(missing_keys,
        unexpected_keys)``.
        """
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        targets = self._state_targets()
        missing = [k for k in targets if k not in state_dict]
        unexpected = [k for k in state_dict.keys() if k not in targets]
        errors, updates = [], []
        for key, dst in targets.items():
            if key not in state_dict:
                continue
            src = state_dict[key]
            if isinstance(src, Parameter):
                src = src.data
            if not isinstance(src, Tensor):
                try:
                    src = _ops.tensor(np.asarray(src), device=dst.device)
                except (TypeError, ValueError) as e:
                    errors.append(f'While copying the parameter named "{key}", expected an '
                                  f'array-like value, got {type(state_dict[key]).__name__}: {e}')
                    continue
            if tuple(src.shape) != tuple(dst.shape):
                errors.append(f"size mismatch for {key}: copying a param with shape "
                              f"{_shape_str(src.shape)} from checkpoint, the shape in current "
                              f"model is {_shape_str(dst.shape)}.")
                continue
            updates.append((dst, src))
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise StateDictError("Error(s) in loading state_dict for {}:\n\t{}".format(
                self._get_name(), "\n\t".join(errors)))
        with _no_grad():
            for dst, src in updates:
                new = src
                if new.dtype != dst.dtype:
                    new = new.astype(dst.dtype)
                if new.device != dst.device:
                    new = new.to(dst.device)
                dst._replace(new)  # a parameter stays a trainable leaf
        return IncompatibleKeys(missing, unexpected)

    def save(self, path):
        """Saves ``state_dict()`` to ``path`` in the safetensors format
        (``pf.save``): a checkpoint ``safetensors.torch.load_file`` reads."""
        from ... import serialization
        serialization.save(self.state_dict(), path)

    def load(self, path, strict=True):
        """Loads a checkpoint written by ``save`` (or any safetensors state
        dict with matching names) through ``load_state_dict(..., strict)``;
        values take each parameter's dtype and device. Returns
        ``IncompatibleKeys``."""
        from ... import serialization
        return self.load_state_dict(serialization.load(path, device="cpu"), strict=strict)

    # -------------------------------------------------------------- repr
    def _get_name(self):
        return type(self).__name__

    def extra_repr(self):
        """The per-layer part of repr(); override in subclasses."""
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({key}): " + _addindent(repr(m), 2) for key, m in self._modules.items()]
        lines = extra_lines + child_lines
        s = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                s += extra_lines[0]
            else:
                s += "\n  " + "\n  ".join(lines) + "\n"
        return s + ")"
