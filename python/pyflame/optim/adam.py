"""Adam and AdamW (``torch.optim.Adam`` / ``torch.optim.AdamW``)."""
import math

from .. import _core
from .._compile import _python_state
from .optimizer import Optimizer, _check_betas, _check_range


class Adam(Optimizer):
    """Adam (Kingma & Ba) with L2 ``weight_decay`` added to the gradient,
    ``amsgrad`` and ``maximize``, step for step as ``torch.optim.Adam``::

        g = (-grad if maximize else grad) + weight_decay * p
        m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g
        vmax = max(vmax, v)                                       (amsgrad)
        p = p - lr / (1 - beta1**t) * m / (sqrt(v or vmax) / sqrt(1 - beta2**t) + eps)

    State per parameter: ``step`` (an int), ``exp_avg``, ``exp_avg_sq`` and,
    with amsgrad, ``max_exp_avg_sq``, on the parameter's device.
    """

    _decoupled = False  # AdamW: decay the weights directly instead

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, maximize=False):
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize)
        self._check_options(defaults, type(self).__name__)
        super().__init__(params, defaults)

    @staticmethod
    def _check_options(options, fn):
        _check_range(options["lr"], "learning rate", fn=fn)
        _check_range(options["eps"], "epsilon value", fn=fn)
        options["betas"] = _check_betas(options["betas"], fn)
        _check_range(options["weight_decay"], "weight_decay value", fn=fn)

    def _update(self, group):
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        weight_decay, amsgrad = group["weight_decay"], group["amsgrad"]
        out = []
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            if group["maximize"]:
                g = -g
            state = self.state[p]
            if not state:
                zeros = _core.full(list(p.shape), 0.0, p.dtype, p.device, "Adam")
                state.update(step=0, exp_avg=zeros, exp_avg_sq=zeros)
                if amsgrad:
                    state["max_exp_avg_sq"] = zeros
            state["step"] += 1
            _python_state("Adam counts its steps in Python (its bias correction)", permanent=True)
            value = p
            if weight_decay != 0:
                if self._decoupled:
                    value = p * (1 - lr * weight_decay)
                else:
                    g = g + p * weight_decay
            exp_avg = state["exp_avg"] * beta1 + g * (1 - beta1)
            exp_avg_sq = state["exp_avg_sq"] * beta2 + g * g * (1 - beta2)
            state.update(exp_avg=exp_avg, exp_avg_sq=exp_avg_sq)
            out += [exp_avg, exp_avg_sq]
            step = state["step"]
            step_size = lr / (1 - beta1 ** step)
            bias_correction2_sqrt = math.sqrt(1 - beta2 ** step)
            if amsgrad:
                second = _core.maximum(state["max_exp_avg_sq"], exp_avg_sq)
                state["max_exp_avg_sq"] = second
                out.append(second)
            else:
                second = exp_avg_sq
            denom = _core.sqrt(second) / bias_correction2_sqrt + eps
            out.append(self._set(p, value - exp_avg / denom * step_size))
        return out


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter), as
    ``torch.optim.AdamW``: each step first scales the weights by
    ``1 - lr * weight_decay`` (default weight_decay 1e-2), then takes the
    Adam step without an L2 term in the gradient."""

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)
