"""DNN algorithm tuning cache (spec: ``MIOpenTuningCache``).

One process-wide cache holds, per convolution problem (op, shapes, dtype,
stride/padding/dilation/groups, math mode, memory layout, DNN library and GPU
architecture), the algorithm the DNN library chose (MIOpen on AMD, cuDNN on
NVIDIA), or that it rejected a channels-last problem, which then runs NCHW. It is
consulted before any search. With exhaustive search on (the default) a miss
times every candidate once (MIOpen Find / cudnnFind*Ex); off, the library's
heuristic ranking (MIOpen GetSolution / cudnnGet*_v7) picks. A cache file
persists the entries across processes. On NVIDIA, float16 and bfloat16
channels-last convolutions run through cuDNN's graph API instead, whose
execution plans (from its heuristics) are kept in memory, not here; only
problems it builds no plan for, or every problem under PYFLAME_CUDNN_GRAPH=0,
are tuned and cached here (see ``pyflame.backend.rocm.dnn_graph_stats``).

The cache is plain data: it works without a GPU, where nothing consults it.

    from pyflame.backend.rocm import get_tuning_cache
    cache = get_tuning_cache()
    cache.enable_exhaustive_search(True)
    cache.set_cache_file("/path/to/miopen_cache.bin")
    cache.get_stats()  # {'hits': ..., 'misses': ..., 'entries': ...}
"""
import os

from .. import _core


class MIOpenTuningCache:
    """Handle on the process-wide tuning cache (every instance shares it)."""

    def enable_exhaustive_search(self, enable=True):
        """Exhaustive search (time every algorithm once per problem) or the
        library's heuristic choice. A heuristic entry is re-tuned when a
        lookup happens in exhaustive mode."""
        _core._tuning_enable_exhaustive_search(bool(enable))

    @property
    def exhaustive_search(self):
        return _core._tuning_exhaustive_search()

    def enable_caching(self, enable=True):
        """With caching off every convolution searches again and nothing is stored."""
        _core._tuning_enable_caching(bool(enable))

    def set_cache_file(self, path):
        """Persist to ``path``: its entries (if the file exists) are loaded,
        and the file is rewritten on every update. ``None`` or ``""`` stops
        persisting. Raises RuntimeError when the file cannot be written."""
        _core._tuning_set_cache_file("" if path is None else os.fspath(path))

    @property
    def cache_file(self):
        return _core._tuning_cache_file() or None

    def clear(self):
        """Drops every entry and resets the hit/miss counters."""
        _core._tuning_clear()

    def get_stats(self):
        """Dict with ``hits``, ``misses`` and ``entries``."""
        return _core._tuning_stats()

    def entries(self):
        """List of (key, algorithm, workspace_bytes, math_type, exhaustive)."""
        return [tuple(e) for e in _core._tuning_entries()]

    def __repr__(self):
        s = self.get_stats()
        return (f"MIOpenTuningCache(entries={s['entries']}, hits={s['hits']}, misses={s['misses']}, "
                f"exhaustive_search={self.exhaustive_search}, cache_file={self.cache_file!r})")


_CACHE = MIOpenTuningCache()


def get_tuning_cache():
    """The process-wide tuning cache."""
    return _CACHE
