"""CosineSimilarity: F.cosine_similarity as a layer."""
from .. import functional as F
from .module import Module


class CosineSimilarity(Module):
    """Cosine similarity of x1 and x2 along `dim` (norms clamped to eps)."""

    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)

    def extra_repr(self):
        return f"dim={self.dim}, eps={self.eps}"
