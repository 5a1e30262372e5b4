"""CPU backend helpers: host memory held by tensors.

``memory_allocated()`` counts the bytes of the CPU buffers that tensors hold
now (evaluated results and the intermediates a graph keeps for backward);
``max_memory_allocated()`` the peak since ``reset_peak_memory_stats()``.
"""
from .. import _core


def memory_allocated():
    return _core._host_memory_stats()[0]


def max_memory_allocated():
    return _core._host_memory_stats()[1]


def reset_peak_memory_stats():
    _core._host_reset_peak_memory()
