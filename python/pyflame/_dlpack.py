"""The consumer side of the DLPack protocol: ``pf.from_dlpack``.

The producer's ``__dlpack__`` is asked for a versioned capsule (DLPack 1.x)
first and for a legacy one when it predates ``max_version``. On a GPU, the
producer is given PyFlame's stream so it orders its pending work before ours.
The capsule itself is read in C++ (``python/src/dlpack.cc``).
"""
from . import _core

_KDL_CPU, _KDL_CUDA_HOST, _KDL_ROCM_HOST = 1, 3, 11
_HOST_TYPES = (_KDL_CPU, _KDL_CUDA_HOST, _KDL_ROCM_HOST)
_MAX_VERSION = (1, 1)


def _call_dlpack(obj, kwargs):
    """obj.__dlpack__(**kwargs), dropping the keywords an older producer
    (array API before 2023.12, e.g. PyTorch < 2.4) does not take."""
    try:
        return obj.__dlpack__(**kwargs)
    except TypeError:
        legacy = {k: v for k, v in kwargs.items() if k == "stream"}
        if legacy == kwargs:
            raise
        return obj.__dlpack__(**legacy)


def from_dlpack(obj, *, device=None, copy=None):
    """A tensor sharing the memory of ``obj`` (a NumPy array, a PyTorch, CuPy
    or JAX array, anything with ``__dlpack__``), or a DLPack capsule.

    ``copy=None`` shares memory when it can and copies otherwise, ``copy=True``
    always copies, ``copy=False`` never copies (``ValueError`` where a copy
    would be needed). A shared tensor sees writes made through ``obj``; the
    memory stays alive as long as the tensor does. Read-only memory (a DLPack
    1.x capsule's flag) stays read-only when exported again.

    Dtypes: bool, uint8, int8, int16, int32, int64, float16, bfloat16,
    float32 and float64 are shared as they are. On the CPU, the other unsigned
    integer types become int32 or int64 as in ``pf.tensor`` (a copy, so not
    with ``copy=False``); on a GPU those raise ``BufferError``, as do complex
    and other dtypes.

    ``device``: where the result goes (default: where the memory is). Memory
    of a GPU this build does not drive is requested from the producer as a
    CPU copy. On a GPU, the producer orders its pending work before PyFlame's
    stream (the protocol's ``stream`` argument).
    """
    if copy is not None and not isinstance(copy, bool):
        raise ValueError(f"[from_dlpack] copy must be None, True or False, got {copy!r}")
    if type(obj).__name__ == "PyCapsule":
        out = _core._dlpack_import(obj, copy)
        return _to_device(out, device, copy, obj)
    if not hasattr(obj, "__dlpack__") or not hasattr(obj, "__dlpack_device__"):
        raise AttributeError(f"[from_dlpack] {type(obj).__name__} does not support the DLPack "
                             "protocol (no __dlpack__ / __dlpack_device__)")
    dev_type, dev_id = obj.__dlpack_device__()
    dev_type, dev_id = int(dev_type), int(dev_id)
    # No `copy` for the producer: PyFlame copies itself where asked (older
    # producers take no `copy`, and a same-device export never needs one).
    kwargs = {"max_version": _MAX_VERSION}
    gpu_type = _core._dlpack_device_type()
    if dev_type in _HOST_TYPES:
        pass
    elif gpu_type and dev_type == gpu_type:
        if not 0 <= dev_id < _core.rocm_device_count():
            raise BufferError(f"[from_dlpack] GPU {dev_id} is not visible to PyFlame")
        kwargs["stream"] = _core._dlpack_stream(dev_id)
    else:
        # A device this build cannot address: ask the producer for a CPU copy.
        if copy is False:
            raise ValueError(f"[from_dlpack] memory on DLPack device ({dev_type}, {dev_id}) needs "
                             "a copy to the CPU, which copy=False forbids")
        kwargs["dl_device"] = (_KDL_CPU, 0)
        kwargs["copy"] = True
        try:
            capsule = _call_dlpack(obj, kwargs)
        except (BufferError, TypeError, NotImplementedError, ValueError) as e:
            raise BufferError(f"[from_dlpack] cannot use memory of DLPack device "
                              f"({dev_type}, {dev_id}) in this build (GPU backend: "
                              f"{_core.gpu_platform()}), and the producer gave no CPU "
                              f"copy: {e}") from None
        return _to_device(_core._dlpack_import(capsule, None), device, copy, obj)
    capsule = _call_dlpack(obj, kwargs)
    return _to_device(_core._dlpack_import(capsule, copy), device, copy, obj)


def _to_device(t, device, copy, obj):
    if device is None:
        return t
    moved = t.to(device)
    if moved.device == t.device:
        return t
    if copy is False:
        raise ValueError(f"[from_dlpack] moving {type(obj).__name__} from {t.device} to "
                         f"{moved.device} is a copy, which copy=False forbids")
    return moved.eval()  # copied now: later writes by the producer are not seen
