"""ROCm backend helpers (spec: memory manager, pinned pool, warm-up, tuning).

Every function raises RuntimeError when this build or machine has no GPU.
"""
from .. import _core
from .tuning import MIOpenTuningCache, get_tuning_cache  # noqa: F401


class MemoryManager:
    """The caching allocator of one GPU (spec: ``ROCmMemoryManager``)."""

    def __init__(self, device=-1):
        self.device = device

    def get_stats(self):
        """Dict: total_allocated, peak_allocated, total_allocations,
        total_deallocations, cache_hits, cache_misses, cached_bytes."""
        return _core._rocm_memory_stats(self.device)

    def reset_stats(self):
        _core._rocm_reset_memory_stats(self.device)

    def clear_pool(self):
        """Returns every cached block to the driver."""
        _core._rocm_clear_memory_pool(self.device)

    def get_memory_info(self):
        """(free_bytes, total_bytes) of the device."""
        return _core._rocm_memory_info(self.device)


def get_memory_manager(device=None):
    return MemoryManager(-1 if device is None else device)


class PinnedMemoryPool:
    """Page-locked host buffers used for uploads and downloads."""

    def warmup(self, sizes):
        _core._rocm_pinned_warmup([int(s) for s in sizes])

    def clear(self):
        _core._rocm_pinned_clear()

    @property
    def cached_bytes(self):
        return _core._rocm_pinned_cached_bytes()


def get_pinned_pool():
    return PinnedMemoryPool()


def warmup_memory_pool(batch_size, model_size="medium"):
    """Pre-allocates typical activation buffers ('small', 'medium', 'large')."""
    _core._rocm_warmup_memory_pool(int(batch_size), model_size)


def dnn_graph_stats():
    """Counts of the cuDNN graph-API convolution path (NVIDIA: float16 and
    bfloat16 channels-last convolutions; see src/backend/rocm/dnn.h), for
    the process: dict with ``enabled`` (False on AMD, without a GPU, or with
    PYFLAME_CUDNN_GRAPH=0), ``plans_built``, ``plans_failed`` (problems with
    no plan, run through cuDNN's legacy API instead), ``runs`` and
    ``last_failure`` (why the latest problem without a plan has none)."""
    return _core._rocm_dnn_graph_stats()


def set_allow_tf32(flag):
    """TF32 tensor cores for float32 matmul (NVIDIA). Off by default, so GPU
    results match the CPU; also set by PYFLAME_ALLOW_TF32=1."""
    _core._rocm_set_allow_tf32(bool(flag))


def allow_tf32():
    return _core._rocm_allow_tf32()


# The multi_stream option (also pf.set_multi_stream / pf.multi_stream).
set_multi_stream = _core.set_multi_stream
multi_stream = _core.multi_stream
