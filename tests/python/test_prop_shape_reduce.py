"""Property tests: reductions (axes, keepdims, zero-size), shape ops
(reshape, transpose/permute, squeeze/unsqueeze, broadcast_to, flatten,
concat/stack/split), slicing and indexing, gather/index_select, against
NumPy; invalid axes, shapes and indices must raise the project's
ValueError/IndexError with a clean message."""
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pyflame as pf
from prop_common import (FLOAT_DTYPES, INT_LIMITS, arrays, axis_of, check, dtypes, raises_clean,
                         shapes, still_usable, to_pf)

# --------------------------------------------------------------- reductions

_REDUCE = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}


def _reduce_dtype(op, dtype):
    if dtype in FLOAT_DTYPES or op in ("max", "min"):
        return dtype
    return "float32" if op == "mean" else "int64"


@st.composite
def _axes(draw, ndim):
    """None, one axis or a tuple of distinct axes (negative ones included)."""
    if ndim == 0:
        return None  # NumPy and PyFlame refuse any axis of a 0-d array
    kind = draw(st.sampled_from(["none", "int", "tuple"]))
    if kind == "none":
        return None
    if kind == "int":
        return draw(axis_of(ndim))
    picked = draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
    return tuple(a - ndim if draw(st.booleans()) else a for a in picked)


@pytest.mark.parametrize("op", sorted(_REDUCE))
@given(data=st.data())
def test_reductions(device, op, data):
    dtype = data.draw(dtypes(), "dtype")
    small = op == "prod"  # products stay inside float32 (order changes overflow otherwise)
    shape = data.draw(shapes(max_dims=3 if small else 4, max_side=3 if small else 4), "shape")
    x = data.draw(arrays(dtype, shape, finite_max=4 if small else 1e4), "x")
    axis = data.draw(_axes(len(shape)), "axis")
    keepdim = data.draw(st.booleans(), "keepdim")
    t = to_pf(x, dtype)
    out_dtype = _reduce_dtype(op, dtype)
    axes = tuple(range(x.ndim)) if axis is None else tuple(np.atleast_1d(axis))
    n = int(np.prod([x.shape[a] for a in axes])) if x.ndim else 1  # elements per output
    if op in ("max", "min") and n == 0:
        if np.zeros(x.shape).sum(axis=axis).size:
            raises_clean(ValueError, getattr(pf, op), t, axis, keepdim)  # NumPy raises too
        return  # an empty result: test_max_over_empty_axis_with_empty_result
    if out_dtype in INT_LIMITS or out_dtype == "bool":
        carrier = np.int64 if op in ("sum", "prod") else x.dtype
        want = _REDUCE[op](x.astype(carrier), axis=axis, keepdims=keepdim)
        atol = None
    else:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # NumPy: "Mean of empty slice"
            xf = np.asarray(x, dtype=np.float64)
            want = _REDUCE[op](xf, axis=axis, keepdims=keepdim)
            # Accumulation in float32: error up to n ulps of sum(|x|).
            scale = np.nan_to_num(np.sum(np.abs(xf), axis=axis, keepdims=keepdim), posinf=0)
            if op == "mean":
                scale = scale / max(n, 1)
            atol = 1e-3 + 1.2e-7 * max(n, 1) * float(np.max(scale, initial=0)) \
                if op in ("sum", "mean") else None
    out = getattr(pf, op)(t, axis, keepdim)
    check(out, want, out_dtype, atol=atol)
    if op in ("sum", "mean", "max", "min", "prod"):  # the method form
        check(getattr(t, op)(axis, keepdim), want, out_dtype, atol=atol)


@pytest.mark.parametrize("op", sorted(_REDUCE))
@given(data=st.data())
def test_reduction_bad_axes_raise(device, op, data):
    shape = data.draw(shapes(max_dims=3), "shape")
    nd = len(shape)
    bad = data.draw(st.one_of(st.integers(nd, nd + 3), st.integers(-nd - 3, -nd - 1),
                              st.just((0, 0) if nd else (1,)), st.just((0, -nd) if nd else (0, 5)),
                              st.integers(2**20, 2**31 - 1)), "axis")
    raises_clean((ValueError, IndexError), getattr(pf, op), pf.zeros(shape), bad)
    raises_clean((TypeError, ValueError), getattr(pf, op), pf.zeros(shape), "a")
    still_usable()


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_over_empty_axis_with_empty_result(device, op):
    raises_clean((ValueError, IndexError), getattr(pf, op), pf.zeros((0, 0)), 0)


