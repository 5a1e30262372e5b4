"""Automatic differentiation: grad mode, ``grad`` and ``value_and_grad``.

Tensors carry ``requires_grad``, ``.grad``, ``.backward()`` and ``.detach()``
(PyTorch's names). This module adds grad-mode switches and the functional
form::

    with pf.no_grad():          # ops record no history (inference, updates)
        ...
    df = pf.grad(f)             # df(x) == d f(x) / dx, f returns a scalar
    loss, g = pf.value_and_grad(f, argnums=(0, 1))(w, b)

Gradients are graphs built from ops, evaluated lazily on the tensors'
devices like any other result.
"""
import functools

from . import _core

is_grad_enabled = _core.is_grad_enabled


class set_grad_enabled:
    """Sets grad mode; usable as a call, a context manager or a decorator."""

    def __init__(self, mode):
        self._prev = _core.is_grad_enabled()
        self._mode = bool(mode)
        _core.set_grad_enabled(self._mode)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _core.set_grad_enabled(self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)(self._mode):
                return fn(*args, **kwargs)
        _core.set_grad_enabled(self._prev)  # the decorator form changes nothing now
        return wrapper


class _GradMode:
    _mode = True

    def __enter__(self):
        self._prev = _core.is_grad_enabled()
        _core.set_grad_enabled(self._mode)
        return self

    def __exit__(self, *exc):
        _core.set_grad_enabled(self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)():
                return fn(*args, **kwargs)
        return wrapper


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

        @functools.wraps(fn)
        def grad_fn(*args, **kwargs):
            return value_and_grad(fn, argnums)(*args, **kwargs)[1]
        return grad_fn
    single = isinstance(inputs, _core.Tensor)
    outs = [outputs] if isinstance(outputs, _core.Tensor) else list(outputs)
    ins = [inputs] if single else list(inputs)
    if grad_outputs is None:
        gos = []
    else:
        gos = [grad_outputs] if isinstance(grad_outputs, _core.Tensor) else list(grad_outputs)
    result = _core._autograd_grad(outs, ins, gos)
    return result[0] if single else tuple(result)


def value_and_grad(fn, argnums=0):
    """A function returning ``(fn(*args), gradient)``; see :func:`grad`."""
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        args = list(args)
        wrt, builders = [], []
        for i in nums:
            if i >= len(args):
                raise ValueError(f"[grad] argnums {i} is out of range for "
                                 f"{len(args)} positional arguments")
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
        grads = _core._autograd_grad([out], flat, []) if flat else []
        result, i = [], 0
        for group, build in zip(wrt, builders):
            result.append(build(grads[i:i + len(group)]))
            i += len(group)
        detached = tuple(_core.detach(v) if isinstance(v, _core.Tensor) else v
                         for v in (value if isinstance(value, tuple) else (value,)))
        value = detached if isinstance(value, tuple) else detached[0]
        return value, (result[0] if single else tuple(result))
    return wrapper
