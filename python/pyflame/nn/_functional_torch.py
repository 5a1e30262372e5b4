"""More of ``torch.nn.functional``, composed from the core ops (their
gradients come from those ops). Formulations stay finite where the naive one
overflows, and where() branches that are not taken see safe inputs, so no
NaN reaches a gradient through the branch that was discarded."""
import math
import numbers

import numpy as np

from .. import _core
from ..ops import _shape
from .parameter import Parameter

__all__ = [
    "leaky_relu", "elu", "selu", "celu", "softplus", "mish", "hardswish", "hardsigmoid",
    "logsigmoid", "one_hot", "interpolate", "upsample", "normalize", "cosine_similarity",
    "kl_div", "smooth_l1_loss", "huber_loss", "l1_loss", "binary_cross_entropy_with_logits",
]


def tensor_arg(x, what, fn):
    """A tensor argument (a Parameter's data), else a TypeError naming it."""
    if isinstance(x, Parameter):
        x = x.data
    if not isinstance(x, _core.Tensor):
        raise TypeError(f"[{fn}] {what} must be a pyflame.Tensor, got {type(x).__name__}")
    return x


def check_reduction(reduction, fn, extra=()):
    if reduction not in ("none", "mean", "sum") + tuple(extra):
        choices = ", ".join(repr(r) for r in ("none", "mean", "sum") + tuple(extra))
        raise ValueError(f"[{fn}] reduction must be one of {choices}, got {reduction!r}")


def reduce(loss, reduction):
    if reduction == "none":
        return loss
    return _core.sum(loss) if reduction == "sum" else _core.mean(loss)


def _const(v, x):
    return _core.full([], float(v), x.dtype, x.device)


def _floating(x, fn):
    x = tensor_arg(x, "input", fn)
    if not x.dtype.is_floating_point:
        raise TypeError(f"[{fn}] expected a floating-point tensor, got {x.dtype}")
    return x


def _real(v, what, fn):
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"[{fn}] {what} must be a real number, got {type(v).__name__}")
    return float(v)


# exp(x) - 1 and log(1 + u) without cancellation near 0.
def _expm1(x):
    t = _core.tanh(x * 0.5)
    return 2.0 * t / (1.0 - t)  # finite for x <= 0 (callers clamp)


def _log1p(u):
    w = 1.0 + u
    one = _core.eq(w, _const(1, u))
    d = _core.where(one, _const(1, u), w - 1.0)  # never 0: no NaN in the unused branch
    return _core.where(one, u, _core.log(w) * (u / d))


def _nonpos(x):
    """x where x <= 0, else 0: the input of a branch taken only for x <= 0
    (where(), not minimum(), so x = 0 passes its whole gradient)."""
    return _core.where(_core.gt(x, _const(0, x)), _const(0, x), x)


def _softplus0(z):
    """log(1 + exp(z)) = z + log1p(exp(-z)) for z > 0, log1p(exp(z))
    otherwise: no exp of a positive number, and sigmoid(z) as the gradient."""
    pos = _core.gt(z, _const(0, z))
    zp = _core.where(pos, z, _const(0, z))
    return _core.where(pos, zp + _log1p(_core.exp(-zp)), _log1p(_core.exp(_nonpos(z))))


# ---------------------------------------------------------------- activations

def leaky_relu(input, negative_slope=0.01, inplace=False):  # noqa: A002
    x = _floating(input, "leaky_relu")
    s = _real(negative_slope, "negative_slope", "leaky_relu")
    return _core.where(_core.gt(x, _const(0, x)), x, x * s)


def elu(input, alpha=1.0, inplace=False):  # noqa: A002
    x = _floating(input, "elu")
    a = _real(alpha, "alpha", "elu")
    neg = a * _expm1(_nonpos(x))
    return _core.where(_core.gt(x, _const(0, x)), x, neg)


def celu(input, alpha=1.0, inplace=False):  # noqa: A002
    x = _floating(input, "celu")
    a = _real(alpha, "alpha", "celu")
    if a == 0:
        raise ValueError("[celu] alpha must not be 0")
    neg = a * _expm1(_nonpos(x) / a)
    return _core.where(_core.gt(x, _const(0, x)), x, neg)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace=False):  # noqa: A002
    return _SELU_SCALE * elu(_floating(input, "selu"), _SELU_ALPHA)


