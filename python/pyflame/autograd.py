"""Automatic differentiation: grad mode, ``grad`` and ``value_and_grad``.

Tensors carry ``requires_grad``, ``.grad``, ``.backward()`` and ``.detach()``
(PyTorch's names). This module adds grad-mode switches and the functional
form::

    with pf.no_grad():          # ops record no history (inference, updates)
        ...
    df = pf.grad(f)             # df(x) == d f(x) / dx, f returns a scalar
    loss, g = pf.value_and_grad(f, argnums=(0, 1))(w, b)

Gradients are graphs built from ops, evaluated lazily on the tensors'
devices like any other result. ``Function`` defines an op with a custom
backward (``torch.autograd.Function``'s interface).
"""
import contextlib
import functools
import numbers
import threading

from . import _core

is_grad_enabled = _core.is_grad_enabled

# The kind of gradient computation running on this thread, innermost last:
# a set of node ids (hash(t)) for pf.grad's inputs, or None for .backward()
# (which accumulates into .grad). Custom backwards that recompute
# (checkpointing) follow the same mode.
_modes = threading.local()


def _mode_stack():
    if not hasattr(_modes, "stack"):
        _modes.stack = []
    return _modes.stack


@contextlib.contextmanager
def _backward_mode(grad_inputs=None):
    """A nested gradient computation: None for .backward(), else the node ids
    pf.grad was asked for."""
    stack = _mode_stack()
    stack.append(grad_inputs)
    try:
        yield
    finally:
        stack.pop()


def _functional_grad(outputs, inputs, grad_outputs):
    """_core._autograd_grad, recording that pf.grad (not .backward) runs."""
    with _backward_mode({hash(t) for t in inputs}):
        return _core._autograd_grad(outputs, inputs, grad_outputs)


def _current_grad_inputs():
    """None under .backward() (or outside any), else pf.grad's input ids."""
    stack = _mode_stack()
    return stack[-1] if stack else None


class _GradMode:
    """Sets grad mode for a ``with`` block or a decorated function."""
    _mode = True

    def __enter__(self):
        self._prev = _core.is_grad_enabled()
        _core.set_grad_enabled(self._mode)
        return self

    def __exit__(self, *exc):
        _core.set_grad_enabled(self._prev)
        return False

    def _fresh(self):
        return type(self)()

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self._fresh():
                return fn(*args, **kwargs)
        return wrapper


class set_grad_enabled(_GradMode):
    """Sets grad mode; usable as a call, a context manager or a decorator."""

    def __init__(self, mode):
        self._mode = bool(mode)
        self._prev = _core.is_grad_enabled()
        _core.set_grad_enabled(self._mode)  # the plain call takes effect at once

    def __enter__(self):
        return self  # already set by __init__; __exit__ restores

    def _fresh(self):
        return type(self)(self._mode)

    def __call__(self, fn):
        _core.set_grad_enabled(self._prev)  # as a decorator it changes nothing now
        return super().__call__(fn)


class no_grad(_GradMode):
    """Context manager and decorator: ops inside record no autograd history."""
    _mode = False


class enable_grad(_GradMode):
    """Context manager and decorator: turns grad mode back on inside no_grad."""
    _mode = True


def _flatten(tree, fn):
    """Tensors of a (nested) list, tuple or dict, and a function rebuilding it."""
    if isinstance(tree, _core.Tensor):
        return [tree], lambda leaves: leaves[0]
    if isinstance(tree, (list, tuple)):
        parts = [_flatten(v, fn) for v in tree]
        sizes = [len(p[0]) for p in parts]

        def rebuild(leaves):
            out, i = [], 0
            for (_, build), n in zip(parts, sizes):
                out.append(build(leaves[i:i + n]))
                i += n
            return type(tree)(out)
        return [t for p in parts for t in p[0]], rebuild
    if isinstance(tree, dict):
        keys = list(tree)
        leaves, build = _flatten([tree[k] for k in keys], fn)
        return leaves, lambda ls: dict(zip(keys, build(ls)))
    raise TypeError(f"[{fn}] arguments to differentiate must be tensors or lists, tuples "
                    f"or dicts of tensors, got {type(tree).__name__}")


