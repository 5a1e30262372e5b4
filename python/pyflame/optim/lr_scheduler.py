"""Learning-rate schedules (``torch.optim.lr_scheduler``): StepLR,
MultiStepLR, ExponentialLR, CosineAnnealingLR.

Each ``step()`` applies the schedule's recursive (chainable) form to every
parameter group's ``lr``, as torch does, so ``get_last_lr()`` matches
torch's value for value; ``step(epoch)`` uses the closed form.
"""
import math
import numbers
import warnings
from bisect import bisect_right
from collections import Counter

from .optimizer import Optimizer

__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR"]

_EPOCH_DEPRECATION = ("The epoch parameter in `scheduler.step()` was not necessary and is being "
                      "deprecated where possible. Please use `scheduler.step()` to step the "
                      "scheduler.")


class LRScheduler:
    """Base class: sets ``initial_lr`` on each group, keeps ``base_lrs`` and
    ``last_epoch``, and takes the first step at construction."""

    def __init__(self, optimizer, last_epoch=-1, verbose=False):
        fn = type(self).__name__
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"[{fn}] {type(optimizer).__name__} is not an Optimizer")
        _int(last_epoch, "last_epoch", fn, -1)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError("param 'initial_lr' is not specified in "
                                   f"param_groups[{i}] when resuming an optimizer")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.verbose = verbose
        self._get_lr_called_within_step = False
        self._step_count = 0
        self.step()

    def get_lr(self):
        """The recursive form: next lrs from the groups' current ones."""
        raise NotImplementedError

    def get_last_lr(self):
        """The lrs the last step() set."""
        return self._last_lr

    def _warn_outside_step(self):
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please use "
                          "`get_last_lr()`.", UserWarning, stacklevel=3)

    def step(self, epoch=None):
        if epoch is not None:
            _int(epoch, "epoch", f"{type(self).__name__}.step", 0)
        self._step_count += 1
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                warnings.warn(_EPOCH_DEPRECATION, UserWarning, stacklevel=2)
                self.last_epoch = epoch
                closed = getattr(self, "_get_closed_form_lr", None)
                values = closed() if closed else self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for i, (group, lr) in enumerate(zip(self.optimizer.param_groups, values)):
            group["lr"] = lr
            if self.verbose:
                print(f"Adjusting learning rate of group {i} to {lr:.4e}.")
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self):
        """Every attribute but the optimizer."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        fn = f"{type(self).__name__}.load_state_dict"
        if not isinstance(state_dict, dict):
            raise TypeError(f"[{fn}] expected a dict from state_dict(), got "
                            f"{type(state_dict).__name__}")
        missing = sorted(k for k in ("base_lrs", "last_epoch") if k not in state_dict)
        if missing:
            raise ValueError(f"[{fn}] the state dict lacks {missing} (expected the output of "
                             "state_dict())")
        self.__dict__.update(state_dict)


_LRScheduler = LRScheduler  # torch < 2.0's name


def _int(value, what, fn, low):
    """An integer argument >= low (bools are not integers here)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"[{fn}] {what} must be an integer, got {type(value).__name__} "
                        f"{value!r}")
    if value < low:
        raise ValueError(f"[{fn}] {what} must be >= {low}, got {value}")
    return int(value)


def _real(value, what, fn):
    """A finite real number argument."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
            not math.isfinite(value):
        raise (ValueError if isinstance(value, numbers.Real) and not isinstance(value, bool)
               else TypeError)(f"[{fn}] {what} must be a finite real number, got {value!r}")
    return value


class StepLR(LRScheduler):
    """Multiplies the lr by ``gamma`` every ``step_size`` steps."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1, verbose=False):
        self.step_size = _int(step_size, "step_size", "StepLR", 1)
        self.gamma = _real(gamma, "gamma", "StepLR")
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        self._warn_outside_step()
        groups = self.optimizer.param_groups
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return [group["lr"] for group in groups]
        return [group["lr"] * self.gamma for group in groups]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size)
                for base_lr in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiplies the lr by ``gamma`` at each of the ``milestones``."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1, verbose=False):
        if not isinstance(milestones, (list, tuple, set, range)):
            raise TypeError(f"[MultiStepLR] milestones must be a list of integers, got "
                            f"{type(milestones).__name__}")
        self.milestones = Counter(_int(m, "each milestone", "MultiStepLR", 0) for m in milestones)
        self.gamma = _real(gamma, "gamma", "MultiStepLR")
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        self._warn_outside_step()
        groups = self.optimizer.param_groups
        if self.last_epoch not in self.milestones:
            return [group["lr"] for group in groups]
        return [group["lr"] * self.gamma ** self.milestones[self.last_epoch] for group in groups]

    def _get_closed_form_lr(self):
        milestones = sorted(self.milestones.elements())
        return [base_lr * self.gamma ** bisect_right(milestones, self.last_epoch)
                for base_lr in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiplies the lr by ``gamma`` every step."""

    def __init__(self, optimizer, gamma, last_epoch=-1, verbose=False):
        self.gamma = _real(gamma, "gamma", "ExponentialLR")
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        self._warn_outside_step()
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [group["lr"] for group in groups]
        return [group["lr"] * self.gamma for group in groups]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** self.last_epoch for base_lr in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from the initial lr to ``eta_min`` over ``T_max``
    steps (and back up, periodically, after T_max, as torch's recursive form
    does): eta_min + (base_lr - eta_min) * (1 + cos(pi * t / T_max)) / 2."""

    def __init__(self, optimizer, T_max, eta_min=0, last_epoch=-1, verbose=False):  # noqa: N803
        self.T_max = _real(T_max, "T_max", "CosineAnnealingLR")
        if T_max <= 0:
            raise ValueError(f"[CosineAnnealingLR] T_max must be positive, got {T_max}")
        self.eta_min = _real(eta_min, "eta_min", "CosineAnnealingLR")
        super().__init__(optimizer, last_epoch, verbose)

    def get_lr(self):
        self._warn_outside_step()
        groups, t, T = self.optimizer.param_groups, self.last_epoch, self.T_max  # noqa: N806
        if t == 0:
            return [group["lr"] for group in groups]
        if self._step_count == 1 and t > 0:  # resumed: start from the closed form
            return [self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(t * math.pi / T)) / 2
                    for base_lr in self.base_lrs]
        if (t - 1 - T) % (2 * T) == 0:
            return [group["lr"] + (base_lr - self.eta_min) * (1 - math.cos(math.pi / T)) / 2
                    for base_lr, group in zip(self.base_lrs, groups)]
        return [(1 + math.cos(math.pi * t / T)) / (1 + math.cos(math.pi * (t - 1) / T)) *
                (group["lr"] - self.eta_min) + self.eta_min for group in groups]

    def _get_closed_form_lr(self):
        return [self.eta_min + (base_lr - self.eta_min) *
                (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base_lr in self.base_lrs]
