"""Loss modules: MSELoss, CrossEntropyLoss, NLLLoss, BCELoss, L1Loss, KLDivLoss,
SmoothL1Loss, HuberLoss, BCEWithLogitsLoss."""
from ... import _core
from .. import functional as F
from .._functional_torch import check_reduction as _check_reduction
from ..parameter import Parameter
from ._utils import check_real, check_reduction
from .module import Module


class _Loss(Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = check_reduction(reduction, type(self).__name__)


class _WeightedLoss(_Loss):
    # The class weight is a buffer (in state_dict when given), as in torch.
    def __init__(self, weight=None, reduction="mean"):
        super().__init__(reduction)
        if isinstance(weight, Parameter):
            weight = weight.data
        if weight is not None and not isinstance(weight, _core.Tensor):
            raise TypeError(f"[{type(self).__name__}] weight must be a pyflame.Tensor or None, "
                            f"got {type(weight).__name__}")
        self.register_buffer("weight", weight)


class MSELoss(_Loss):
    """(input - target)^2, reduced by 'mean' (default), 'sum' or 'none'."""

    def forward(self, input, target):  # noqa: A002
        return F.mse_loss(input, target, reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """Cross entropy of logits (N, C[, d...]) against class indices (N[, d...]);
    options weight (C,), ignore_index, reduction, label_smoothing."""

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__(weight, reduction)
        check_real(label_smoothing, "label_smoothing", "CrossEntropyLoss")
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"[CrossEntropyLoss] label_smoothing must be between 0.0 and 1.0, "
                             f"got {label_smoothing}")
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):  # noqa: A002
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_WeightedLoss):
    """Negative log likelihood of log-probabilities (N, C[, d...]) against class
    indices; options weight, ignore_index, reduction."""

    def __init__(self, weight=None, ignore_index=-100, reduction="mean"):
        super().__init__(weight, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):  # noqa: A002
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class BCELoss(_WeightedLoss):
    """Binary cross entropy of probabilities against targets in [0, 1];
    optional elementwise rescaling weight (broadcast to the input)."""

    def forward(self, input, target):  # noqa: A002
        return F.bce_loss(input, target, weight=self.weight, reduction=self.reduction)


class L1Loss(_Loss):
    """|input - target|, reduced."""

    def forward(self, input, target):  # noqa: A002
        return F.l1_loss(input, target, reduction=self.reduction)


class KLDivLoss(Module):
    """KL divergence of log-probabilities `input` from `target`; reduction
    'mean' (elementwise), 'batchmean' (PyTorch's mathematically correct
    choice), 'sum' or 'none'; log_target when target holds log-probabilities."""

    def __init__(self, reduction="mean", log_target=False):
        super().__init__()
        _check_reduction(reduction, "KLDivLoss", extra=("batchmean",))
        self.reduction, self.log_target = reduction, log_target

    def forward(self, input, target):  # noqa: A002
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class SmoothL1Loss(_Loss):
    """0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere."""

    def __init__(self, reduction="mean", beta=1.0):
        super().__init__(reduction)
        check_real(beta, "beta", "SmoothL1Loss", low=0.0)
        self.beta = beta

    def forward(self, input, target):  # noqa: A002
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """0.5 d^2 where |d| < delta, delta (|d| - 0.5 delta) elsewhere."""

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction)
        check_real(delta, "delta", "HuberLoss")
        self.delta = delta

    def forward(self, input, target):  # noqa: A002
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class BCEWithLogitsLoss(_WeightedLoss):
    """Binary cross entropy of sigmoid(input), computed stably from the
    logits; weight rescales elements, pos_weight the positive term per class
    (both buffers, as in torch)."""

    def __init__(self, weight=None, reduction="mean", pos_weight=None):
        super().__init__(weight, reduction)
        if isinstance(pos_weight, Parameter):
            pos_weight = pos_weight.data
        if pos_weight is not None and not isinstance(pos_weight, _core.Tensor):
            raise TypeError("[BCEWithLogitsLoss] pos_weight must be a pyflame.Tensor or None, "
                            f"got {type(pos_weight).__name__}")
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):  # noqa: A002
        return F.binary_cross_entropy_with_logits(input, target, weight=self.weight,
                                                  reduction=self.reduction,
                                                  pos_weight=self.pos_weight)
