"""Embedding."""
from ... import _core
from ... import ops as _ops
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ._utils import check_positive_int, empty_parameter
from .module import Module


class Embedding(Module):
    """A lookup table: rows of ``weight`` (num_embeddings, embedding_dim),
    initialized N(0, 1), for integer indices. The row at ``padding_idx`` (if
    given; negative counts from the end) is initialized to zeros."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        super().__init__()
        check_positive_int(num_embeddings, "num_embeddings", "Embedding", allow_zero=True)
        check_positive_int(embedding_dim, "embedding_dim", "Embedding", allow_zero=True)
        if max_norm is not None:
            raise ValueError("[Embedding] max_norm is not supported")
        if sparse:
            raise ValueError("[Embedding] sparse=True is not supported")
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        if padding_idx is not None:
            check_positive_int(abs(padding_idx) if isinstance(padding_idx, int) else padding_idx,
                               "padding_idx", "Embedding", allow_zero=True)
            if padding_idx > 0:
                if padding_idx >= num_embeddings:
                    raise ValueError("[Embedding] padding_idx must be within num_embeddings")
            elif padding_idx < 0:
                if padding_idx < -num_embeddings:
                    raise ValueError("[Embedding] padding_idx must be within num_embeddings")
                padding_idx = num_embeddings + padding_idx
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            self.weight = empty_parameter((num_embeddings, embedding_dim), device, dtype)
            self.reset_parameters()
        else:
            w = _weight.data if isinstance(_weight, Parameter) else _weight
            if not isinstance(w, _core.Tensor):
                raise TypeError(f"[Embedding] _weight must be a pyflame.Tensor, got "
                                f"{type(w).__name__}")
            if tuple(w.shape) != (num_embeddings, embedding_dim):
                raise ValueError(f"[Embedding] shape of _weight {tuple(w.shape)} does not "
                                 f"match (num_embeddings, embedding_dim) = "
                                 f"{(num_embeddings, embedding_dim)}")
            self.weight = Parameter(w, requires_grad=not _freeze)

    def reset_parameters(self):
        init.normal_(self._parameters["weight"])
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self):
        if self.padding_idx is None:
            return
        w = self.weight
        keep = _ops.arange(self.num_embeddings, device=w.device) != self.padding_idx
        w._replace(_core.where(_core.unsqueeze(keep, 1), w, 0.0).astype(w.dtype))

    def forward(self, input):  # noqa: A002
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None,
                        norm_type=2.0, scale_grad_by_freq=False, sparse=False):
        """An Embedding whose weight is the given 2-D tensor (not copied)."""
        w = embeddings.data if isinstance(embeddings, Parameter) else embeddings
        if not isinstance(w, _core.Tensor):
            raise TypeError(f"[Embedding.from_pretrained] embeddings must be a pyflame.Tensor, "
                            f"got {type(w).__name__}")
        if w.ndim != 2:
            raise ValueError("[Embedding.from_pretrained] embeddings must be 2-dimensional")
        rows, cols = w.shape
        return cls(rows, cols, padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type,
                   scale_grad_by_freq=scale_grad_by_freq, sparse=sparse, _weight=w,
                   _freeze=freeze)