@pytest.mark.parametrize("op", ["sum", "max"])
def test_reduction_axis_beyond_int32(device, op):
    raises_clean((ValueError, IndexError), getattr(pf, op), pf.zeros((2, 3)), 2**31)


# ---------------------------------------------------------------- shape ops

@given(data=st.data())
def test_reshape(device, data):
    dtype = data.draw(dtypes(), "dtype")
    shape = data.draw(shapes(), "shape")
    x = data.draw(arrays(dtype, shape, special=False), "x")
    size = x.size
    # A target shape of the same size: factor the size, maybe with one -1.
    target = data.draw(shapes(max_dims=4, max_side=6), "target")
    if int(np.prod(target)) != size:
        target = (size,) if size else (0, 3)
    target = list(target)
    if target and size and data.draw(st.booleans(), "minus_one"):
        target[data.draw(st.integers(0, len(target) - 1))] = -1
    t = to_pf(x, dtype)
    check(t.reshape(target), x.reshape(target), dtype)
    check(pf.reshape(t, *target), x.reshape(target), dtype)


@given(data=st.data())
def test_reshape_invalid(device, data):
    shape = data.draw(shapes(min_dims=1, min_side=1), "shape")
    size = int(np.prod(shape))
    bad = data.draw(st.one_of(
        st.just([size + 1]), st.just([-1, -1]), st.just([size, -2]),
        st.just([0, -1]) if size else st.just([5, 5])), "target")
    # Targets whose size overflows int64: the isolated cases of test_prop_creation.py.
    raises_clean(ValueError, pf.reshape, pf.zeros(shape), bad)
    still_usable()


@given(data=st.data())
def test_transpose_permute(device, data):
    dtype = data.draw(dtypes(), "dtype")
    shape = data.draw(shapes(), "shape")
    x = data.draw(arrays(dtype, shape, special=False), "x")
    perm = data.draw(st.permutations(range(len(shape))), "perm")
    perm = [p - len(shape) if data.draw(st.booleans()) else p for p in perm]
    t = to_pf(x, dtype)
    check(t.transpose(perm), np.transpose(x, perm), dtype)
    check(t.permute(*perm) if perm else t.permute(), np.transpose(x, perm), dtype)
    check(pf.transpose(t), np.transpose(x), dtype)
    if len(shape) >= 2:
        a, b = data.draw(axis_of(len(shape))), data.draw(axis_of(len(shape)))
        check(t.swapaxes(a, b), np.swapaxes(x, a, b), dtype)


@given(data=st.data())
def test_transpose_invalid(device, data):
    shape = data.draw(shapes(min_dims=1, max_dims=3), "shape")
    nd = len(shape)
    bad = data.draw(st.one_of(st.just(list(range(nd + 1))), st.just([0] * (nd + 1)),
                              st.just([0] * nd) if nd > 1 else st.just([5]),
                              st.just(list(range(nd - 1)) + [nd + 7])), "perm")
    raises_clean(ValueError, pf.transpose, pf.zeros(shape), bad)
    still_usable()


@given(data=st.data())
def test_squeeze_unsqueeze(device, data):
    dtype = data.draw(dtypes(), "dtype")
    shape = data.draw(shapes(max_side=2), "shape")
    x = data.draw(arrays(dtype, shape, special=False), "x")
    t = to_pf(x, dtype)
    check(pf.squeeze(t), np.squeeze(x), dtype)
    ones = [i for i, d in enumerate(shape) if d == 1]
    if ones:
        axes = data.draw(st.lists(st.sampled_from(ones), min_size=1, unique=True), "axes")
        check(pf.squeeze(t, tuple(axes)), np.squeeze(x, tuple(axes)), dtype)
        check(t.squeeze(axes[0] - len(shape)), np.squeeze(x, axes[0] - len(shape)), dtype)
    not_one = [i for i, d in enumerate(shape) if d != 1]
    if not_one:  # NumPy raises for an axis whose size is not 1
        raises_clean(ValueError, pf.squeeze, t, not_one[0])
    ax = data.draw(st.integers(-len(shape) - 1, len(shape)), "unsqueeze_axis")
    check(pf.unsqueeze(t, ax), np.expand_dims(x, ax), dtype)
    raises_clean((ValueError, IndexError), pf.unsqueeze, t, len(shape) + 1 +
                 data.draw(st.integers(0, 3)))


