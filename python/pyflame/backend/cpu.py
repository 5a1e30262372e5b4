"""CPU backend helpers: host memory held by tensors.

``memory_allocated()`` counts the bytes of the CPU buffers that tensors hold
now (evaluated results and the intermediates a graph keeps for backward);
``max_memory_allocated()`` the peak since ``reset_peak_memory_stats()``.
Large buffers freed (4 MiB and up; at most four, 256 MiB in all) are kept for
the next buffer of the same size, which then starts on warm pages instead of
fresh ones from the system; ``empty_cache()`` returns them to the system (and
the number of bytes). They do not count as allocated.
"""
from .. import _core


def memory_allocated():
    return _core._host_memory_stats()[0]


def max_memory_allocated():
    return _core._host_memory_stats()[1]


def reset_peak_memory_stats():
    _core._host_reset_peak_memory()


def empty_cache():
    return _core._host_release_cache()
