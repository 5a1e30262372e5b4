"""``pf.save`` / ``pf.load``: tensors and nested containers of them in the
safetensors format (https://github.com/huggingface/safetensors).

Tensors are stored under dotted names, as PyTorch state dicts name them
(``{"fc": {"weight": t}}`` -> ``"fc.weight"``; list items by index), so a
file of a flat state dict is an ordinary safetensors checkpoint that
``safetensors.torch.load_file`` reads. Everything else (the containers'
shape, dict key types, tuples, and leaves that are numbers, strings, bools or
None, such as optimizer hyperparameters and step counts) goes into the
header's metadata as JSON under ``"pyflame"``, so the object round-trips
exactly. bfloat16 is stored as its raw bits under the ``BF16`` dtype.

The package's own ``serialize_file`` / ``deserialize`` (what
``safetensors.numpy`` is built on) read and write the tensors: NumPy has no
bfloat16, so ``safetensors.numpy`` cannot carry it.
"""
import collections
import json
import math
import os

import numpy as np

from . import _core

_META_KEY = "pyflame"
_FORMAT_VERSION = 1
_SINGLE_TENSOR_NAME = "tensor"

# safetensors dtype code -> (little-endian NumPy dtype of the stored bits,
# PyFlame dtype name or None when the values are converted as pf.tensor does).
_FILE_DTYPES = {
    "BOOL": ("|b1", "bool"), "I32": ("<i4", "int32"), "I64": ("<i8", "int64"),
    "F16": ("<f2", "float16"), "BF16": ("<u2", "bfloat16"), "F32": ("<f4", "float32"),
    "F64": ("<f8", "float64"), "I8": ("|i1", "int8"), "U8": ("|u1", "uint8"), "I16": ("<i2", "int16"),
    "U16": ("<u2", None), "U32": ("<u4", None), "U64": ("<u8", None),
}


def _safetensors():
    try:
        import safetensors
    except ImportError:
        raise RuntimeError("[save/load] the 'safetensors' package is needed: "
                           "pip install safetensors") from None
    return safetensors


# ------------------------------------------------------------------ save

def _encode(obj, prefix, tensors, where, open_=()):
    """The JSON description of obj; its tensors go into ``tensors`` under
    dotted names. open_: ids of the containers being encoded around obj (a
    container inside itself would recurse without end)."""
    from .nn.parameter import Parameter
    if isinstance(obj, (dict, list, tuple)):
        if id(obj) in open_:
            raise ValueError(f"[save] the object contains itself at '{where or '<root>'}'")
        open_ = open_ + (id(obj),)
    if isinstance(obj, Parameter):
        obj = obj.data
    if isinstance(obj, _core.Tensor):
        name = prefix or _SINGLE_TENSOR_NAME
        if name in tensors:
            raise ValueError(f"[save] key collision: two tensors are named '{name}' (nested keys "
                             "are joined with '.')")
        tensors[name] = obj
        return {"t": name}
    if obj is None or isinstance(obj, (bool, int, str)):
        return {"v": obj}
    if isinstance(obj, float):
        # JSON has no inf/nan: those go as strings.
        return {"v": obj} if math.isfinite(obj) else {"f": repr(obj)}
    if isinstance(obj, np.generic) and obj.dtype.kind in "biuf":
        return _encode(obj.item(), prefix, tensors, where)
    if isinstance(obj, dict):
        items = []
        for key, value in obj.items():
            if isinstance(key, np.integer):
                key = int(key)
            if isinstance(key, bool) or not isinstance(key, (str, int)):
                raise ValueError(f"[save] dict keys must be str or int, got {key!r} at "
                                 f"'{where or '<root>'}'")
            path = f"{prefix}.{key}" if prefix else str(key)
            items.append([key, _encode(value, path, tensors, path, open_)])
        return {"o" if isinstance(obj, collections.OrderedDict) else "d": items}
    if isinstance(obj, (list, tuple)):
        items = []
        for i, value in enumerate(obj):
            path = f"{prefix}.{i}" if prefix else str(i)
            items.append(_encode(value, path, tensors, path, open_))
        return {"u" if isinstance(obj, tuple) else "l": items}
    hint = " (save its state_dict())" if hasattr(obj, "state_dict") else ""
    raise ValueError(f"[save] cannot save an object of type {type(obj).__name__} at "
                     f"'{where or '<root>'}'{hint}: expected tensors, dicts, lists, tuples, "
                     "numbers, strings, bools or None")


