"""Gradient checkpointing: keep a block's inputs, not its intermediates, and
recompute the block during backward.

``checkpoint(fn, *args)`` runs ``fn`` under no_grad, so the forward pass
keeps none of its intermediate results (the lazy graph frees them as soon as
they are consumed); the output is a custom-gradient node
(``pf.autograd.Function``) whose backward runs ``fn`` again on the saved
inputs with grad enabled and differentiates that. The generator state and
the autocast dtype of the forward call are restored for the recomputation,
so dropout draws the same mask.

Gradients follow the caller's mode. Under ``.backward()`` the recomputed
graph is back-propagated into every tensor it reaches, so parameters that
``fn`` uses (a module's weights) get their ``.grad`` as without
checkpointing. Under ``pf.grad`` / ``value_and_grad`` only the tensor
arguments of ``fn`` are differentiated; asking for a tensor that ``fn`` uses
without taking it as an argument raises (pass it as an argument).

As in PyTorch, layers with side effects run twice (a training-mode
BatchNorm inside ``fn`` updates its running statistics in the forward pass
and again in the recomputation).
"""
import numbers

from .. import _core
from ..autograd import (Function, _backward_mode, _current_grad_inputs, _functional_grad,
                        enable_grad, is_grad_enabled)

Tensor = _core.Tensor


class _Checkpoint(Function):
    _always_link = True  # fn may use parameters even when no argument requires grad

    @staticmethod
    def forward(ctx, fn, preserve_rng_state, kwargs, *args):
        ctx.fn, ctx.kwargs, ctx.args = fn, kwargs, args
        ctx.rng_state = _core.get_rng_state() if preserve_rng_state else None
        ctx.autocast = _core._autocast_dtype()
        return fn(*args, **kwargs)

    @staticmethod
    def backward(ctx, *grad_outputs):
        leaves, call_args = [], []
        for a in ctx.args:
            if isinstance(a, Tensor) and a.requires_grad:
                a = _core.detach(a)
                a.requires_grad = True
                leaves.append(a)
            call_args.append(a)
        outs = _recompute(ctx, call_args)
        pairs = [(o, g) for o, g in zip(outs, grad_outputs)
                 if isinstance(o, Tensor) and o.requires_grad and g is not None]
        grads = iter(_input_grads(pairs, leaves))
        return (None, None, None) + tuple(
            next(grads) if isinstance(a, Tensor) and a.requires_grad else None for a in ctx.args)


def _recompute(ctx, args):
    """fn(*args) with grad on, the forward call's generator state and autocast."""
    rng, autocast = _core.get_rng_state(), _core._autocast_dtype()
    try:
        if ctx.rng_state is not None:
            _core.set_rng_state(ctx.rng_state)
        _core._set_autocast_dtype(ctx.autocast)
        with enable_grad():
            out = ctx.fn(*args, **ctx.kwargs)
    finally:
        if ctx.rng_state is not None:
            _core.set_rng_state(rng)
        _core._set_autocast_dtype(autocast)
    return out if isinstance(out, tuple) else (out,)


def _input_grads(pairs, leaves):
    """Backpropagates (output, cotangent) pairs of the recomputed graph; the
    gradients of `leaves` (None where unused), evaluated so that the
    recomputed intermediates are freed now."""
    if not pairs:
        return [None] * len(leaves)
    outs, cotans = [o for o, _ in pairs], [g for _, g in pairs]
    requested = _current_grad_inputs()
    if requested is None:  # .backward(): accumulate into every leaf reached
        with _backward_mode(None):
            if len(outs) == 1:
                outs[0].backward(cotans[0])
            else:
                sum(((o * g.astype(o.dtype)).sum() for o, g in pairs)).backward()
        return [leaf.grad for leaf in leaves]
    own = {hash(leaf) for leaf in leaves}
    for t in _core._grad_leaves(outs):
        if hash(t) in requested and hash(t) not in own:
            raise RuntimeError("[checkpoint] pf.grad asked for a tensor that the checkpointed "
                               "function uses without taking it as an argument; pass it as an "
                               "argument, or use .backward()")
    if not leaves:
        return []
    grads = _functional_grad(outs, leaves, cotans)
    _core.eval(list(grads))
    return grads


def checkpoint(function, *args, use_reentrant=None, preserve_rng_state=True, **kwargs):
    """``function(*args, **kwargs)`` without keeping its intermediates for
    backward; they are recomputed when the gradient is needed (see the module
    docstring). ``use_reentrant`` is accepted for PyTorch compatibility and
    ignored; ``preserve_rng_state`` replays the random draws (dropout)."""
    if not callable(function):
        raise TypeError(f"[checkpoint] function must be callable, got {type(function).__name__}")
    if not is_grad_enabled():
        return function(*args, **kwargs)
    return _Checkpoint.apply(function, bool(preserve_rng_state), kwargs, *args)


def checkpoint_sequential(functions, segments, input, use_reentrant=None,  # noqa: A002
                          preserve_rng_state=True):
    """Runs a Sequential (or a list of callables) in ``segments`` chunks,
    checkpointing every chunk but the last (``torch.utils.checkpoint.
    checkpoint_sequential``)."""
    fn = "checkpoint_sequential"
    if hasattr(functions, "children") and callable(functions.children):
        functions = list(functions.children())
    if not isinstance(functions, (list, tuple)) or not all(callable(f) for f in functions):
        raise TypeError(f"[{fn}] functions must be a Sequential or a list of callables, got "
                        f"{type(functions).__name__}")
    functions = list(functions)
    if isinstance(segments, bool) or not isinstance(segments, numbers.Integral):
        raise TypeError(f"[{fn}] segments must be an integer, got {type(segments).__name__}")
    if not 0 < segments <= max(len(functions), 1):
        raise ValueError(f"[checkpoint_sequential] segments must be in [1, {len(functions)}], "
                         f"got {segments}")

    def run(start, end):
        def forward(x):
            for f in functions[start:end]:
                x = f(x)
            return x
        return forward

    size = len(functions) // segments
    start = 0
    for _ in range(segments - 1):
        input = checkpoint(run(start, start + size), input,
                           preserve_rng_state=preserve_rng_state)
        start += size
    return run(start, len(functions))(input)
