"""Loading a local Hugging Face model directory: config.json, model.safetensors
(or sharded model-*.safetensors with model.safetensors.index.json), and
tokenizer.json."""
import json
import os

import numpy as np

import pyflame as pf
from .. import _core
from .config import ModelConfig
from .model import _FUSED, LlamaModel

_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}
_CONFIG_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16"}


def _fail(msg):
    raise ValueError(f"[llm.load] {msg}")


def expected_weights(cfg):
    """name -> shape of every weight the model needs."""
    D, I, V = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size
    H, Hkv, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    w = {"model.embed_tokens.weight": (V, D), "model.norm.weight": (D,)}
    if not cfg.tie_word_embeddings:
        w["lm_head.weight"] = (V, D)
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = (D,)
        w[p + "post_attention_layernorm.weight"] = (D,)
        for name, rows in (("q", H * hd), ("k", Hkv * hd), ("v", Hkv * hd)):
            w[p + f"self_attn.{name}_proj.weight"] = (rows, D)
            if cfg.qkv_bias:
                w[p + f"self_attn.{name}_proj.bias"] = (rows,)
        w[p + "self_attn.o_proj.weight"] = (D, H * hd)
        if cfg.o_bias:
            w[p + "self_attn.o_proj.bias"] = (D,)
        for name, shape in (("gate", (I, D)), ("up", (I, D)), ("down", (D, I))):
            w[p + f"mlp.{name}_proj.weight"] = shape
            if cfg.mlp_bias:
                w[p + f"mlp.{name}_proj.bias"] = shape[:1]
    return w


def fused_parts(cfg):
    """part name -> (fused name, its parts in order) for the projections the
    model runs as one GEMM (model._FUSED): q/k/v and gate/up, weights and
    biases."""
    out = {}
    for i in range(cfg.num_hidden_layers):
        for name, parts in _FUSED.items():
            for kind in ("weight", "bias"):
                names = tuple(f"model.layers.{i}.{p}.{kind}" for p in parts)
                for n in names:
                    out[n] = (f"model.layers.{i}.{name}.{kind}", names)
    return out


def _upload(bits, sdt, device, want):
    """A host array (bfloat16 as its uint16 bits) as a `want` tensor on
    device, uploaded now: the host copy goes before the next weight."""
    kind = "bfloat16" if sdt == "BF16" else _DTYPES[sdt]
    t = _core._from_host_bits(np.ascontiguousarray(bits), kind).to(device)
    if t.dtype != want:
        t = t.astype(want)
    pf.eval(t)
    return t


def _safe_open(file):
    """safetensors' reader of file; a file it cannot parse fails under
    llm.load instead of as safetensors' own error type."""
    from safetensors import safe_open
    try:
        return safe_open(file, framework="numpy")
    except Exception as e:  # SafetensorError derives from Exception only
        _fail(f"{file} is not a readable safetensors file: {e}")


def _weight_files(path):
    """name -> file for every tensor of the checkpoint."""
    single = os.path.join(path, "model.safetensors")
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.isfile(single):
        with _safe_open(single) as f:
            return {k: single for k in f.keys()}
    if os.path.isfile(index):
        with open(index) as fh:
            try:
                weight_map = json.load(fh)["weight_map"]
            except (ValueError, KeyError, TypeError):
                _fail(f"{index} has no weight_map")
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            _fail(f"the weight_map of {index} must map names to file names")
        files = {}
        for name, shard in weight_map.items():
            full = os.path.join(path, shard)
            if not os.path.isfile(full):
                _fail(f"shard {shard} named by model.safetensors.index.json is missing from {path}")
            files[name] = full
        return files
    _fail(f"no model.safetensors or model.safetensors.index.json in {path}")


class _RawReader:
    """Memory-mapped raw bytes of safetensors entries, for dtypes NumPy lacks
    (bfloat16): the file's header gives each tensor's byte range."""

    def __init__(self):
        self._headers = {}

    def read(self, file, name, np_dtype):
        if file not in self._headers:
            with open(file, "rb") as fh:
                n = int.from_bytes(fh.read(8), "little")
                self._headers[file] = (8 + n, json.loads(fh.read(n)))
        start, header = self._headers[file]
        info = header[name]
        b0, b1 = info["data_offsets"]
        count = (b1 - b0) // np.dtype(np_dtype).itemsize
        mm = np.memmap(file, dtype=np_dtype, mode="r", offset=start + b0, shape=(count,))
        return mm.reshape(info["shape"])