def test_squeeze_repeated_axis_raises(device):
    raises_clean(ValueError, pf.squeeze, pf.zeros((1, 2)), (0, 0))


@given(data=st.data())
def test_broadcast_to_and_expand(device, data):
    dtype = data.draw(dtypes(), "dtype")
    shape = data.draw(shapes(max_dims=3, max_side=3), "shape")
    x = data.draw(arrays(dtype, shape, special=False), "x")
    extra = data.draw(shapes(max_dims=2, max_side=3), "lead")
    target = tuple(extra) + tuple(data.draw(st.sampled_from([d, 3]), f"d{i}") if d == 1 else d
                                  for i, d in enumerate(shape))
    t = to_pf(x, dtype)
    check(pf.broadcast_to(t, target), np.broadcast_to(x, target), dtype)
    check(t.broadcast_to(*target) if target else t.broadcast_to(()),
          np.broadcast_to(x, target), dtype)
    bad = [d + 1 if d != 1 else d for d in shape]
    if any(d != 1 for d in shape):
        raises_clean(ValueError, pf.broadcast_to, t, bad)
    if shape:
        raises_clean(ValueError, pf.broadcast_to, t, shape[1:])


@given(data=st.data())
def test_flatten(device, data):
    dtype = data.draw(dtypes(), "dtype")
    shape = data.draw(shapes(min_dims=1), "shape")
    x = data.draw(arrays(dtype, shape, special=False), "x")
    nd = len(shape)
    s = data.draw(st.integers(0, nd - 1), "start")
    e = data.draw(st.integers(s, nd - 1), "end")
    want = x.reshape(shape[:s] + (int(np.prod(shape[s:e + 1])),) + shape[e + 1:])
    check(pf.flatten(to_pf(x, dtype), s, e - nd), want, dtype)


@given(data=st.data())
def test_concat_stack_split(device, data):
    dtype = data.draw(dtypes(), "dtype")
    shape = data.draw(shapes(min_dims=1, max_dims=3), "shape")
    nd = len(shape)
    axis = data.draw(axis_of(nd), "axis")
    n = data.draw(st.integers(1, 3), "n")
    parts = []
    for i in range(n):
        s = list(shape)
        s[axis] = data.draw(st.integers(0, 3), f"len{i}")
        parts.append(data.draw(arrays(dtype, tuple(s)), f"x{i}"))
    ts = [to_pf(p, dtype) for p in parts]
    check(pf.concat(ts, axis), np.concatenate(parts, axis), dtype)
    same = [data.draw(arrays(dtype, shape), f"y{i}") for i in range(n)]
    sax = data.draw(st.integers(-nd - 1, nd), "stack_axis")
    check(pf.stack([to_pf(p, dtype) for p in same], sax), np.stack(same, sax), dtype)
    whole = np.concatenate(parts, axis)
    sizes = [p.shape[axis] for p in parts]
    outs = pf.split(to_pf(whole, dtype), sizes, axis)
    assert len(outs) == n
    for o, p in zip(outs, parts):
        check(o, p, dtype)


@given(data=st.data())
def test_concat_stack_invalid(device, data):
    shape = data.draw(shapes(min_dims=1, max_dims=3, min_side=1), "shape")
    nd = len(shape)
    a = pf.zeros(shape)
    other = list(shape)
    other[0] += 1
    if nd > 1:
        raises_clean(ValueError, pf.concat, [a, pf.zeros(other)], 1)
    raises_clean(ValueError, pf.stack, [a, pf.zeros(other)], 0)
    raises_clean(ValueError, pf.concat, [a, pf.zeros(shape + (1,))], 0)
    raises_clean((ValueError, IndexError), pf.concat, [a, a], nd + data.draw(st.integers(0, 3)))
    raises_clean((ValueError, IndexError), pf.stack, [a, a], nd + 1 + data.draw(st.integers(0, 3)))
    raises_clean(ValueError, pf.concat, [])
    raises_clean(ValueError, pf.stack, [])
    raises_clean(ValueError, pf.concat, [pf.zeros(()), pf.zeros(())])
    still_usable()


# ------------------------------------------------------------------ indexing

