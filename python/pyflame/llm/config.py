"""Model configuration of the Llama family, read from a Hugging Face config.json."""
import math
from dataclasses import dataclass, field

# model_type -> what differs from Llama.
SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2")


def _fail(msg):
    raise ValueError(f"[llm.load] {msg}")


def _number(d, key, default=None, kind=int):
    """config.json's d[key] (default when absent) as an int or float; a value
    of another type (a string, a list) fails under llm.load."""
    value = d.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            (kind is int and isinstance(value, float) and not value.is_integer()):
        _fail(f"{key} in config.json must be {'an integer' if kind is int else 'a number'}, "
              f"got {value!r}")
    return kind(value)


@dataclass
class ModelConfig:
    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: dict = None
    tie_word_embeddings: bool = False
    qkv_bias: bool = False     # Qwen2, or Llama's attention_bias
    o_bias: bool = False       # Llama's attention_bias
    mlp_bias: bool = False     # Llama's mlp_bias
    # Query i attends to keys i - W < j <= i (its own included, as Hugging Face's Mistral).
    sliding_window: int = None
    window_from_layer: int = 0  # layers before this one attend to everything (Qwen2's max_window_layers)
    max_position_embeddings: int = 4096
    eos_token_id: list = field(default_factory=list)
    bos_token_id: int = None

    @classmethod
    def from_dict(cls, d):
        if not isinstance(d, dict):
            _fail(f"config.json must hold a JSON object, got {type(d).__name__}")
        mt = d.get("model_type")
        if mt is None:
            _fail("config.json has no model_type")
        if mt not in SUPPORTED_MODEL_TYPES:
            _fail(f"model_type '{mt}' is not supported (supported: {', '.join(SUPPORTED_MODEL_TYPES)})")
        required = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                    "num_attention_heads")
        missing = [k for k in required if d.get(k) is None]
        if missing:
            _fail(f"config.json lacks {', '.join(missing)}")
        for k in required[:4]:
            if _number(d, k) <= 0:
                _fail(f"{k} in config.json must be positive, got {d[k]}")
        H = _number(d, "num_attention_heads")
        Hkv = _number(d, "num_key_value_heads") or H
        D = _number(d, "hidden_size")
        hd = _number(d, "head_dim") or (D // H if H > 0 else 0)
        if H <= 0 or D % H and not d.get("head_dim"):
            _fail(f"hidden_size {D} is not a multiple of num_attention_heads {H}")
        if Hkv <= 0 or H % Hkv:
            _fail(f"num_attention_heads {H} is not a multiple of num_key_value_heads {Hkv}")
        if hd % 2:
            _fail(f"head_dim {hd} must be even for rotary embeddings")
        eos = d.get("eos_token_id")
        eos = [] if eos is None else (list(eos) if isinstance(eos, (list, tuple)) else [eos])
        attention_bias = bool(d.get("attention_bias", False))
        sliding = _number(d, "sliding_window")
        window_from = 0
        if mt == "qwen2":
            if not d.get("use_sliding_window", False):
                sliding = None
            window_from = _number(d, "max_window_layers", 28)
        if sliding is not None and sliding <= 0:
            _fail(f"sliding_window must be positive, got {sliding}")
        cfg = cls(
            model_type=mt, vocab_size=_number(d, "vocab_size"), hidden_size=D,
            intermediate_size=_number(d, "intermediate_size"),
            num_hidden_layers=_number(d, "num_hidden_layers"), num_attention_heads=H,
            num_key_value_heads=Hkv, head_dim=hd,
            rms_norm_eps=_number(d, "rms_norm_eps", 1e-6, float),
            rope_theta=_number(d, "rope_theta", 10000.0, float),
            rope_scaling=d.get("rope_scaling"),
            tie_word_embeddings=bool(d.get("tie_word_embeddings", False)),
            qkv_bias=mt == "qwen2" or attention_bias,
            o_bias=mt == "llama" and attention_bias,
            mlp_bias=mt == "llama" and bool(d.get("mlp_bias", False)),
            sliding_window=sliding or None, window_from_layer=window_from,
            max_position_embeddings=_number(d, "max_position_embeddings", 4096),
            eos_token_id=eos, bos_token_id=d.get("bos_token_id"))
        cfg.rope_inv_freq()  # validates rope_scaling
        return cfg

    def layer_window(self, layer):
        """The attention window of a layer (None: the whole sequence)."""
        return self.sliding_window if layer >= self.window_from_layer else None

    def rope_inv_freq(self):
        """The rotary frequencies (head_dim/2 floats), or None for the plain
        theta^(-2j/head_dim) ones; Hugging Face's rope_scaling types 'default',
        'linear' and 'llama3'."""
        rs = self.rope_scaling
        if not rs:
            return None
        if not isinstance(rs, dict):
            _fail(f"rope_scaling in config.json must be an object, got {rs!r}")
        kind = rs.get("rope_type", rs.get("type"))
        hd = self.head_dim
        base = [self.rope_theta ** (-(2 * j) / hd) for j in range(hd // 2)]
        if kind in (None, "default"):
            return None
        if kind == "linear":
            return [f / _number(rs, "factor", 1.0, float) for f in base]
        if kind == "llama3":
            try:
                factor, lo, hi, old = (_number(rs, k, kind=float) for k in (
                    "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"))
                if None in (factor, lo, hi, old):
                    raise KeyError(next(k for k in ("factor", "low_freq_factor", "high_freq_factor",
                                                    "original_max_position_embeddings") if rs.get(k) is None))
            except KeyError as e:
                _fail(f"rope_scaling of type llama3 lacks {e.args[0]}")
            lo_wavelen, hi_wavelen = old / lo, old / hi
            out = []
            for f in base:
                wavelen = 2 * math.pi / f
                if wavelen < hi_wavelen:
                    out.append(f)
                elif wavelen > lo_wavelen:
                    out.append(f / factor)
                else:
                    smooth = (old / wavelen - lo) / (hi - lo)
                    out.append((1 - smooth) * f / factor + smooth * f)
            return out
        _fail(f"rope_scaling type '{kind}' is not supported (supported: default, linear, llama3)")