def load(path, dtype=None, device=None):
    """Loads a Llama-family model (Llama 2/3, Mistral, Qwen2) from a local
    Hugging Face directory. Returns (model, tokenizer); tokenizer is a
    ``tokenizers.Tokenizer`` from tokenizer.json, or None when absent.

    dtype: the weights' dtype (default: the checkpoint's); device: where they
    live (default: pf.get_device()). Each weight is read memory-mapped, one at
    a time, and uploaded once (bfloat16 as its raw bits); each layer's q/k/v
    and gate/up parts are joined on the host and uploaded as one weight
    (``self_attn.qkv_proj``, ``mlp.gate_up_proj``: one GEMM each)."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        _fail(f"path must be a directory name, got {type(path).__name__}")
    path = os.fspath(path)
    if not os.path.isdir(path):
        _fail(f"{path} is not a directory")
    cfg_file = os.path.join(path, "config.json")
    if not os.path.isfile(cfg_file):
        _fail(f"no config.json in {path}")
    try:
        with open(cfg_file) as fh:
            raw = json.load(fh)
    except ValueError as e:
        _fail(f"config.json is not valid JSON: {e}")
    cfg = ModelConfig.from_dict(raw)
    device = str(device) if device is not None else str(pf.get_device())
    want = pf._core._dtype(dtype, "llm.load") if dtype is not None else None
    files = _weight_files(path)
    expected = expected_weights(cfg)
    missing = [n for n in expected if n not in files]
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        _fail(f"checkpoint in {path} lacks {', '.join(missing[:5])}{more}")
    if want is None:
        name = _CONFIG_DTYPES.get(raw.get("torch_dtype") or raw.get("dtype"))
        if name is None:
            with _safe_open(files["model.embed_tokens.weight"]) as f:
                name = _DTYPES.get(f.get_slice("model.embed_tokens.weight").get_dtype(), "float32")
        want = pf._core._dtype(name, "llm.load")
    raw_reader = _RawReader()
    weights = {}
    fused = fused_parts(cfg)
    pending = {}  # part name -> (host data, safetensors dtype)
    by_file = {}
    for n in expected:
        by_file.setdefault(files[n], []).append(n)
    for file, names in by_file.items():
        with _safe_open(file) as f:
            for n in names:
                st = f.get_slice(n)
                sdt, shape = st.get_dtype(), tuple(st.get_shape())
                if shape != expected[n]:
                    _fail(f"{n} has shape {shape}, expected {expected[n]} from config.json")
                if sdt not in _DTYPES:
                    _fail(f"{n} has dtype {sdt}; supported: F32, F16, BF16")
                bits = raw_reader.read(file, n, np.uint16) if sdt == "BF16" else f.get_tensor(n)
                group = fused.get(n)
                if group is None:
                    weights[n] = _upload(bits, sdt, device, want)
                    continue
                # A part of a fused projection: held on the host until its
                # group is complete, then uploaded as one weight.
                name, parts = group
                pending[n] = (bits, sdt)
                if all(q in pending for q in parts):
                    got = [pending.pop(q) for q in parts]
                    if len({d for _, d in got}) == 1:
                        weights[name] = _upload(np.concatenate([b for b, _ in got]), sdt, device, want)
                    else:  # parts of different dtypes: the model fuses them on the device
                        weights.update({q: _upload(b, d, device, want) for q, (b, d) in zip(parts, got)})
    for n, (bits, sdt) in pending.items():  # a group the checkpoint left incomplete
        weights[n] = _upload(bits, sdt, device, want)
    model = LlamaModel(cfg, weights, want, str(weights["model.embed_tokens.weight"].device))
    return model, _load_tokenizer(path)


def _load_tokenizer(path):
    file = os.path.join(path, "tokenizer.json")
    if not os.path.isfile(file):
        return None
    from tokenizers import Tokenizer
    try:
        return Tokenizer.from_file(file)
    except Exception as e:  # the tokenizers library raises a bare Exception
        _fail(f"{file} is not a readable tokenizer: {e}")
