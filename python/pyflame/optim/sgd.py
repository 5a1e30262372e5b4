"""Stochastic gradient descent (``torch.optim.SGD``)."""
import math

from .._compile import _python_state
from .optimizer import Optimizer, _check_range, required


class SGD(Optimizer):
    """SGD with optional momentum (heavy-ball or Nesterov), dampening, L2
    weight decay and maximization, step for step as ``torch.optim.SGD``::

        g = -grad if maximize else grad
        g = g + weight_decay * p
        buf = g (first step) or momentum * buf + (1 - dampening) * g
        g = g + momentum * buf if nesterov else buf      (when momentum != 0)
        p = p - lr * g
    """

    def __init__(self, params, lr=required, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False):
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize)
        self._check_options(defaults, "SGD")
        super().__init__(params, defaults)

    @staticmethod
    def _check_options(options, fn):
        if options.get("lr", required) is not required:
            _check_range(options["lr"], "learning rate", fn=fn)
        _check_range(options["momentum"], "momentum value", fn=fn)
        _check_range(options["dampening"], "dampening value", low=-math.inf, fn=fn)
        _check_range(options["weight_decay"], "weight_decay value", fn=fn)
        if options["nesterov"] and (options["momentum"] <= 0 or options["dampening"] != 0):
            raise ValueError(f"[{fn}] Nesterov momentum requires a momentum and zero dampening")

    def _update(self, group):
        lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
        weight_decay, nesterov = group["weight_decay"], group["nesterov"]
        maximize = group["maximize"]
        out = []
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            if maximize:
                g = -g
            if weight_decay != 0:
                g = g + p * weight_decay
            if momentum != 0:
                state = self.state[p]
                buf = state.get("momentum_buffer")
                if buf is None:
                    # A tensor of its own (the value shared, not the handle):
                    # rebinding it below must leave p.grad as it is.
                    buf = state["momentum_buffer"] = g.detach()
                    _python_state("SGD created its momentum buffers")
                else:  # rebound in place, so a compiled step replays it
                    buf._replace(buf * momentum + g * (1 - dampening))
                out.append(buf)
                g = g + buf * momentum if nesterov else buf
            out.append(self._set(p, p - g * lr))
        return out
