"""Utilities: ``pf.utils.checkpoint`` (gradient checkpointing)."""
from ._checkpoint import checkpoint, checkpoint_sequential

__all__ = ["checkpoint", "checkpoint_sequential"]