def grad(outputs, inputs=None, grad_outputs=None, *, argnums=0):
    """Two forms.

    ``pf.grad(fn, argnums=0)`` returns a function computing the gradient of
    ``fn`` (which must return a single-element tensor) with respect to the
    positional arguments in ``argnums`` (an int or a tuple of ints). An
    argument may be a tensor or a list/tuple/dict of tensors; the gradient
    has the same structure.

    ``pf.grad(outputs, inputs, grad_outputs=None)`` (as ``torch.autograd.grad``)
    returns the gradients of ``outputs`` with respect to the tensors
    ``inputs`` without touching any ``.grad``.
    """
    if callable(outputs) and not isinstance(outputs, _core.Tensor):
        if inputs is not None:
            argnums = inputs
        fn = outputs
        value_grad = value_and_grad(fn, argnums)  # checks argnums now

        @functools.wraps(fn)
        def grad_fn(*args, **kwargs):
            return value_grad(*args, **kwargs)[1]
        return grad_fn
    single = isinstance(inputs, _core.Tensor)
    outs = _tensor_list(outputs, "outputs")
    ins = _tensor_list(inputs, "inputs")
    if grad_outputs is None:
        gos = []
    else:
        gos = _tensor_list(grad_outputs, "grad_outputs", allow_none=True)
    result = _functional_grad(outs, ins, gos)
    return result[0] if single else tuple(result)


def _tensor_list(v, what, allow_none=False):
    """A tensor or a sequence of tensors (None entries where allowed) as a list."""
    if isinstance(v, _core.Tensor):
        return [v]
    if isinstance(v, (list, tuple)) and all(
            isinstance(t, _core.Tensor) or (allow_none and t is None) for t in v):
        return list(v)
    raise TypeError(f"[grad] {what} must be a tensor or a sequence of tensors, got "
                    f"{type(v).__name__}")


def _check_argnums(argnums):
    """argnums as a tuple of ints (an int or a non-empty sequence of them)."""
    def is_int(v):
        return isinstance(v, numbers.Integral) and not isinstance(v, bool)
    if is_int(argnums):
        return (int(argnums),)
    if isinstance(argnums, (tuple, list)) and argnums and all(is_int(i) for i in argnums):
        if len(set(argnums)) != len(argnums):
            raise ValueError(f"[grad] argnums must not repeat an argument, got {argnums!r}")
        return tuple(int(i) for i in argnums)
    raise TypeError(f"[grad] argnums must be an int or a non-empty tuple of ints, got "
                    f"{argnums!r}")


def value_and_grad(fn, argnums=0):
    """A function returning ``(fn(*args), gradient)``; see :func:`grad`.
    Negative argnums count from the last positional argument."""
    if not callable(fn):
        raise TypeError(f"[grad] fn must be callable, got {type(fn).__name__}")
    single = isinstance(argnums, numbers.Integral) and not isinstance(argnums, bool)
    nums = _check_argnums(argnums)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        args = list(args)
        wrt, builders = [], []
        for i in nums:
            if not -len(args) <= i < len(args):
                raise ValueError(f"[grad] argnums {i} is out of range for "
                                 f"{len(args)} positional arguments")
            i %= len(args)
            leaves, build = _flatten(args[i], "grad")
            fresh = []
            for t in leaves:
                if not t.dtype.is_floating_point:
                    raise ValueError(f"[grad] can only differentiate with respect to "
                                     f"floating-point tensors, got {t.dtype}")
                leaf = _core.detach(t)
                leaf.requires_grad = True
                fresh.append(leaf)
            args[i] = build(fresh)
            wrt.append(fresh)
            builders.append(build)
        with enable_grad():
            value = fn(*args, **kwargs)
        out = value[0] if isinstance(value, tuple) else value  # (loss, aux) allowed
        if not isinstance(out, _core.Tensor) or out.size != 1:
            raise ValueError("[grad] the function must return a single-element tensor "
                             "(or a tuple whose first item is one)")
        flat = [t for group in wrt for t in group]
        grads = _functional_grad([out], flat, []) if flat else []
        result, i = [], 0
        for group, build in zip(wrt, builders):
            result.append(build(grads[i:i + len(group)]))
            i += len(group)
        detached = tuple(_core.detach(v) if isinstance(v, _core.Tensor) else v
                         for v in (value if isinstance(value, tuple) else (value,)))
        value = detached if isinstance(value, tuple) else detached[0]
        return value, (result[0] if single else tuple(result))
    return wrapper


# ----------------------------------------------------------- custom functions

