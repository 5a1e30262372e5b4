"""The ``Optimizer`` base class: parameter groups, state, zero_grad, step
and state dicts, in the shape of ``torch.optim.Optimizer``."""
import collections.abc
import math
import numbers
import warnings

import numpy as np

from .. import _core
from .._compile import _guard
from ..autograd import enable_grad, no_grad
from ..nn.parameter import Parameter

Tensor = _core.Tensor


class _RequiredParameter:
    """The default of an option every parameter group must set (e.g. lr)."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()
_SET_ERROR = ("optimizer parameters need to be organized in ordered collections, but the "
              "ordering of tensors in sets will change between runs. Please use a list instead.")


def _tensor_of(p):
    return p.data if isinstance(p, Parameter) else p


class _State(collections.abc.MutableMapping):
    """Per-parameter state, keyed by the parameter tensor.

    Tensors hash by their graph node, which changes on every update
    (``_replace``), and compare elementwise, so this map keys by object
    identity. Reading a missing parameter gives a fresh empty dict (torch's
    defaultdict)."""

    def __init__(self):
        self._entries = {}  # id(tensor) -> (tensor, state dict)

    def __getitem__(self, p):
        p = _tensor_of(p)
        entry = self._entries.get(id(p))
        if entry is None:
            entry = self._entries[id(p)] = (p, {})
        return entry[1]

    def __setitem__(self, p, value):
        p = _tensor_of(p)
        self._entries[id(p)] = (p, value)

    def __delitem__(self, p):
        del self._entries[id(_tensor_of(p))]

    def __contains__(self, p):
        return id(_tensor_of(p)) in self._entries

    def get(self, p, default=None):
        entry = self._entries.get(id(_tensor_of(p)))
        return default if entry is None else entry[1]

    def __iter__(self):
        return (p for p, _ in list(self._entries.values()))

    def __len__(self):
        return len(self._entries)

    def __repr__(self):
        return "{" + ", ".join(f"<tensor {tuple(p.shape)}>: {s!r}"
                               for p, s in self._entries.values()) + "}"


def _state_value(param, key, value):
    """A loaded state entry on the parameter's device (floating tensors in its
    dtype, as torch casts them); 'step' stays a number."""
    if isinstance(value, dict):
        return {k: _state_value(param, k, v) for k, v in value.items()}
    if key == "step":
        try:
            step = float(np.asarray(value))
        except (TypeError, ValueError):
            raise TypeError(f"[load_state_dict] a parameter's 'step' must be a number, got {value!r}") from None
        return int(step) if step.is_integer() else step
    if not isinstance(value, Tensor) and hasattr(value, "__array__"):
        value = _core.from_numpy(np.ascontiguousarray(np.asarray(value)), None)
    if isinstance(value, Tensor):
        if value.dtype.is_floating_point and param.dtype.is_floating_point:
            value = value.astype(param.dtype)
        if value.device != param.device:
            value = value.to(param.device)
    return value


class Optimizer:
    """Base class: holds ``param_groups`` (a list of dicts with ``params`` and
    the options) and ``state`` (a dict per parameter). Subclasses implement
    ``_update(group)``, which returns the new parameter values and state
    tensors; ``step`` rebinds the parameters in place (``p._replace``) under
    no_grad and evaluates everything in one pass.

    ``params`` is an iterable of tensors (``module.parameters()``) or of dicts
    with a ``params`` entry and per-group options that override the defaults.
    """

    def __init__(self, params, defaults):
        self.defaults = dict(defaults)
        self.state = _State()
        self.param_groups = []
        if isinstance(params, (Tensor, Parameter)):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            f"Tensors or dicts, but got {type(params).__name__}")
        if isinstance(params, set):
            raise TypeError(_SET_ERROR)
        if not isinstance(params, collections.abc.Iterable):
            raise TypeError(f"[{type(self).__name__}] params must be an iterable of Tensors or "
                            f"dicts, got {type(params).__name__}")
        groups = list(params)
        if not groups:
            raise ValueError(f"[{type(self).__name__}] optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {group[k]}" for k in sorted(group) if k != "params"]
        return "\n".join(lines + [")"])

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def add_param_group(self, param_group):
        """Adds a group of parameters (a dict with ``params`` and options; the
        options it leaves out take the optimizer's defaults)."""
        fn = f"{type(self).__name__}.add_param_group"
        if not isinstance(param_group, dict):
            raise TypeError(f"[{fn}] param group must be a dict, got "
                            f"{type(param_group).__name__}")
        if "params" not in param_group:
            raise ValueError(f"[{fn}] a param group needs a 'params' entry, got keys "
                             f"{sorted(param_group)}")
        params = param_group["params"]
        if isinstance(params, (Tensor, Parameter)):
            params = [params]
        elif isinstance(params, set):
            raise TypeError(_SET_ERROR)
        elif not isinstance(params, collections.abc.Iterable):
            raise TypeError(f"[{fn}] params must be a Tensor or an iterable of Tensors, got "
                            f"{type(params).__name__}")
        params = [_tensor_of(p) for p in params]
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"[{fn}] optimizer can only optimize Tensors, but one of the params "
                                f"is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError(f"[{fn}] can't optimize a non-leaf Tensor")
        group = dict(param_group, params=params)
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"[{fn}] parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            group.setdefault(name, default)
        self._check_options(group, fn)
        ids = [id(p) for p in params]
        if len(set(ids)) != len(ids):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; "
                          "in future, this will cause an error", stacklevel=3)
        taken = {id(p) for g in self.param_groups for p in g["params"]}
        if taken & set(ids):
            raise ValueError(f"[{fn}] some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        """Clears the gradients: to None (the default) or to zeros."""
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is not None:
                    p.grad = None if set_to_none else _core.full(
                        list(g.shape), 0.0, g.dtype, g.device, "zero_grad")

    def step(self, closure=None):
        """One update of every parameter that has a gradient. ``closure``
        (optional) re-evaluates the model and returns the loss; it runs with
        grad enabled before the update. Returns its loss."""
        loss = None
        if closure is not None and not callable(closure):
            raise TypeError(f"[{type(self).__name__}.step] closure must be callable, got "
                            f"{type(closure).__name__}")
        if closure is not None:
            with enable_grad():
                loss = closure()
        _guard(self._options)  # a compiled step bakes the options in
        pending = []
        with no_grad():
            for group in self.param_groups:
                pending += self._update(group)
        if pending:
            _core.eval(pending)
        return loss

    def _options(self):
        """The groups' options and sizes: what a compiled step bakes in."""
        return [(len(g["params"]), sorted((k, v) for k, v in g.items() if k != "params"))
                for g in self.param_groups]

    @staticmethod
    def _check_options(options, fn):
        """Raises for an option value the optimizer cannot use (a group's own
        options, the defaults, a loaded state dict's): subclasses check
        theirs."""

    def _update(self, group):
        raise NotImplementedError(f"{type(self).__name__} does not implement _update")

    @staticmethod
    def _set(param, value):
        """Rebinds a parameter to its updated value (it stays a grad leaf)."""
        param._replace(value if value.dtype == param.dtype else value.astype(param.dtype))
        return param

    # ---------------------------------------------------------- state dicts
    def state_dict(self):
        """``{"state": {index: {...}}, "param_groups": [{options, "params":
        [indices]}]}``: parameters are numbered in group order, as torch does.
        State tensors are the current values (later steps rebind new ones,
        so the dict is a snapshot)."""
        index, groups = {}, []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in group["params"]]
            groups.append(packed)
        # State tensors may be rebound in place by later steps: new handles.
        state = {index[id(p)]: {k: _core.detach(v) if isinstance(v, Tensor) else v
                                for k, v in s.items()}
                 for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restores options and state from ``state_dict()`` output (state
        tensors move to each parameter's device and dtype)."""
        fn = f"{type(self).__name__}.load_state_dict"
        saved = _check_state_dict(state_dict, fn)
        if len(saved) != len(self.param_groups):
            raise ValueError(f"[{fn}] loaded state dict has a different number of parameter "
                             "groups")
        if any(len(s["params"]) != len(g["params"]) for s, g in zip(saved, self.param_groups)):
            raise ValueError(f"[{fn}] loaded state dict contains a parameter group that doesn't "
                             "match the size of optimizer's group")
        by_index = {i: p for s, g in zip(saved, self.param_groups)
                    for i, p in zip(s["params"], g["params"])}
        state = _State()
        for i, entry in state_dict["state"].items():
            if i in by_index:
                if not isinstance(entry, dict):
                    raise TypeError(f"[{fn}] the state of parameter {i} must be a dict, got "
                                    f"{type(entry).__name__}")
                p = by_index[i]
                state[p] = {k: _state_value(p, k, v) for k, v in entry.items()}
        groups = []
        for s, g in zip(saved, self.param_groups):
            group = {k: v for k, v in g.items() if k != "params"}  # options it lacks stay
            group.update((k, v) for k, v in s.items() if k != "params")
            group["params"] = g["params"]
            self._check_options(group, fn)
            groups.append(group)
        self.state, self.param_groups = state, groups


def _check_state_dict(state_dict, fn):
    """The parameter groups of an optimizer state dict, after checking its
    layout ({"state": dict, "param_groups": [{"params": [...], ...}]})."""
    if not isinstance(state_dict, collections.abc.Mapping):
        raise TypeError(f"[{fn}] expected a dict from state_dict(), got "
                        f"{type(state_dict).__name__}")
    for key, kind in (("state", collections.abc.Mapping), ("param_groups", (list, tuple))):
        if key not in state_dict:
            raise ValueError(f"[{fn}] the state dict has no {key!r} entry (expected the output "
                             "of Optimizer.state_dict())")
        if not isinstance(state_dict[key], kind):
            raise TypeError(f"[{fn}] state_dict[{key!r}] must be a "
                            f"{'dict' if key == 'state' else 'list'}, got "
                            f"{type(state_dict[key]).__name__}")
    groups = state_dict["param_groups"]
    for i, g in enumerate(groups):
        if not isinstance(g, collections.abc.Mapping) or \
                not isinstance(g.get("params"), (list, tuple)):
            raise ValueError(f"[{fn}] param_groups[{i}] must be a dict with a 'params' list, "
                             f"got {g!r}")
    return groups


def _check_range(value, name, low=0.0, high=None, closed_high=False, fn="Optimizer"):
    """torch's 'Invalid ... value' checks, after a check that the value is a
    real number (a string or None would fail the comparison obscurely)."""
    if isinstance(value, Tensor) and value.size == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"[{fn}] {name} must be a real number, got {type(value).__name__} "
                        f"{value!r}")
    ok = value >= low and (high is None or (value <= high if closed_high else value < high))
    if not ok or math.isnan(value):
        raise ValueError(f"[{fn}] Invalid {name}: {value}")


def _check_betas(betas, fn):
    """A pair of coefficients in [0, 1), as torch's Adam takes them."""
    try:
        b1, b2 = betas
    except (TypeError, ValueError):
        raise TypeError(f"[{fn}] betas must be a pair of numbers, got {betas!r}") from None
    _check_range(b1, "beta parameter at index 0", 0.0, 1.0, fn=fn)
    _check_range(b2, "beta parameter at index 1", 0.0, 1.0, fn=fn)
    return (b1, b2)