def softplus(input, beta=1.0, threshold=20.0):  # noqa: A002
    """log(1 + exp(beta * x)) / beta; x itself where beta * x > threshold."""
    x = _floating(input, "softplus")
    b = _real(beta, "beta", "softplus")
    t = _real(threshold, "threshold", "softplus")
    if b == 0:
        raise ValueError("[softplus] beta must not be 0")
    bx = x * b
    return _core.where(_core.gt(bx, _const(t, x)), x, _softplus0(bx) / b)


def logsigmoid(input):  # noqa: A002
    """log(sigmoid(x)) = -softplus(-x), finite for any x."""
    x = _floating(input, "logsigmoid")
    return -_softplus0(-x)


def mish(input, inplace=False):  # noqa: A002
    x = _floating(input, "mish")
    return x * _core.tanh(_softplus0(x))


def hardsigmoid(input, inplace=False):  # noqa: A002
    x = _floating(input, "hardsigmoid")
    return _core.clamp(x + 3.0, 0.0, 6.0) / 6.0


def hardswish(input, inplace=False):  # noqa: A002
    x = _floating(input, "hardswish")
    return x * (_core.clamp(x + 3.0, 0.0, 6.0) / 6.0)


# ---------------------------------------------------------------- one_hot

def one_hot(tensor, num_classes=-1):
    """int64 (..., num_classes) with a 1 at each value's class. The values
    are checked on the host (as PyTorch does)."""
    x = tensor_arg(tensor, "tensor", "one_hot")
    if x.dtype not in (_core.Dtype.int32, _core.Dtype.int64):
        raise TypeError(f"[one_hot] one_hot is only applicable to index tensors, got {x.dtype}")
    if isinstance(num_classes, bool) or not isinstance(num_classes, numbers.Integral):
        raise TypeError("[one_hot] num_classes must be an integer")
    vals = x.numpy()
    if vals.size and vals.min() < 0:
        raise ValueError("[one_hot] class values must be non-negative")
    if num_classes == -1:
        if not vals.size:
            raise ValueError("[one_hot] cannot infer the number of classes of an empty tensor")
        num_classes = int(vals.max()) + 1
    elif num_classes < 0:
        raise ValueError(f"[one_hot] num_classes must be -1 or non-negative, got {num_classes}")
    elif vals.size and vals.max() >= num_classes:
        raise ValueError("[one_hot] class values must be smaller than num_classes")
    classes = _core.arange(0.0, float(num_classes), 1.0, x.dtype, x.device)
    hot = _core.eq(_core.unsqueeze(x, x.ndim), classes)
    return hot.astype(_core.Dtype.int64)


# ---------------------------------------------------------------- interpolate

_LINEAR = {3: "linear", 4: "bilinear", 5: "trilinear"}


def _out_sizes(x, size, scale_factor, fn):
    nsp = x.ndim - 2
    if (size is None) == (scale_factor is None):
        raise ValueError(f"[{fn}] give exactly one of size and scale_factor")
    if size is not None:
        sizes = [size] * nsp if isinstance(size, numbers.Integral) else list(size)
        if len(sizes) != nsp or any(not isinstance(s, numbers.Integral) or s <= 0 for s in sizes):
            raise ValueError(f"[{fn}] size must be {nsp} positive integers, got {size!r}")
        return [int(s) for s in sizes], None
    scales = [scale_factor] * nsp if isinstance(scale_factor, numbers.Real) else list(scale_factor)
    if len(scales) != nsp or any(not isinstance(s, numbers.Real) or not 0 < s < math.inf for s in scales):
        raise ValueError(f"[{fn}] scale_factor must be {nsp} positive numbers, got "
                         f"{scale_factor!r}")
    scales = [float(s) for s in scales]
    return [int(math.floor(n * s)) for n, s in zip(x.shape[2:], scales)], scales


def _source_coords(n_in, n_out, scale, align_corners, nearest):
    """Source coordinates of each output position along one axis (float64),
    as ATen computes them (scale given: 1/scale, else n_in/n_out)."""
    dst = np.arange(n_out, dtype=np.float64)
    if align_corners:
        r = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        return dst * r
    r = 1.0 / scale if scale is not None else n_in / n_out
    if nearest:
        return np.minimum(np.floor((dst * np.float32(r)).astype(np.float32)), n_in - 1)
    return np.maximum((dst + 0.5) * r - 0.5, 0.0)


def _take(x, axis, idx):
    return _core.index_select(x, axis, _core.from_numpy(idx.astype(np.int64), x.device))


