"""Property tests: matmul, softmax/log_softmax, normalizations, losses,
convolutions and pooling at small sizes, against PyTorch's CPU ops in
float64 on the same (dtype-rounded) values; bad shapes and arguments must
raise the project's ValueError with a clean message."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pyflame as pf
from prop_common import (FLOAT_DTYPES, arrays, assume, axis_of, check, dtypes, raises_clean,
                         shapes, still_usable, to_pf)

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def t64(x):
    return torch.from_numpy(np.array(x, dtype=np.float64))


def _acc_atol(dtype, scale):
    """Absolute tolerance for a sum of products accumulated in float32 and
    rounded to dtype: a few ulps of the sum of |terms|."""
    eps = {"float32": 1.2e-7, "float16": 1e-3, "bfloat16": 8e-3}[dtype]
    return 1e-5 + 4 * eps * scale


# ------------------------------------------------------------------ matmul

@st.composite
def _matmul_shapes(draw):
    """Shapes as numpy.matmul takes them: 1-d vectors, 2-d matrices and
    broadcast batch dims, zero-size included."""
    m, k, n = (draw(st.integers(0, 4)) for _ in range(3))
    batch_a = draw(shapes(max_dims=2, max_side=3))
    batch_b = tuple(draw(st.sampled_from([d, 1])) for d in batch_a)
    batch_b = batch_b[draw(st.integers(0, len(batch_b))):]
    a = (k,) if draw(st.booleans()) and not batch_a else batch_a + (m, k)
    b = (k,) if draw(st.booleans()) and not batch_b else batch_b + (k, n)
    return a, b


@given(data=st.data())
def test_matmul(device, data):
    dtype = data.draw(dtypes(FLOAT_DTYPES), "dtype")
    sa, sb = data.draw(_matmul_shapes(), "shapes")
    a = data.draw(arrays(dtype, sa, low=-4, high=4), "a")
    b = data.draw(arrays(dtype, sb, low=-4, high=4), "b")
    want = np.matmul(a, b)
    scale = np.matmul(np.abs(a), np.abs(b))
    ta, tb = to_pf(a, dtype), to_pf(b, dtype)
    check(pf.matmul(ta, tb), want, dtype, atol=_acc_atol(dtype, scale))
    check(ta @ tb, want, dtype, atol=_acc_atol(dtype, scale))


@given(data=st.data())
def test_matmul_specials(device, data):
    """NaN and infinities propagate as in IEEE arithmetic (float32)."""
    sa, sb = (2, 3), (3, 2)
    a = data.draw(arrays("float32", sa, finite_max=4), "a")
    b = data.draw(arrays("float32", sb, low=-4, high=4), "b")
    with np.errstate(invalid="ignore"):
        want = np.matmul(a, b)
    got = pf.matmul(to_pf(a, "float32"), to_pf(b, "float32")).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))


@given(data=st.data())
def test_matmul_invalid(device, data):
    k = data.draw(st.integers(1, 4), "k")
    a = pf.zeros((2, k))
    raises_clean(ValueError, pf.matmul, a, pf.zeros((k + 1, 3)))
    raises_clean(ValueError, pf.matmul, pf.zeros(()), a)
    raises_clean(ValueError, pf.matmul, pf.zeros((2, 2, k, 3)), pf.zeros((3, 3, 4)))
    raises_clean((ValueError, TypeError), pf.matmul, a, "x")
    still_usable()


# ----------------------------------------------------------------- softmax

@pytest.mark.parametrize("log", [False, True])
@given(data=st.data())
def test_softmax(device, log, data):
    dtype = data.draw(dtypes(FLOAT_DTYPES), "dtype")
    shape = data.draw(shapes(min_dims=1, max_dims=3), "shape")
    x = data.draw(arrays(dtype, shape, finite_max=30), "x")
    axis = data.draw(axis_of(len(shape)), "axis")
    ref = (torch.log_softmax if log else torch.softmax)(t64(x), axis).numpy()
    out = (pf.log_softmax if log else pf.softmax)(to_pf(x, dtype), axis)
    check(out, ref, dtype, atol=1e-5 if dtype == "float32" else None)
    raises_clean((ValueError, IndexError), pf.softmax, to_pf(x, dtype),
                 len(shape) + data.draw(st.integers(0, 3)))


# ------------------------------------------------------------ normalization

def _norm_atol(dtype, x, w, axes):
    """Tolerance of a normalization computed as x * scale + shift in float32
    (as torch's CPU kernels do too): a few ulps of |x| * |w| / std, which is
    large where a group is (nearly) constant."""
    xf = np.asarray(x, dtype=np.float64)
    rstd = 1 / np.sqrt(xf.var(axis=axes, keepdims=True) + 1e-5)
    base = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 6e-2}[dtype]
    return base + 8 * 1.2e-7 * np.abs(xf) * np.abs(w) * rstd

@given(data=st.data())
def test_layer_norm(device, data):
    dtype = data.draw(dtypes(FLOAT_DTYPES), "dtype")
    shape = data.draw(shapes(min_dims=1, max_dims=3, min_side=1), "shape")
    k = data.draw(st.integers(1, len(shape)), "k")
    norm = shape[len(shape) - k:]
    x = data.draw(arrays(dtype, shape, low=-8, high=8), "x")
    w = data.draw(arrays(dtype, norm, low=-2, high=2), "w")
    b = data.draw(arrays(dtype, norm, low=-2, high=2), "b")
    ref = TF.layer_norm(t64(x), norm, t64(w), t64(b), 1e-5).numpy()
    out = pf.layer_norm(to_pf(x, dtype), list(norm), to_pf(w, dtype), to_pf(b, dtype), 1e-5)
    axes = tuple(range(len(shape) - k, len(shape)))
    check(out, ref, dtype, atol=_norm_atol(dtype, x, w, axes))
    raises_clean(ValueError, pf.layer_norm, to_pf(x, dtype), [d + 1 for d in norm])


@given(data=st.data())
def test_rms_and_group_norm(device, data):
    dtype = data.draw(dtypes(FLOAT_DTYPES), "dtype")
    n, g = data.draw(st.integers(1, 3), "n"), data.draw(st.integers(1, 3), "groups")
    c = g * data.draw(st.integers(1, 2), "per_group")
    spatial = data.draw(shapes(max_dims=2, min_side=1, max_side=3), "spatial")
    # torch refuses groups of a single value (their variance is undefined).
    assume((c // g) * int(np.prod(spatial)) > 1)
    x = data.draw(arrays(dtype, (n, c) + spatial, low=-8, high=8), "x")
    w = data.draw(arrays(dtype, (c,), low=-2, high=2), "w")
    b = data.draw(arrays(dtype, (c,), low=-2, high=2), "b")
    atol = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 6e-2}[dtype]
    ref = TF.group_norm(t64(x), g, t64(w), t64(b), 1e-5).numpy()
    grouped = x.reshape((n, g, -1))
    gatol = _norm_atol(dtype, grouped, 1, (2,)).reshape(x.shape) * \
        np.abs(w).reshape((1, c) + (1,) * len(spatial))
    check(pf.group_norm(to_pf(x, dtype), g, to_pf(w, dtype), to_pf(b, dtype), 1e-5), ref, dtype,
          atol=np.maximum(gatol, atol))
    last = x.shape[-1]
    wl = data.draw(arrays(dtype, (last,), low=-2, high=2), "w_last")
    xx = t64(x)
    ref = (xx / torch.sqrt((xx * xx).mean(-1, keepdim=True) + 1e-6) * t64(wl)).numpy()
    check(pf.rms_norm(to_pf(x, dtype), to_pf(wl, dtype), 1e-6), ref, dtype, atol=atol)
    if c > 1:
        raises_clean(ValueError, pf.group_norm, to_pf(x, dtype), c + 1)


# ------------------------------------------------------------------- losses

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@given(data=st.data())
def test_mse_bce(device, reduction, data):
    dtype = data.draw(dtypes(FLOAT_DTYPES), "dtype")
    shape = data.draw(shapes(max_dims=3, min_side=1), "shape")
    x = data.draw(arrays(dtype, shape, low=-4, high=4), "x")
    y = data.draw(arrays(dtype, shape, low=-4, high=4), "y")
    n = max(int(np.prod(shape)), 1)
    atol = _acc_atol(dtype, 64 * n)
    check(pf.mse_loss(to_pf(x, dtype), to_pf(y, dtype), reduction),
          TF.mse_loss(t64(x), t64(y), reduction=reduction).numpy(), dtype, atol=atol)
    p = data.draw(arrays(dtype, shape, low=0, high=1), "p")
    q = data.draw(arrays(dtype, shape, low=0, high=1), "q")
    ref = TF.binary_cross_entropy(t64(p), t64(q), reduction=reduction).numpy()
    # log(p) near 0 amplifies p's rounding; compare at the input dtype's resolution.
    check(pf.bce_loss(to_pf(p, dtype), to_pf(q, dtype), None, reduction), ref, dtype,
          rtol={"float32": 1e-4, "float16": 1e-2, "bfloat16": 5e-2}[dtype],
          atol=_acc_atol(dtype, 100 * n))
    raises_clean(ValueError, pf.mse_loss, pf.zeros((2, 3)), pf.zeros((4, 5)), reduction)
    raises_clean(ValueError, pf.mse_loss, to_pf(x, dtype), to_pf(y, dtype), "avg")


def test_bce_input_out_of_range_raises(device):
    raises_clean((ValueError, RuntimeError), pf.bce_loss, pf.tensor([1.5, 0.5]),
                 pf.tensor([1.0, 0.0]))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@given(data=st.data())
def test_cross_entropy_nll(device, reduction, data):
    dtype = data.draw(dtypes(FLOAT_DTYPES), "dtype")
    n, c = data.draw(st.integers(1, 4), "n"), data.draw(st.integers(1, 5), "c")
    x = data.draw(arrays(dtype, (n, c), low=-8, high=8), "x")
    target = data.draw(arrays("int64", (n,), low=0, high=c - 1), "target")
    ignore = data.draw(st.sampled_from([-100, 0]), "ignore_index")
    if (target == ignore).all() and reduction == "mean":
        target[0] = c - 1 if c - 1 != ignore else target[0]
    use_w = data.draw(st.booleans(), "weighted")
    w = data.draw(arrays(dtype, (c,), low=0.5, high=2), "w") if use_w else None
    smoothing = data.draw(st.sampled_from([0.0, 0.1]), "label_smoothing")
    tt = torch.from_numpy(target)
    tw = None if w is None else t64(w)
    ref = TF.cross_entropy(t64(x), tt, weight=tw, ignore_index=ignore, reduction=reduction,
                           label_smoothing=smoothing).numpy()
    pw = None if w is None else to_pf(w, dtype)
    atol = {"float32": 1e-4, "float16": 2e-2, "bfloat16": 8e-2}[dtype]
    out = pf.cross_entropy(to_pf(x, dtype), to_pf(target, "int64"), pw, ignore, reduction,
                           smoothing)
    check(out, ref, dtype, rtol=atol, atol=atol)
    lp = torch.log_softmax(t64(x), 1)
    ref = TF.nll_loss(lp, tt, weight=tw, ignore_index=ignore, reduction=reduction).numpy()
    out = pf.nll_loss(to_pf(lp.numpy(), dtype), to_pf(target, "int64"), pw, ignore, reduction)
    check(out, ref, dtype, rtol=atol, atol=atol)
    bad = target.copy()
    bad[0] = c + data.draw(st.integers(0, 3))
    raises_clean((ValueError, IndexError), pf.cross_entropy, to_pf(x, dtype), to_pf(bad, "int64"))
    raises_clean(ValueError, pf.cross_entropy, to_pf(x, dtype), pf.zeros((n + 1,), dtype="int64"))


# ------------------------------------------------------------- conv / pool

@pytest.mark.parametrize("nd", [1, 2])
@given(data=st.data())
def test_conv(device, nd, data):
    dtype = data.draw(dtypes(FLOAT_DTYPES), "dtype")
    groups = data.draw(st.integers(1, 2), "groups")
    cin, cout = groups * data.draw(st.integers(1, 2)), groups * data.draw(st.integers(1, 2))
    k = tuple(data.draw(st.integers(1, 3)) for _ in range(nd))
    stride = tuple(data.draw(st.integers(1, 2)) for _ in range(nd))
    dil = tuple(data.draw(st.integers(1, 2)) for _ in range(nd))
    pad = tuple(data.draw(st.integers(0, 1)) for _ in range(nd))
    size = tuple(dil[i] * (k[i] - 1) + 1 - 2 * pad[i] + data.draw(st.integers(0, 3))
                 for i in range(nd))
    size = tuple(max(s, 1) for s in size)
    n = data.draw(st.integers(1, 2), "n")
    x = data.draw(arrays(dtype, (n, cin) + size, low=-2, high=2), "x")
    w = data.draw(arrays(dtype, (cout, cin // groups) + k, low=-2, high=2), "w")
    b = data.draw(arrays(dtype, (cout,), low=-2, high=2), "b")
    conv = TF.conv1d if nd == 1 else TF.conv2d
    ref = conv(t64(x), t64(w), t64(b), stride, pad, dil, groups).numpy()
    scale = conv(t64(np.abs(x)), t64(np.abs(w)), t64(np.abs(b)), stride, pad, dil, groups).numpy()
    op = pf.conv1d if nd == 1 else pf.conv2d
    out = op(to_pf(x, dtype), to_pf(w, dtype), to_pf(b, dtype), stride, pad, dil, groups)
    check(out, ref, dtype, atol=_acc_atol(dtype, scale))
    raises_clean(ValueError, op, to_pf(x, dtype), pf.zeros((cout, cin + 1) + k, dtype=dtype))


@pytest.mark.parametrize("kind", ["max", "avg"])
@given(data=st.data())
def test_pool2d(device, kind, data):
    dtype = data.draw(dtypes(FLOAT_DTYPES), "dtype")
    k = tuple(data.draw(st.integers(1, 3)) for _ in range(2))
    stride = tuple(data.draw(st.integers(1, 3)) for _ in range(2))
    pad = tuple(data.draw(st.integers(0, k[i] // 2)) for i in range(2))
    ceil = data.draw(st.booleans(), "ceil_mode")
    size = tuple(k[i] + data.draw(st.integers(0, 3)) for i in range(2))
    x = data.draw(arrays(dtype, (1, 2) + size, finite_max=8 if kind == "max" else None,
                         low=None if kind == "max" else -8, high=None if kind == "max" else 8),
                  "x")
    if device != "cpu":  # all -inf windows: test_max_pool_window_of_neg_inf
        x = np.where(x == -np.inf, -8.0, x)
    if kind == "max":
        ref = TF.max_pool2d(t64(x), k, stride, pad, 1, ceil).numpy()
        out = pf.max_pool2d(to_pf(x, dtype), k, stride, pad, 1, ceil)
    else:
        ref = TF.avg_pool2d(t64(x), k, stride, pad, ceil).numpy()
        out = pf.avg_pool2d(to_pf(x, dtype), k, stride, pad, ceil)
    check(out, ref, dtype)
    raises_clean(ValueError, pf.max_pool2d, to_pf(x, dtype), (0, 1))
    raises_clean(ValueError, pf.max_pool2d, to_pf(x, dtype), k, stride, (k[0] + 1, 0))


def test_max_pool_window_of_neg_inf(device):
    """A window holding only -inf pools to -inf (torch and the CPU backend)."""
    x = np.full((1, 1, 2, 4), -np.inf)
    x[0, 0, :, 2:] = np.arange(4).reshape(2, 2)
    ref = TF.max_pool2d(t64(x), 2).numpy()
    check(pf.max_pool2d(to_pf(x, "float32"), 2), ref, "float32")


# ------------------------------------------- pad, embedding, transposed conv, batch norm

@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate"])
@given(data=st.data())
def test_pad(device, mode, data):
    dtype = data.draw(dtypes(FLOAT_DTYPES), "dtype")
    shape = (1, 2) + tuple(data.draw(st.integers(2, 4)) for _ in range(2))
    x = data.draw(arrays(dtype, shape), "x")
    limit = 1 if mode == "reflect" else 3  # reflect needs pad < size
    pads = [data.draw(st.integers(0, limit)) for _ in range(4)]
    ref = TF.pad(t64(x), pads, mode=mode).numpy() if mode != "constant" else \
        TF.pad(t64(x), pads, mode=mode, value=1.5).numpy()
    out = pf.pad(to_pf(x, dtype), pads, mode, 1.5 if mode == "constant" else None)
    check(out, ref, dtype)
    raises_clean(ValueError, pf.pad, to_pf(x, dtype), [1, 2, 3])


@given(data=st.data())
def test_embedding(device, data):
    dtype = data.draw(dtypes(FLOAT_DTYPES), "dtype")
    n, d = data.draw(st.integers(1, 5), "n"), data.draw(st.integers(0, 3), "d")
    w = data.draw(arrays(dtype, (n, d)), "weight")
    idx = data.draw(arrays("int64", data.draw(shapes(max_dims=2), "ishape"), low=0, high=n - 1),
                    "idx")
    check(pf.embedding(to_pf(idx, "int64"), to_pf(w, dtype)), np.take(w, idx, axis=0), dtype)
    if d:  # embedding_dim 0: test_embedding_index_out_of_range_zero_dim
        raises_clean((IndexError, ValueError), pf.embedding, pf.tensor(np.array([n])),
                     to_pf(w, dtype))


def test_embedding_index_out_of_range_zero_dim(device):
    raises_clean((IndexError, ValueError), pf.embedding, pf.tensor(np.array([3])), pf.zeros((2, 0)))


@given(data=st.data())
def test_conv_transpose2d(device, data):
    dtype = data.draw(dtypes(FLOAT_DTYPES), "dtype")
    groups = data.draw(st.integers(1, 2), "groups")
    cin, cout = groups * data.draw(st.integers(1, 2)), groups * data.draw(st.integers(1, 2))
    k = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)))
    stride, dil = data.draw(st.integers(1, 2), "stride"), data.draw(st.integers(1, 2), "dil")
    pad = data.draw(st.integers(0, 1), "pad")
    out_pad = data.draw(st.integers(0, max(stride, dil) - 1), "output_padding")
    size = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)))
    x = data.draw(arrays(dtype, (1, cin) + size, low=-2, high=2), "x")
    w = data.draw(arrays(dtype, (cin, cout // groups) + k, low=-2, high=2), "w")
    try:
        ref = TF.conv_transpose2d(t64(x), t64(w), None, stride, pad, out_pad, groups, dil).numpy()
    except RuntimeError:  # torch refuses the output size: so must we
        raises_clean(ValueError, pf.conv_transpose2d, to_pf(x, dtype), to_pf(w, dtype), None,
                     stride, pad, out_pad, groups, dil)
        return
    scale = TF.conv_transpose2d(t64(np.abs(x)), t64(np.abs(w)), None, stride, pad, out_pad,
                                groups, dil).numpy()
    out = pf.conv_transpose2d(to_pf(x, dtype), to_pf(w, dtype), None, stride, pad, out_pad,
                              groups, dil)
    check(out, ref, dtype, atol=_acc_atol(dtype, scale))


@given(data=st.data())
def test_batch_norm(device, data):
    dtype = data.draw(dtypes(FLOAT_DTYPES), "dtype")
    n, c = data.draw(st.integers(2, 3), "n"), data.draw(st.integers(1, 3), "c")
    x = data.draw(arrays(dtype, (n, c, data.draw(st.integers(1, 3))), low=-4, high=4), "x")
    mean = data.draw(arrays(dtype, (c,), low=-1, high=1), "mean")
    var = data.draw(arrays(dtype, (c,), low=0.5, high=2), "var")
    training = data.draw(st.booleans(), "training")
    ref = TF.batch_norm(t64(x), t64(mean), t64(var), None, None, training, 0.1, 1e-5).numpy()
    out = pf.batch_norm(to_pf(x, dtype), to_pf(mean, dtype), to_pf(var, dtype), None, None,
                        training, 0.1, 1e-5)
    check(out, ref, dtype, atol={"float32": 1e-4, "float16": 1e-2, "bfloat16": 6e-2}[dtype])
