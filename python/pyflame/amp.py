"""Automatic mixed precision: ``autocast`` and ``GradScaler`` (torch.amp's
interface).

``autocast(dtype=pf.float16)`` (or ``pf.bfloat16``) makes matmul (and so
``nn.Linear``), the convolutions and scaled-dot-product attention cast their
floating-point inputs to ``dtype`` on this thread; their outputs stay in that
dtype, every other op runs as written, and gradients flow back to float32
parameters through the casts (their ``.grad`` is float32)::

    scaler = pf.amp.GradScaler()
    with pf.amp.autocast(dtype=pf.float16):
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()     # backward outside autocast, as in torch
    scaler.step(opt)                  # unscales; skips the step on inf/NaN
    scaler.update()                   # backs off or grows the scale

The policy lives in the C++ op functions (a thread-local dtype), so it
applies to every caller of those ops, modules and ``x @ w`` alike.
"""
import functools
import math
import numbers

import numpy as np

from . import _core

Tensor = _core.Tensor
_DEVICE_TYPES = ("cuda", "rocm", "gpu", "hip", "cpu")

__all__ = ["autocast", "GradScaler", "is_autocast_enabled", "get_autocast_dtype"]


def is_autocast_enabled():
    return _core._autocast_dtype() is not None


def get_autocast_dtype():
    """The active autocast dtype, or None."""
    return _core._autocast_dtype()


class autocast:  # noqa: N801  (torch's name)
    """Context manager and decorator: matmul, convolutions and attention run
    in ``dtype`` (float16, the default, or bfloat16) inside:
    ``autocast(pf.bfloat16)`` or ``autocast(dtype=pf.bfloat16)``.
    ``enabled=False`` turns autocast off inside an enclosing region. torch's
    form ``autocast("cuda", dtype=...)`` is accepted too; the policy applies
    on every device. ``cache_enabled`` is accepted and ignored."""

    def __init__(self, device_type_or_dtype=None, dtype=None, enabled=True, cache_enabled=None):
        first = device_type_or_dtype
        if isinstance(first, str) and first.split(":")[0] in _DEVICE_TYPES:
            first = None  # torch's autocast(device_type, dtype=...)
        if first is not None:
            if dtype is not None:
                raise TypeError("[autocast] got a dtype twice")
            dtype = first
        dtype = _core.Dtype.float16 if dtype is None else _core._dtype(dtype, "autocast")
        if dtype not in (_core.Dtype.float16, _core.Dtype.bfloat16):
            raise ValueError(f"[autocast] dtype must be pf.float16 or pf.bfloat16, got {dtype}")
        self.fast_dtype = dtype
        self._enabled = bool(enabled)
        self._saved = []

    def __enter__(self):
        self._saved.append(_core._autocast_dtype())
        _core._set_autocast_dtype(self.fast_dtype if self._enabled else None)
        return self

    def __exit__(self, *exc):
        _core._set_autocast_dtype(self._saved.pop())
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(dtype=self.fast_dtype, enabled=self._enabled):
                return fn(*args, **kwargs)
        return wrapper


_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"


def _f32(x):
    """x rounded to float32, as torch's float32 scale tensor holds it."""
    return float(np.float32(x))