class FunctionCtx:
    """The ``ctx`` passed to a custom Function's forward and backward.

    ``save_for_backward(*tensors)`` keeps tensors for backward
    (``ctx.saved_tensors``); any other attribute may be set too.
    ``needs_input_grad`` has one flag per forward argument.
    """

    def __init__(self, needs_input_grad=()):
        self.saved_tensors = ()
        self.needs_input_grad = tuple(needs_input_grad)

    def save_for_backward(self, *tensors):
        self.saved_tensors = tuple(tensors)


class Function:
    """An op with a hand-written gradient, as ``torch.autograd.Function``::

        class Square(pf.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return grad * 2 * x

        y = Square.apply(x)

    ``forward`` runs under no_grad. ``backward`` gets one gradient per output
    (zeros for outputs that did not receive one) and returns one per forward
    argument (None where there is none; a lone value for one argument). It
    runs during the backward pass, under no_grad unless it enables grad
    itself. Each floating-point output is a graph node that calls backward;
    with several outputs, backward runs once per output that receives a
    gradient (with zeros for the others).
    """

    _always_link = False  # link outputs even when no argument requires grad

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a Function subclass must define forward(ctx, *args)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("a Function subclass must define backward(ctx, *grads)")

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx(isinstance(a, _core.Tensor) and a.requires_grad for a in args)
        with no_grad():
            out = cls.forward(ctx, *args, **kwargs)
        if not is_grad_enabled() or not (any(ctx.needs_input_grad) or cls._always_link):
            return out
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        in_specs = [(i, _spec(a)) for i, a in enumerate(args) if isinstance(a, _core.Tensor)]
        inputs = [args[i] for i, _ in in_specs]
        out_specs = [_spec(o) for o in outs]
        linked = []
        for k, o in enumerate(outs):
            if isinstance(o, _core.Tensor) and o.dtype.is_floating_point:
                vjp = _custom_backward(cls, ctx, out_specs, k, in_specs)
                o = _core._custom_vjp(o, inputs, vjp, cls._always_link)
            linked.append(o)
        return linked[0] if single else tuple(linked)


def _zeros(spec):
    shape, dtype, device = spec
    return _core.full(list(shape), 0.0, dtype, device, "backward")


def _spec(t):
    return (t.shape, t.dtype, t.device) if isinstance(t, _core.Tensor) else None


def _custom_backward(cls, ctx, out_specs, k, in_specs):
    """The callback of output k: its cotangent -> the gradients of the tensor
    arguments the engine asks for (argnums index in_specs, a list of
    (argument position, spec))."""
    name = f"{cls.__name__}.backward"
    nargs = len(ctx.needs_input_grad)

    def vjp(cotan, argnums):
        grads_out = [cotan if j == k else (None if s is None else _zeros(s))
                     for j, s in enumerate(out_specs)]
        result = cls.backward(ctx, *grads_out)
        if not isinstance(result, (tuple, list)):
            result = (result,)
        if len(result) != nargs:
            raise ValueError(f"[{name}] returned {len(result)} gradients, expected {nargs} "
                             "(one per forward argument, None where there is none)")
        grads = []
        for a in argnums:
            pos, spec = in_specs[a]
            g = result[pos]
            if g is None:
                g = _zeros(spec)
            elif not isinstance(g, _core.Tensor):
                raise ValueError(f"[{name}] the gradient of argument {pos} must be a tensor or "
                                 f"None, got {type(g).__name__}")
            grads.append(g)
        return grads
    return vjp


class RemovableHandle:
    """What ``Tensor.register_post_accumulate_grad_hook`` returns: ``remove()``
    unregisters the hook (``torch.utils.hooks.RemovableHandle``)."""

    def __init__(self, tensor, hook_id):
        self._tensor, self._id = tensor, hook_id

    def remove(self):
        if self._tensor is not None:
            _core._remove_post_accumulate_grad_hook(self._tensor, self._id)
            self._tensor = None


def _register_post_accumulate_grad_hook(self, hook):
    """Calls ``hook(tensor)`` after each ``backward()`` that reaches this leaf
    has accumulated and evaluated its ``.grad`` (PyTorch's hook of the same
    name). ``tensor`` is a handle on this leaf. Leaves fire in the order the
    backward pass finishes their gradients, each once per backward; the hooks
    stay through optimizer steps. Returns a handle whose ``remove()`` drops it."""
    if not callable(hook):
        raise TypeError("[register_post_accumulate_grad_hook] hook must be callable")
    return RemovableHandle(self, _core._register_post_accumulate_grad_hook(self, hook))


_core.Tensor.register_post_accumulate_grad_hook = _register_post_accumulate_grad_hook