def save(obj, path):
    """Saves a tensor, or a (nested) dict/list/tuple of tensors and plain
    values (a state dict, an optimizer's ``state_dict()``), to ``path`` (a
    file name or a writable binary file object) in the safetensors format.

    Nested keys are joined with '.' as in PyTorch state dicts; two entries
    with the same joined name raise ``ValueError``, as do objects other than
    tensors, dicts (str or int keys), lists, tuples, numbers, strings, bools
    and None. Tensors are evaluated and copied to the host; the file keeps
    their dtypes (bfloat16 included) and shapes.
    """
    st = _safetensors()
    if not hasattr(path, "write"):
        path = _target(path)
    tensors = {}
    tree = _encode(obj, "", tensors, "")
    # "format": "pt" as PyTorch's checkpoints say: the names and layouts are
    # PyTorch's (Hugging Face loaders look for it).
    metadata = {"format": "pt",
                _META_KEY: json.dumps({"version": _FORMAT_VERSION, "tree": tree})}
    if tensors:
        _core.eval(list(tensors.values()))
    bits = {name: _core._to_host_bits(t) for name, t in tensors.items()}
    specs = {}
    for name, t in tensors.items():
        b = bits[name]
        dtype, shape = str(t.dtype), list(t.shape)
        if hasattr(st, "TensorSpec"):  # current safetensors: pointers, no copy
            specs[name] = st.TensorSpec(dtype=dtype, shape=shape, data_ptr=b.ctypes.data,
                                        data_len=b.nbytes)
        else:  # older releases take the bytes
            specs[name] = {"dtype": dtype, "shape": shape, "data": b.tobytes()}
    if hasattr(path, "write"):
        path.write(bytes(st.serialize(specs, metadata=metadata)))
        return
    # Written beside the target and renamed: an interrupted save leaves the
    # previous file intact.
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        st.serialize_file(specs, tmp, metadata=metadata)
        os.replace(tmp, path)
    except OSError as e:
        raise OSError(e.errno, f"[save] cannot write '{path}': {e.strerror or e}") from None
    except Exception as e:  # safetensors' own error type (an I/O failure inside it)
        raise OSError(f"[save] cannot write '{path}': {e}") from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _target(path):
    """The file name save writes, after checking that it can be one."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError("[save] path must be a file name or a writable binary file object, got "
                        f"{type(path).__name__}")
    path = os.fsdecode(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"[save] '{path}' is a directory, not a file name")
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"[save] no such directory: '{folder}'")
    return path


# ------------------------------------------------------------------ load

def _read(path):
    if hasattr(path, "read"):
        return path.read(), "<file object>"
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError("[load] path must be a file name or a readable binary file object, got "
                        f"{type(path).__name__}")
    name = os.fsdecode(path)
    if not os.path.exists(name):
        raise FileNotFoundError(f"[load] no such file: '{name}'")
    if os.path.isdir(name):
        raise IsADirectoryError(f"[load] '{name}' is a directory, not a safetensors file")
    with open(name, "rb") as f:
        return f.read(), name


def _metadata(data):
    """The header's __metadata__ (the format: 8-byte little-endian header
    length, then the JSON header); safetensors has validated it already."""
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8:8 + n]).get("__metadata__") or {}


def _tensor(name, entry, device):
    code = entry["dtype"]
    if code not in _FILE_DTYPES:
        raise ValueError(f"[load] tensor '{name}' has dtype {code}, which PyFlame does not "
                         "support")
    np_dtype, pf_dtype = _FILE_DTYPES[code]
    arr = np.frombuffer(entry["data"], dtype=np.dtype(np_dtype)).reshape(entry["shape"])
    if pf_dtype is None:  # converted as pf.tensor converts NumPy arrays
        from .ops import tensor
        return tensor(arr, device=device)
    if arr.dtype.byteorder == ">" or (arr.dtype.byteorder == "=" and not _little_endian()):
        arr = arr.byteswap().view(arr.dtype.newbyteorder())
    return _core._from_host_bits(arr, pf_dtype).to(device)


def _little_endian():
    import sys
    return sys.byteorder == "little"


def _decode(node, tensors):
    (tag, value), = node.items()
    if tag == "t":
        if value not in tensors:
            raise ValueError(f"[load] the file's structure names a tensor '{value}' it does "
                             "not contain")
        return tensors[value]
    if tag == "v":
        return value
    if tag == "f":
        return float(value)
    if tag in ("d", "o"):
        items = ((k, _decode(v, tensors)) for k, v in value)
        return collections.OrderedDict(items) if tag == "o" else dict(items)
    if tag in ("l", "u"):
        items = [_decode(v, tensors) for v in value]
        return tuple(items) if tag == "u" else items
    raise ValueError(f"[load] unknown entry {tag!r} in the file's structure")


def load(path, device=None):
    """Loads what ``pf.save`` wrote to ``path`` (a file name or a readable
    binary file object): the same structure, with tensors of the same dtypes
    and shapes on ``device`` (a device string; default: the default device).

    Any other safetensors file (e.g. from ``safetensors.torch.save_file``)
    loads as a dict from tensor names to tensors. Its unsigned 16-bit
    integers become int32 and unsigned 32/64-bit ones int64, as ``pf.tensor``
    converts NumPy arrays; other dtypes raise
    ``ValueError``. A missing file raises ``FileNotFoundError``; a file that
    is not safetensors raises ``ValueError``.
    """
    st = _safetensors()
    data, name = _read(path)
    try:
        entries = st.deserialize(data)
        metadata = _metadata(data)
    except Exception as e:  # SafetensorError, or a header that is not JSON
        raise ValueError(f"[load] '{name}' is not a safetensors file: {e}") from None
    device = _core.get_device() if device is None else device
    _core.full([0], 0.0, None, device, "load")  # checks the device string
    del data
    tensors = {}
    entries.reverse()
    while entries:  # each entry's bytes go as soon as its tensor holds them
        k, v = entries.pop()
        tensors[k] = _tensor(k, v, device)
    if _META_KEY not in metadata:
        return tensors
    try:
        info = json.loads(metadata[_META_KEY])
        tree = info["tree"]
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"[load] '{name}' has an unreadable '{_META_KEY}' structure entry") \
            from None
    try:
        return _decode(tree, tensors)
    except (AttributeError, TypeError, ValueError) as e:
        if str(e).startswith("[load]"):
            raise
        raise ValueError(f"[load] '{name}' has an unreadable '{_META_KEY}' structure entry: "
                         f"{e}") from None
