"""Backend-specific APIs: ``pyflame.backend.rocm`` and ``pyflame.backend.cpu``."""
from . import cpu, rocm  # noqa: F401