def interpolate(input, size=None, scale_factor=None, mode="nearest",  # noqa: A002
                align_corners=None, recompute_scale_factor=None, antialias=False):
    """torch.nn.functional.interpolate for 'nearest' and the linear modes
    ('linear' 3-D, 'bilinear' 4-D NCHW, 'trilinear' 5-D), separable along
    each spatial axis: gathers of the source rows and a weighted sum."""
    fn = "interpolate"
    x = _floating(input, fn)
    if x.ndim not in (3, 4, 5):
        raise ValueError(f"[{fn}] expected a 3-D, 4-D or 5-D input (N, C, spatial...), got "
                         f"shape {tuple(x.shape)}")
    if antialias:
        raise ValueError(f"[{fn}] antialias is not supported")
    if mode == "nearest":
        if align_corners is not None:
            raise ValueError(f"[{fn}] align_corners option can only be set with the "
                             "interpolating modes: linear | bilinear | trilinear")
    elif mode in ("linear", "bilinear", "trilinear"):
        want = {v: k for k, v in _LINEAR.items()}[mode]
        if x.ndim != want:
            raise ValueError(f"[{fn}] mode {mode!r} expects a {want}-D input, got {x.ndim}-D")
    else:
        raise ValueError(f"[{fn}] mode must be 'nearest', 'linear', 'bilinear' or 'trilinear', "
                         f"got {mode!r}")
    sizes, scales = _out_sizes(x, size, scale_factor, fn)
    # Checked before any host index table is built.
    _core._check_shape(_shape((list(x.shape[:2]) + sizes,), fn), x.dtype, fn)
    if recompute_scale_factor:
        scales = None
    if any(s <= 0 for s in sizes) or any(n == 0 for n in x.shape[2:]):
        raise ValueError(f"[{fn}] input and output sizes should be greater than 0, got input "
                         f"{tuple(x.shape[2:])} and output {tuple(sizes)}")
    out = x
    for i, n_out in enumerate(sizes):
        axis, n_in = 2 + i, x.shape[2 + i]
        scale = scales[i] if scales else None
        src = _source_coords(n_in, n_out, scale, bool(align_corners), mode == "nearest")
        if mode == "nearest":
            out = _take(out, axis, src)
            continue
        i0 = np.minimum(np.floor(src), n_in - 1).astype(np.int64)
        i1 = np.minimum(i0 + 1, n_in - 1)
        lam = (src - i0).astype(np.float32)
        shape = [1] * x.ndim
        shape[axis] = n_out
        w1 = _core.reshape(_core.from_numpy(lam, x.device).astype(x.dtype), shape)
        w0 = 1.0 - w1
        out = _take(out, axis, i0) * w0 + _take(out, axis, i1) * w1
    return out


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):  # noqa: A002
    return interpolate(input, size, scale_factor, mode, align_corners)


# ---------------------------------------------------------------- norms and distances

