"""Functional ops in the shape of ``torch.nn.functional``: ``import
pyflame.nn.functional as F``.

Most names are the core ops themselves (``F.conv2d is pf.conv2d``), resolved
when first used, so this module imports even in a build that lacks some of
them; using a missing one raises AttributeError naming the op. A few are
defined here: ``linear``, ``softmax``/``log_softmax`` with torch's ``dim``
argument, ``flatten`` and ``binary_cross_entropy`` (an alias of ``bce_loss``);
the activations, ``one_hot``, ``interpolate``, ``normalize``,
``cosine_similarity`` and the losses of ``_functional_torch``.
"""
import numbers
import sys
import warnings

from .. import _core
from . import _functional_torch
from ._functional_torch import *  # noqa: F401,F403  (activations, interpolate, more losses)
from ._functional_torch import tensor_arg as _tensor_arg
from .parameter import Parameter

# Names forwarded to pf.<name> (torch.nn.functional semantics).
_FORWARDED = (
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
    "adaptive_max_pool1d", "adaptive_max_pool2d",
    "batch_norm", "layer_norm", "group_norm", "rms_norm",
    "mse_loss", "cross_entropy", "nll_loss", "bce_loss",
    "embedding", "dropout", "pad", "scaled_dot_product_attention",
    "relu", "gelu", "silu", "sigmoid", "tanh",
)
_ALIASES = {"binary_cross_entropy": "bce_loss"}

__all__ = list(_FORWARDED) + list(_ALIASES) + [
    "linear", "softmax", "log_softmax", "flatten"] + list(_functional_torch.__all__)


def _lookup(name):
    pkg = sys.modules.get("pyflame")
    fn = getattr(pkg, name, None) if pkg is not None else None
    if fn is None:
        fn = getattr(_core, name, None)
    return fn


def __getattr__(name):
    if name in _FORWARDED or name in _ALIASES:
        target = _ALIASES.get(name, name)
        fn = _lookup(target)
        if fn is None:
            raise AttributeError(f"pyflame.nn.functional.{name}: the op pf.{target} is not "
                                 "available in this build of pyflame")
        globals()[name] = fn
        return fn
    raise AttributeError(f"module 'pyflame.nn.functional' has no attribute '{name}'")


def __dir__():
    return sorted(set(globals()) | set(__all__))




def linear(input, weight, bias=None):  # noqa: A002  (torch's argument name)
    """``input @ weight.T + bias`` with weight of shape (out_features,
    in_features) and bias (out_features,); input (..., in_features)."""
    # Called per layer per step: Parameter records to their tensors with
    # explicit tests, then one call records the transposed weight (internal,
    # not a view anyone can write through, so untracked: _inplace.py), the
    # matmul and the bias add, checks included.
    if isinstance(input, Parameter):
        input = input.data
    if isinstance(weight, Parameter):
        weight = weight.data
    if bias is not None and type(bias) is not _core.Tensor:
        bias = _tensor_arg(bias, "bias", "linear")
    if not isinstance(weight, _core.Tensor) or weight.ndim != 2:
        raise ValueError(f"[linear] weight must be a 2-D tensor (out_features, in_features), "
                         f"got {type(weight).__name__} of shape {getattr(weight, 'shape', None)}")
    if isinstance(input, _core.Tensor):
        return _core.linear(input, weight, bias)
    out = _core.matmul(input, _core.transpose(weight, None))  # array-likes, as matmul takes them
    if bias is not None:
        if out.dtype != bias.dtype and _core._autocast_dtype() is not None:
            bias = bias.astype(out.dtype)  # autocast: the bias joins the low-precision output
        out = out + bias
    return out


def _implicit_dim(name, ndim):
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. "
                  "Change the call to include dim=X as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def _dim(dim, fn, allow_none=True):
    if (dim is None and not allow_none) or (dim is not None and (
            isinstance(dim, bool) or not isinstance(dim, numbers.Integral))):
        raise TypeError(f"[{fn}] dim must be an integer{' or None' if allow_none else ''}, got "
                        f"{type(dim).__name__}")
    return dim


def softmax(input, dim=None, dtype=None):  # noqa: A002
    """softmax along ``dim`` (torch's implicit dim, with its warning, if None)."""
    input, dim = _tensor_arg(input, "input", "softmax"), _dim(dim, "softmax")
    if dtype is not None:
        input = input.astype(dtype)
    if dim is None:
        dim = _implicit_dim("softmax", input.ndim)
    return _core.softmax(input, dim)


def log_softmax(input, dim=None, dtype=None):  # noqa: A002
    input, dim = _tensor_arg(input, "input", "log_softmax"), _dim(dim, "log_softmax")
    if dtype is not None:
        input = input.astype(dtype)
    if dim is None:
        dim = _implicit_dim("log_softmax", input.ndim)
    return _core.log_softmax(input, dim)


def flatten(input, start_dim=0, end_dim=-1):  # noqa: A002
    input = _tensor_arg(input, "input", "flatten")
    return _core.flatten(input, _dim(start_dim, "flatten", False), _dim(end_dim, "flatten", False))