def _number(value, what, fn):
    """A real number argument (not a bool), else a TypeError naming it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"[{fn}] {what} must be a real number, got {type(value).__name__} "
                        f"{value!r}")
    return value


def _growth_interval(value, fn):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
            not math.isfinite(value) or int(value) != value or value <= 0:
        raise ValueError(f"[{fn}] growth_interval must be a positive integer, got {value!r}")
    return int(value)


class GradScaler:
    """Dynamic loss scaling for float16 training (``torch.amp.GradScaler``).

    ``scale(loss)`` multiplies by the current scale; ``step(optimizer)``
    unscales the gradients (unless ``unscale_`` already did) and runs
    ``optimizer.step()`` only if they are all finite; ``update()`` halves the
    scale (``backoff_factor``) after a step with inf/NaN gradients, or
    doubles it (``growth_factor``) after ``growth_interval`` finite steps in a
    row. The scale is a host number; ``step`` reads one flag per device.
    """

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        _number(init_scale, "init_scale", "GradScaler")
        if not init_scale > 0:
            raise ValueError(f"[GradScaler] init_scale must be positive, got {init_scale}")
        if not _number(growth_factor, "growth_factor", "GradScaler") > 1.0:
            raise ValueError("[GradScaler] The growth factor must be > 1.0.")
        if not 0.0 < _number(backoff_factor, "backoff_factor", "GradScaler") < 1.0:
            raise ValueError("[GradScaler] The backoff factor must be < 1.0.")
        _growth_interval(growth_interval, "GradScaler")
        self._enabled = bool(enabled)
        self._scale = _f32(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._per_optimizer = {}  # id(optimizer) -> {"stage", "flags", "found_inf"}

    def is_enabled(self):
        return self._enabled

    def get_scale(self):
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        if not _number(new_factor, "new_factor", "GradScaler.set_growth_factor") > 1.0:
            raise ValueError("[GradScaler.set_growth_factor] The growth factor must be > 1.0.")
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        if not 0.0 < _number(new_factor, "new_factor", "GradScaler.set_backoff_factor") < 1.0:
            raise ValueError("[GradScaler.set_backoff_factor] The backoff factor must be < 1.0.")
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = _growth_interval(new_interval, "GradScaler.set_growth_interval")

    def scale(self, outputs):
        """outputs (a tensor or nested lists/tuples of tensors) times the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise ValueError(f"[GradScaler.scale] outputs must be a Tensor or an iterable of Tensors, "
                         f"got {type(outputs).__name__}")

    def _state(self, optimizer, fn):
        if not hasattr(optimizer, "param_groups") or not callable(getattr(optimizer, "step", None)):
            raise TypeError(f"[{fn}] expected an optimizer, got {type(optimizer).__name__}")
        return self._per_optimizer.setdefault(
            id(optimizer), {"stage": _READY, "flags": None, "found_inf": None})

    def unscale_(self, optimizer):
        """Divides the optimizer's gradients by the scale (once per update();
        call it before clipping gradients)."""
        if not self._enabled:
            return
        state = self._state(optimizer, "GradScaler.unscale_")
        if state["stage"] is _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the "
                               "last update().")
        if state["stage"] is _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = _f32(1.0 / self._scale)
        per_device = {}
        for group in optimizer.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if g.dtype == _core.Dtype.float16:
                    raise ValueError("Attempting to unscale FP16 gradients.")
                g = g * inv_scale
                p.grad = g
                # inf * 0 and NaN * 0 are NaN: the sum flags any non-finite element.
                flag = (g * 0.0).sum().astype(_core.Dtype.float32)
                per_device[g.device] = per_device[g.device] + flag if g.device in per_device \
                    else flag
        state["flags"] = list(per_device.values())
        state["stage"] = _UNSCALED

    def _found_inf(self, state):
        if state["found_inf"] is None:
            flags = state["flags"] or []
            if flags:
                _core.eval(flags)
            state["found_inf"] = any(not math.isfinite(f.item()) for f in flags)
        return state["found_inf"]

    def step(self, optimizer, *args, **kwargs):
        """Unscales (if needed) and calls ``optimizer.step(*args, **kwargs)``
        unless a gradient is inf or NaN; returns its result (None if skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        state = self._state(optimizer, "GradScaler.step")
        if state["stage"] is _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is _READY:
            self.unscale_(optimizer)
        result = None if self._found_inf(state) else optimizer.step(*args, **kwargs)
        state["stage"] = _STEPPED
        return result

    def update(self, new_scale=None):
        """Adjusts the scale for the next iteration (or sets ``new_scale``)."""
        if not self._enabled:
            return
        if new_scale is not None:
            value = new_scale.item() if isinstance(new_scale, Tensor) else new_scale
            if not _number(value, "new_scale", "GradScaler.update") > 0:
                raise ValueError(f"[GradScaler.update] new_scale must be positive, got {value}")
            self._scale = _f32(value)
        else:
            checked = [s for s in self._per_optimizer.values() if s["flags"] is not None]
            if not checked:
                raise AssertionError("No inf checks were recorded prior to update.")
            if any(self._found_inf(s) for s in checked):
                self._scale = _f32(np.float32(self._scale) * np.float32(self._backoff_factor))
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    grown = _f32(np.float32(self._scale) * np.float32(self._growth_factor))
                    if math.isfinite(grown):
                        self._scale = grown
                    self._growth_tracker = 0
        self._per_optimizer = {}

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        fn = "GradScaler.load_state_dict"
        if not isinstance(state_dict, dict):
            raise TypeError(f"[{fn}] expected a dict from state_dict(), got "
                            f"{type(state_dict).__name__}")
        if len(state_dict) == 0:
            raise RuntimeError(f"[{fn}] The source state dict is empty, possibly because it was "
                               "saved from a disabled instance of GradScaler.")
        keys = ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")
        missing = [k for k in keys if k not in state_dict]
        if missing:
            raise ValueError(f"[{fn}] the state dict lacks {missing}")
        for k in keys:
            _number(state_dict[k], k, fn)
        self._scale = _f32(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])
