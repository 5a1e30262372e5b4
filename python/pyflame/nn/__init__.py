"""``pyflame.nn``: layers in the shape of ``torch.nn``.

    import pyflame as pf
    import pyflame.nn as nn
    import pyflame.nn.functional as F

    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    logits = model(pf.randn(32, 784))
    model.to("rocm"); model.eval(); model.state_dict(); model.load_state_dict(sd)

Parameters are registered by assigning ``nn.Parameter(tensor)``; the attribute
then reads back as the plain ``pf.Tensor`` (see ``nn.parameter``). Layers draw
their initial values from pf's seeded RNG on their own device, so
``pf.manual_seed(s)`` gives the same initialization on every device.
"""
from . import functional, init, parameter
from .parameter import Parameter
from .modules import *  # noqa: F401,F403
from .modules import __all__ as _modules_all
from . import parallel  # noqa: E402  (needs the modules above)

__all__ = ["Parameter", "functional", "init", "parallel"] + list(_modules_all)
