"""Dropout."""
from .. import functional as F
from .module import Module


class Dropout(Module):
    """In training, zeroes each element with probability p (pf's seeded RNG)
    and scales the rest by 1/(1-p); in eval mode, the identity."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
            raise ValueError(f"[Dropout] dropout probability has to be between 0 and 1, but "
                             f"got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        if not self.training or self.p == 0:
            return input
        return F.dropout(input, self.p, True)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"