@st.composite
def _basic_index(draw, shape):
    """A NumPy basic index: ints (negative too), slices with any step, None
    and at most one Ellipsis."""
    items, dims = [], list(shape)
    used_ellipsis = False
    i = 0
    while i < len(dims) and draw(st.booleans()):
        kind = draw(st.sampled_from(["int", "slice", "none", "ellipsis"]))
        d = dims[i]
        if kind == "int" and d > 0:
            items.append(draw(st.integers(-d, d - 1)))
            i += 1
        elif kind == "none":
            items.append(None)
        elif kind == "ellipsis" and not used_ellipsis:
            items.append(Ellipsis)
            used_ellipsis = True
            i = len(dims) - draw(st.integers(0, len(dims) - i))
        else:
            bound = st.one_of(st.none(), st.integers(-d - 3, d + 3))
            step = draw(st.one_of(st.none(), st.integers(-3, 3).filter(lambda s: s != 0)))
            items.append(slice(draw(bound), draw(bound), step))
            i += 1
    return tuple(items) if draw(st.booleans()) or len(items) != 1 else items[0]


@given(data=st.data())
def test_getitem(device, data):
    dtype = data.draw(dtypes(), "dtype")
    shape = data.draw(shapes(max_dims=4), "shape")
    x = data.draw(arrays(dtype, shape), "x")
    key = data.draw(_basic_index(shape), "key")
    check(to_pf(x, dtype)[key], x[key], dtype)


@given(data=st.data())
def test_getitem_out_of_range(device, data):
    shape = data.draw(shapes(min_dims=1, max_dims=3), "shape")
    t = pf.zeros(shape)
    nd = len(shape)
    ax = data.draw(st.integers(0, nd - 1), "axis")
    big = data.draw(st.one_of(st.integers(shape[ax], shape[ax] + 5),
                              st.integers(-shape[ax] - 5, -shape[ax] - 1),
                              st.integers(2**31, 2**62)), "index")
    key = (slice(None),) * ax + (big,)
    raises_clean(IndexError, lambda: t[key])
    raises_clean(IndexError, lambda: t[(0,) * (nd + 1)] if 0 not in shape else t[(5,) * (nd + 1)])
    raises_clean(IndexError, lambda: t[..., ...])
    raises_clean((IndexError, TypeError), lambda: t[1.5])
    raises_clean((IndexError, TypeError), lambda: t["a"])
    with pytest.raises(ValueError, match="step cannot be zero"):  # Python's own message
        t[::0]
    still_usable()


def test_getitem_index_beyond_int64(device):
    raises_clean(IndexError, lambda: pf.ones(3)[2**63])


def test_getitem_bool_scalar(device):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    check(pf.tensor(x)[True], x[True], "float32")


@given(data=st.data())
def test_gather_index_select(device, data):
    dtype = data.draw(dtypes(), "dtype")
    shape = data.draw(shapes(min_dims=1, max_dims=3, min_side=1), "shape")
    nd = len(shape)
    x = data.draw(arrays(dtype, shape), "x")
    axis = data.draw(axis_of(nd), "axis")
    d = shape[axis]
    idx_dtype = data.draw(st.sampled_from(["int32", "int64"]), "idx_dtype")
    ishape = list(shape)
    ishape[axis] = data.draw(st.integers(0, 4), "n_index")
    # Indices in [0, d): torch's gather and index_select refuse negative ones.
    idx = data.draw(arrays(idx_dtype, tuple(ishape), low=0, high=d - 1), "index")
    t = to_pf(x, dtype)
    want = np.take_along_axis(x, idx.astype(np.int64), axis)
    check(pf.gather(t, axis, to_pf(idx, idx_dtype)), want, dtype)
    sel = data.draw(arrays(idx_dtype, (data.draw(st.integers(0, 4)),), low=0, high=d - 1), "sel")
    check(pf.index_select(t, axis, to_pf(sel, idx_dtype)), np.take(x, sel, axis), dtype)
    bad = idx.copy()
    if bad.size:
        bad.flat[0] = data.draw(st.sampled_from([d, -1, -d - 1, d + 100]), "bad")
        raises_clean((IndexError, ValueError), pf.gather, t, axis, to_pf(bad, idx_dtype))
    raises_clean((IndexError, ValueError), pf.index_select, t, axis,
                 to_pf(np.array([d], dtype=np.int64), "int64"))
    raises_clean((ValueError, TypeError), pf.gather, t, axis, to_pf(idx.astype(np.float32),
                                                                    "float32"))
    still_usable()