def _pnorm(x, p, dim, eps):
    """max(||x||_p along dim, eps), keepdim, finite gradient at 0."""
    if p == math.inf:
        return _core.maximum(_core.max(_core.abs(x), [dim], True), _const(eps, x))
    if p <= 0:
        raise ValueError(f"[normalize] p must be positive, got {p}")
    if p == 2:
        s = _core.sum(x * x, [dim], True)
    elif p == 1:
        return _core.maximum(_core.sum(_core.abs(x), [dim], True), _const(eps, x))
    else:
        s = _core.sum(_core.abs(x) ** p, [dim], True)
    return _core.maximum(s, _const(eps ** p, x)) ** (1.0 / p)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):  # noqa: A002
    """x / max(||x||_p, eps) along dim."""
    x = _floating(input, "normalize")
    if out is not None:
        raise ValueError("[normalize] out= is not supported")
    p = _real(p, "p", "normalize")
    if x.ndim == 0:
        raise ValueError("[normalize] expected a tensor with at least one dimension")
    if not -x.ndim <= dim < x.ndim:
        raise ValueError(f"[normalize] dim {dim} is out of range for a {x.ndim}-d tensor")
    return x / _pnorm(x, p, dim % x.ndim, _real(eps, "eps", "normalize"))


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum(x1/max(||x1||, eps) * x2/max(||x2||, eps)) along dim (ATen's
    formulation), after broadcasting x1 and x2."""
    a, b = _floating(x1, "cosine_similarity"), _floating(x2, "cosine_similarity")
    try:
        shape = list(np.broadcast_shapes(tuple(a.shape), tuple(b.shape)))
    except ValueError:
        raise ValueError(f"[cosine_similarity] shapes {tuple(a.shape)} and {tuple(b.shape)} do "
                         "not broadcast") from None
    a, b = _core.broadcast_to(a, shape), _core.broadcast_to(b, shape)
    if not shape or not -len(shape) <= dim < len(shape):
        raise ValueError(f"[cosine_similarity] dim {dim} is out of range for shape {tuple(shape)}")
    d = dim % len(shape)
    e = _real(eps, "eps", "cosine_similarity")
    return _core.sum((a / _pnorm(a, 2.0, d, e)) * (b / _pnorm(b, 2.0, d, e)), [d])


# ---------------------------------------------------------------- losses

def _pair(input, target, fn):
    x = _floating(input, fn)
    t = tensor_arg(target, "target", fn)
    if tuple(x.shape) != tuple(t.shape):
        try:
            np.broadcast_shapes(tuple(x.shape), tuple(t.shape))
        except ValueError:
            raise ValueError(f"[{fn}] input of shape {tuple(x.shape)} and target of shape "
                             f"{tuple(t.shape)} do not broadcast") from None
    return x, t.astype(x.dtype) if t.dtype != x.dtype else t


def kl_div(input, target, size_average=None, reduce_=None, reduction="mean",  # noqa: A002
           log_target=False):
    """KL(target || exp(input)) pointwise: target * (log target - input)
    (0 where target is 0), or exp(t) * (t - input) with log_target."""
    fn = "kl_div"
    check_reduction(reduction, fn, extra=("batchmean",))
    x, t = _pair(input, target, fn)
    if log_target:
        loss = _core.exp(t) * (t - x)
    else:
        zero = _core.eq(t, _const(0, t))  # xlogy: 0 log 0 = 0; negative targets give NaN
        xlogx = _core.where(zero, _const(0, t), t * _core.log(_core.where(zero, _const(1, t), t)))
        loss = xlogx - t * x
    if reduction == "batchmean":
        n = x.shape[0] if x.ndim else 1
        return _core.sum(loss) / float(n)
    return reduce(loss, reduction)


def smooth_l1_loss(input, target, size_average=None, reduce_=None, reduction="mean",  # noqa: A002
                   beta=1.0):
    fn = "smooth_l1_loss"
    check_reduction(reduction, fn)
    b = _real(beta, "beta", fn)
    if b < 0:
        raise ValueError(f"[{fn}] beta must be non-negative, got {b}")
    x, t = _pair(input, target, fn)
    d = _core.abs(x - t)
    if b == 0:
        return reduce(d, reduction)
    small = _core.lt(d, _const(b, d))
    return reduce(_core.where(small, 0.5 * d * d / b, d - 0.5 * b), reduction)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):  # noqa: A002
    fn = "huber_loss"
    check_reduction(reduction, fn)
    dl = _real(delta, "delta", fn)
    if dl <= 0:
        raise ValueError(f"[{fn}] delta must be positive, got {dl}")
    x, t = _pair(input, target, fn)
    d = _core.abs(x - t)
    loss = _core.where(_core.lt(d, _const(dl, d)), 0.5 * d * d, dl * (d - 0.5 * dl))
    if weight is not None:
        loss = loss * tensor_arg(weight, "weight", fn)
    return reduce(loss, reduction)


def l1_loss(input, target, size_average=None, reduce_=None, reduction="mean"):  # noqa: A002
    check_reduction(reduction, "l1_loss")
    x, t = _pair(input, target, "l1_loss")
    return reduce(_core.abs(x - t), reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,  # noqa: A002
                                     reduce_=None, reduction="mean", pos_weight=None):
    """BCE of sigmoid(input) against target, computed from the logits:
    (1 - t) x + (1 + (pw - 1) t) softplus(-x), finite for any x."""
    fn = "binary_cross_entropy_with_logits"
    check_reduction(reduction, fn)
    x, t = _pair(input, target, fn)
    if tuple(x.shape) != tuple(t.shape):
        raise ValueError(f"[{fn}] target size {tuple(t.shape)} must be the same as input size "
                         f"{tuple(x.shape)}")
    sp = _softplus0(-x)
    if pos_weight is not None:
        pw = tensor_arg(pos_weight, "pos_weight", fn).astype(x.dtype)
        loss = (1.0 - t) * x + (1.0 + (pw - 1.0) * t) * sp
    else:
        loss = (1.0 - t) * x + sp
    if weight is not None:
        loss = loss * tensor_arg(weight, "weight", fn).astype(x.dtype)
    return reduce(loss, reduction)
