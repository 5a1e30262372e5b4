"""``pf.compile``: trace a function once per input signature, then replay
the recorded graph on later calls without running the Python function
(design: docs/design/replay.md).

A call's signature is the nesting of its arguments (tuples, lists, dicts),
the values of its non-tensor arguments (static: a new value traces again),
each tensor's shape, layout, dtype, device and requires_grad, and the
switches a trace bakes in (grad mode, autocast, fusion, TF32). The first call
with a signature runs the function under a trace; later ones replay.

What a replay reproduces: the outputs (evaluated, ordinary tensors), the
handles the function rebound in place (``Tensor._replace``: parameters an
optimizer updates, its momentum buffers, running statistics), the ``.grad``
slots it wrote (backward, zero_grad), and fresh random draws (the same
numbers an eager call would draw). What it does not: Python state the
function changes (a counter, a new dict entry, a list it appends to), and
Python values it reads are baked in. Library code that keeps such state
calls ``_python_state(reason)`` while traced (optimizers creating their
state do): that trace is dropped and the next call traces again;
``permanent=True`` makes the function eager for good. Code whose Python
values may change between calls registers them with ``_guard(read)``
(optimizers guard their options, so a scheduler's new lr traces again).
"""
import functools
import threading
import warnings

from . import _core
from ._core import Tensor

__all__ = ["compile"]

_local = threading.local()


def _python_state(reason, permanent=False):
    """Marks the running trace (if any) as not replayable: it changed Python
    state that a replay would not change (see the module docstring)."""
    trace = getattr(_local, "trace", None)
    if trace is not None and trace.reason is None:
        trace.reason, trace.permanent = reason, permanent


def _guard(read):
    """Python values the running trace (if any) bakes in: ``read()`` is
    called again before each replay, and a different result traces again
    (an optimizer's learning rate changed by a scheduler)."""
    trace = getattr(_local, "trace", None)
    if trace is not None:
        trace.guards.append((read, read()))


class _TraceState:
    __slots__ = ("reason", "permanent", "guards")

    def __init__(self):
        self.reason, self.permanent, self.guards = None, False, []


def _flatten(obj, tensors):
    """The static description of obj (its nesting and non-tensor values),
    appending its tensors to `tensors`."""
    if isinstance(obj, Tensor):
        tensors.append(obj)
        return Tensor
    data = getattr(obj, "data", None)
    if isinstance(data, Tensor) and type(obj).__name__ == "Parameter":
        tensors.append(data)
        return Tensor
    if isinstance(obj, (tuple, list)):
        return (type(obj), tuple(_flatten(o, tensors) for o in obj))
    if isinstance(obj, dict):
        return (dict, tuple((k, _flatten(v, tensors)) for k, v in obj.items()))
    try:
        hash(obj)
    except TypeError:
        return ("id", id(obj))  # an unhashable static argument: by identity
    return obj


def _outputs(obj, tensors):
    """Like _flatten for a function's result; non-tensor values stay as they
    were traced."""
    if isinstance(obj, Tensor):
        tensors.append(obj)
        return Tensor
    if isinstance(obj, (tuple, list)):
        return (type(obj), [_outputs(o, tensors) for o in obj])
    if isinstance(obj, dict):
        return (dict, [(k, _outputs(v, tensors)) for k, v in obj.items()])
    return ("value", obj)


def _rebuild(spec, it):
    if spec is Tensor:
        return next(it)
    kind, body = spec
    if kind == "value":
        return body
    if kind is dict:
        return {k: _rebuild(v, it) for k, v in body}
    items = [_rebuild(s, it) for s in body]
    return tuple(items) if kind is tuple else list(items) if kind is list else kind(*items)


class Compiled:
    """A compiled function (what ``pf.compile`` returns)."""

    def __init__(self, fn, max_traces=8):
        self._fn = fn
        self._max_traces = int(max_traces)
        self._cache = {}      # signature -> (program, output spec, guards)
        self._traces = 0
        self._eager = None    # why calls are eager from now on (None: compiled)
        self._lock = threading.Lock()
        functools.update_wrapper(self, fn, updated=())

    @property
    def traces(self):
        """How many times the function was traced."""
        return self._traces

    @property
    def graphs(self):
        """How many of its programs replay as a captured GPU graph now."""
        return sum(entry[0].captured for entry in list(self._cache.values()))

    @property
    def steps(self):
        """Per program (one per traced signature): the names of the ops a
        replay records and evaluates, in order (views included)."""
        return [entry[0].step_names for entry in list(self._cache.values())]

    def __get__(self, obj, objtype=None):  # a compiled method binds like a function
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args, **kwargs):
        if self._eager is not None or _core._tracing():
            return self._fn(*args, **kwargs)  # inside another trace: part of it
        # The common case (tensor arguments only): checked and hashed in one
        # call, no Python loop over the arguments.
        sig = None if kwargs else _core._tensor_args_signature(args)
        if sig is not None:
            tensors, key = args, (len(args), sig)
        else:
            tensors = []
            static = _flatten((args, kwargs), tensors)
            key = (static, _core._compile_signature(tensors))
        entry = self._cache.get(key)
        if entry is not None:
            if not entry[2] or all(read() == value for read, value in entry[2]):
                outs = entry[0].replay(tensors)
                if outs is not None:
                    spec = entry[1]
                    return outs[0] if spec is Tensor else _rebuild(spec, iter(outs))
            self._cache.pop(key, None)  # something baked in changed: trace again
        return self._trace(key, tensors, args, kwargs)

    def _go_eager(self, why):
        if self._eager is None:
            self._eager = why
            name = getattr(self._fn, "__qualname__", repr(self._fn))
            warnings.warn(f"[compile] {name} runs eagerly from now on: {why}", RuntimeWarning,
                          stacklevel=4)

    def _trace(self, key, tensors, args, kwargs):
        with self._lock:
            self._traces += 1
            over = self._traces > self._max_traces
        if over:
            self._go_eager(f"traced {self._max_traces} times (new input signatures, or "
                           "captured tensors that keep changing)")
            return self._fn(*args, **kwargs)
        trace, state = _core._Trace(), _TraceState()
        _local.trace = state
        trace.begin()
        try:
            out = self._fn(*args, **kwargs)
        finally:
            trace.end()
            _local.trace = None
        outs = []
        spec = _outputs(out, outs)
        if trace.host_read:
            self._go_eager(f"it makes {trace.host_read}, so its result depends on values "
                           "read during the call")
        elif state.reason is not None:
            if state.permanent:
                self._go_eager(state.reason)
        else:
            program = _core._Program.build(trace, tensors, outs)
            self._cache[key] = (program, spec, tuple(state.guards))
        if outs:
            _core.eval(outs)
        return out


def compile(fn=None, *, max_traces=8):  # noqa: A001  (torch's and mlx's name)
    """Compiles ``fn``: the first call with each input signature traces it,
    later calls replay the recorded graph without running the Python code.
    Usable as ``pf.compile(fn)``, ``@pf.compile`` or
    ``@pf.compile(max_traces=4)``; see pyflame/_compile.py for what is
    replayed."""
    if fn is None:
        return lambda f: compile(f, max_traces=max_traces)
    if not callable(fn):
        raise TypeError(f"[compile] expected a callable, got {type(fn).__name__}")
    if isinstance(max_traces, bool) or not isinstance(max_traces, int) or max_traces < 1:
        raise ValueError(f"[compile] max_traces must be a positive int, got {max_traces!r}")
    return Compiled(fn, max_traces)
