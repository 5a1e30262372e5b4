"""Containers: Sequential, ModuleList, ModuleDict."""
import collections.abc
import operator
from collections import OrderedDict

from .module import Module


def _index(idx, n, what):
    try:
        idx = operator.index(idx)
    except TypeError:
        raise TypeError(f"{what} indices must be integers or slices, "
                        f"not {type(idx).__name__}") from None
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range for {what} of length {n}")
    return idx + n if idx < 0 else idx


class _ModuleSequence(Module):
    """Children named "0", "1", ... kept in order: the list operations shared by
    Sequential and ModuleList."""

    def _key(self, idx):
        return list(self._modules.keys())[_index(idx, len(self._modules), type(self).__name__)]

    def _renumber(self, mods):
        self._modules.clear()
        for i, m in enumerate(mods):
            self._modules[str(i)] = m

    def __setitem__(self, idx, module):
        setattr(self, self._key(idx), module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for key in list(self._modules.keys())[idx]:
                delattr(self, key)
        else:
            delattr(self, self._key(idx))
        self._renumber(list(self._modules.values()))  # "0".."n-1" again, as torch does

    def pop(self, idx):
        m = self[idx]
        del self[idx]
        return m

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        if not isinstance(modules, collections.abc.Iterable) or isinstance(modules, Module):
            raise TypeError(f"[{type(self).__name__}.extend] expected an iterable of Modules, "
                            f"got {type(modules).__name__}")
        for m in modules:
            self.append(m)
        return self


class Sequential(_ModuleSequence):
    """Modules applied in order: ``Sequential(m0, m1, ...)`` or
    ``Sequential(OrderedDict(name=module, ...))``. Children are named "0",
    "1", ... (or by the dict's keys)."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return self._modules[self._key(idx)]

    def insert(self, index, module):
        if not isinstance(module, Module):
            raise TypeError(f"module should be of type Module, got {type(module).__name__}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"index {index} is out of range for {type(self).__name__} of "
                             f"length {n}")
        if index < 0:
            index += n
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._renumber(mods)
        return self

    def forward(self, x):
        for module in self._modules.values():
            x = module(x)
        return x


class ModuleList(_ModuleSequence):
    """A list of sub-modules, registered as "0", "1", ..."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[self._key(idx)]

    def insert(self, index, module):
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward(); iterate over it")


class ModuleDict(Module):
    """An ordered dict of sub-modules."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        items = modules.items() if hasattr(modules, "items") else modules
        if not isinstance(items, collections.abc.Iterable) or isinstance(modules, Module):
            raise TypeError(f"[ModuleDict.update] expected a mapping or an iterable of (name, "
                            f"Module) pairs, got {type(modules).__name__}")
        for item in items:
            if not isinstance(item, (tuple, list)) or len(item) != 2:
                raise TypeError(f"[ModuleDict.update] expected (name, Module) pairs, got "
                                f"{item!r}")
            key, m = item
            self[key] = m

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward(); index it")


__all__ = ["Sequential", "ModuleList", "ModuleDict"]
