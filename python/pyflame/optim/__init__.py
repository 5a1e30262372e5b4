"""``pf.optim``: optimizers and learning-rate schedules in the shape of
``torch.optim``::

    opt = pf.optim.AdamW(model.parameters(), lr=1e-3)
    sched = pf.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=100)
    for x, y in batches:
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        sched.step()

Updates run under no_grad and rebind each parameter in place
(``p._replace(new)``), so the module and every holder of its parameters see
them; the new values and the optimizer state are evaluated at the end of
``step()``, on the parameters' devices.
"""
from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]
