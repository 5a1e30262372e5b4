"""Backend-specific APIs: ``pyflame.backend.rocm``."""
from . import rocm  # noqa: F401
