"""Index and shape ops (concat, stack, split, gather, index_select, embedding,
pad, dropout, batch_matmul) against NumPy and PyTorch's CPU implementation."""
import numpy as np
import pytest

import pyflame as pf
from conftest import (EVERY_DTYPE, FLOAT_DTYPES, assert_close, make_tensor, random_array,
                      rounded)

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _raises(exc, fn, call, *args, **kwargs):
    """Checks that call(*args) raises exc with a message starting '[fn]'."""
    with pytest.raises(exc) as info:
        out = call(*args, **kwargs)
        if isinstance(out, pf.Tensor):
            out.numpy()
    msg = str(info.value).strip("'\"")
    assert msg.startswith(f"[{fn}]"), msg
    return msg


def _still_usable(device):
    x = pf.tensor(np.arange(4, dtype=np.float32), device=device)
    assert_close(x + 1, np.arange(4) + 1.0, "float32")


def _views(x):
    """(pf tensor, numpy array) pairs of non-contiguous views of x (3-d)."""
    t = make_tensor(x, "float32")
    return [(t, x), (t.transpose(2, 0, 1), x.transpose(2, 0, 1)), (t[::-1, :, ::2], x[::-1, :, ::2])]


# ---------------------------------------------------------------- concat / stack

@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3])
def test_concat_every_axis(device, axis):
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    for s, n in zip(shapes, (1, 3, 2)):
        s[axis] = n
    xs = [random_array(s, "float32") for s in shapes]
    want = np.concatenate(xs, axis=axis)
    out = pf.concat([make_tensor(x, "float32") for x in xs], axis=axis)
    assert_close(out, want, "float32", device=device)
    assert_close(pf.cat([make_tensor(x, "float32") for x in xs], axis), want, "float32")


def test_concat_non_contiguous(device):
    x = random_array((4, 5, 6), "float32")
    y = random_array((6, 4, 5), "float32")
    tx, ty = make_tensor(x, "float32"), make_tensor(y, "float32")
    # (4,5,6)[::-1] and (6,4,5).transpose -> (4,5,6), (4,5,3) slices
    parts = [tx[::-1], ty.transpose(1, 2, 0), tx[:, :, ::2]]
    want = np.concatenate([x[::-1], y.transpose(1, 2, 0), x[:, :, ::2]], axis=2)
    assert_close(pf.concat(parts, axis=2), want, "float32")
    want0 = np.concatenate([x[:, 1:], x[:, ::-1][:, :2]], axis=1)
    assert_close(pf.concat([tx[:, 1:], tx[:, ::-1][:, :2]], 1), want0, "float32")


@pytest.mark.parametrize("dtype", EVERY_DTYPE)
def test_concat_dtypes(device, dtype):
    a, b = random_array((3, 2), dtype), random_array((3, 5), dtype)
    assert_close(pf.concat([make_tensor(a, dtype), make_tensor(b, dtype)], 1),
                 np.concatenate([a, b], 1), dtype)


def test_concat_promotes_and_edge_cases(device):
    a = random_array((2, 3), "int32")
    b = random_array((1, 3), "float32")
    out = pf.concat([make_tensor(a), make_tensor(b, "float32")])
    assert_close(out, np.concatenate([a, b]).astype(np.float64), "float32")
    h = random_array((2, 2), "float16")
    bf = random_array((2, 2), "bfloat16")
    assert_close(pf.concat([make_tensor(h, "float16"), make_tensor(bf, "bfloat16")]),
                 np.concatenate([h, bf]), "float32")
    # A single tensor, empty pieces and mixed list items (NumPy arrays) are fine.
    x = random_array((2, 3), "float32")
    assert_close(pf.concat([make_tensor(x)]), x, "float32")
    e = pf.zeros((0, 3))
    assert_close(pf.concat([e, make_tensor(x), e]), x, "float32")
    assert_close(pf.concat([pf.zeros((2, 0)), pf.zeros((2, 0))], 1), np.zeros((2, 0)), "float32")
    assert_close(pf.concat([make_tensor(x), x.astype(np.float32)], 0), np.concatenate([x, x]), "float32")
    assert torch.equal(torch.cat([torch.tensor(x), torch.tensor(x)], 1),
                       torch.tensor(pf.cat([make_tensor(x), make_tensor(x)], 1).numpy(), dtype=torch.float64))


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -4])
def test_stack(device, axis):
    xs = [random_array((2, 3, 4), "float32") for _ in range(3)]
    ts = [make_tensor(x, "float32") for x in xs]
    assert_close(pf.stack(ts, axis), np.stack(xs, axis), "float32", device=device)
    assert_close(pf.stack([ts[0].transpose(1, 0, 2), ts[1][:, ::-1].transpose(1, 0, 2)], axis),
                 np.stack([xs[0].transpose(1, 0, 2), xs[1][:, ::-1].transpose(1, 0, 2)], axis), "float32")


def test_concat_stack_errors(device):
    a, b = pf.zeros((2, 3)), pf.zeros((2, 4))
    _raises(ValueError, "concat", pf.concat, [])
    _raises(ValueError, "concat", pf.concat, [a, b], 0)
    _raises(ValueError, "concat", pf.concat, [a, pf.zeros((2, 3, 1))], 0)
    _raises(ValueError, "concat", pf.concat, [a, a], 2)
    _raises(ValueError, "concat", pf.concat, [pf.tensor(1.0), pf.tensor(2.0)])
    _raises(ValueError, "concat", pf.concat, a)
    _raises(ValueError, "cat", pf.cat, 3)
    _raises(ValueError, "stack", pf.stack, [a, b])
    _raises(ValueError, "stack", pf.stack, [])
    _raises(ValueError, "stack", pf.stack, [a, a], 3)
    _still_usable(device)


# ---------------------------------------------------------------- split

@pytest.mark.parametrize("arg", [1, 2, 3, 5, 9, [5], [1, 4], [2, 0, 3], [0, 5, 0]], ids=str)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_split(device, arg, axis):
    shape = [5, 5, 5]
    x = random_array(shape, "float32")
    for t, xv in [(make_tensor(x, "float32"), x), (make_tensor(x, "float32").transpose(2, 0, 1),
                                                   x.transpose(2, 0, 1))]:
        pieces = pf.split(t, arg, axis)
        want = torch.split(torch.tensor(xv), arg, axis)
        assert isinstance(pieces, list) and len(pieces) == len(want)
        for p, w in zip(pieces, want):
            assert_close(p, w.numpy(), "float32", device=device)


def test_split_empty_axis_and_dtypes(device):
    e = pf.zeros((0, 3))
    out = pf.split(e, 2)
    assert len(out) == 1 and tuple(out[0].shape) == (0, 3)
    assert len(pf.split(e, 0)) == 1
    x = random_array((6, 2), "int64")
    assert [p.numpy().tolist() for p in pf.split(make_tensor(x), [2, 4])] == \
        [x[:2].tolist(), x[2:].tolist()]


def test_split_errors(device):
    x = pf.zeros((4, 3))
    _raises(ValueError, "split", pf.split, x, 0)
    _raises(ValueError, "split", pf.split, x, -1)
    _raises(ValueError, "split", pf.split, x, [1, 2])
    _raises(ValueError, "split", pf.split, x, [5, -1])
    _raises(ValueError, "split", pf.split, x, [])
    _raises(ValueError, "split", pf.split, x, 2, 2)
    _raises(ValueError, "split", pf.split, pf.tensor(1.0), 1)
    _raises(ValueError, "split", pf.split, x, [1.5, 2.5])


# ---------------------------------------------------------------- gather

@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("idx_dtype", ["int64", "int32"])
def test_gather_every_axis(device, axis, idx_dtype):
    x = random_array((4, 5, 6), "float32")
    ishape = [3, 4, 5]
    ishape[axis] = 7  # may exceed x's size along the gathered axis
    index = np.random.randint(0, x.shape[axis], size=ishape)
    want = torch.gather(torch.tensor(x), axis, torch.tensor(index)).numpy()
    out = pf.gather(make_tensor(x, "float32"), axis, make_tensor(index, idx_dtype))
    assert_close(out, want, "float32", device=device)


def test_gather_non_contiguous(device):
    x = random_array((6, 5, 4), "float32")
    for t, xv in _views(x):
        for axis in range(3):
            ishape = list(xv.shape)
            ishape[axis] = 3
            index = np.random.randint(0, xv.shape[axis], size=[ishape[2], ishape[1], ishape[0]])
            ti = make_tensor(index).transpose(2, 1, 0)  # non-contiguous index too
            want = torch.gather(torch.tensor(np.ascontiguousarray(xv)), axis,
                                torch.tensor(np.ascontiguousarray(index.transpose(2, 1, 0)))).numpy()
            assert_close(pf.gather(t, axis, ti), want, "float32")


@pytest.mark.parametrize("dtype", EVERY_DTYPE)
def test_gather_dtypes(device, dtype):
    x = random_array((5, 4), dtype)
    index = np.random.randint(0, 5, size=(3, 4))
    want = np.take_along_axis(x, index, 0)
    assert_close(pf.gather(make_tensor(x, dtype), 0, make_tensor(index)), want, dtype)


def test_gather_edge_shapes(device):
    x = random_array((3, 4), "float32")
    assert_close(pf.gather(make_tensor(x), 1, pf.zeros((3, 0), dtype="int64")), np.zeros((3, 0)), "float32")
    s = pf.gather(pf.tensor(np.float32(2.5)), 0, pf.tensor(np.int64(0)))
    assert_close(s, np.float64(2.5), "float32")
    # list index goes to x's device
    assert_close(pf.gather(make_tensor(x), 0, [[2, 0, 1, 1]]), x[[2, 0, 1, 1], [0, 1, 2, 3]][None],
                 "float32")


def test_gather_errors(device):
    x = make_tensor(random_array((3, 4), "float32"))
    for bad in (3, 7, -1):
        idx = np.zeros((2, 4), np.int64)
        idx[1, 2] = bad
        msg = _raises(IndexError, "gather", pf.gather, x, 0, make_tensor(idx))
        assert str(bad) in msg
        _still_usable(device)
    idx32 = np.zeros((3, 2), np.int32)
    idx32[0, 1] = 4
    _raises(IndexError, "gather", pf.gather, x, 1, make_tensor(idx32))
    _raises(ValueError, "gather", pf.gather, x, 0, pf.zeros((2,), dtype="int64"))
    _raises(ValueError, "gather", pf.gather, x, 0, pf.zeros((2, 5), dtype="int64"))
    _raises(ValueError, "gather", pf.gather, x, 0, pf.zeros((2, 4)))
    _raises(ValueError, "gather", pf.gather, x, 2, pf.zeros((2, 4), dtype="int64"))
    _still_usable(device)


# ---------------------------------------------------------------- index_select

@pytest.mark.parametrize("axis", [0, 1, 2, -2])
def test_index_select(device, axis):
    x = random_array((4, 5, 6), "float32")
    index = np.random.randint(0, x.shape[axis], size=9)  # repeats
    want = torch.index_select(torch.tensor(x), axis, torch.tensor(index)).numpy()
    assert_close(pf.index_select(make_tensor(x, "float32"), axis, make_tensor(index)), want, "float32",
                 device=device)
    assert_close(pf.index_select(make_tensor(x, "float32"), axis, make_tensor(index, "int32")), want,
                 "float32")
    for t, xv in _views(x):
        idx = np.random.randint(0, xv.shape[axis], size=4)
        ti = make_tensor(np.stack([idx, idx], 1))[:, 1]  # a strided view
        assert_close(pf.index_select(t, axis, ti), np.take(xv, idx, axis), "float32")


@pytest.mark.parametrize("dtype", EVERY_DTYPE)
def test_index_select_dtypes_and_shapes(device, dtype):
    x = random_array((4, 3), dtype)
    assert_close(pf.index_select(make_tensor(x, dtype), 0, [3, 0]), x[[3, 0]], dtype)
    assert_close(pf.index_select(make_tensor(x, dtype), 1, pf.tensor(np.int64(2))), x[:, [2]], dtype)
    assert_close(pf.index_select(make_tensor(x, dtype), 1, pf.zeros((0,), dtype="int64")),
                 x[:, :0], dtype)


def test_index_select_errors(device):
    x = make_tensor(random_array((3, 4), "float32"))
    msg = _raises(IndexError, "index_select", pf.index_select, x, 1, [0, 4])
    assert "4" in msg
    _raises(IndexError, "index_select", pf.index_select, x, 0, [-1])
    _still_usable(device)
    _raises(ValueError, "index_select", pf.index_select, x, 0, pf.zeros((1, 1), dtype="int64"))
    _raises(ValueError, "index_select", pf.index_select, x, 0, [0.5])
    _raises(ValueError, "index_select", pf.index_select, x, 3, [0])
    _raises(IndexError, "index_select", pf.index_select, pf.zeros((0, 2)), 0, [0])


# ---------------------------------------------------------------- embedding

@pytest.mark.parametrize("ishape", [(), (7,), (3, 4), (2, 3, 2)], ids=str)
@pytest.mark.parametrize("padding_idx", [None, 0, 3, -1])
def test_embedding(device, ishape, padding_idx):
    V, D = 10, 6
    w = random_array((V, D), "float32")
    if padding_idx is not None:
        w[padding_idx] = 0.0  # as nn.Embedding initializes it
    idx = np.random.randint(0, V, size=ishape)
    want = F.embedding(torch.tensor(idx), torch.tensor(w), padding_idx=padding_idx).numpy()
    out = pf.embedding(make_tensor(idx), make_tensor(w, "float32"), padding_idx=padding_idx)
    assert_close(out, want, "float32", device=device)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32"])
def test_embedding_dtypes_and_layouts(device, dtype):
    wt = random_array((5, 8), dtype)  # stored as (D, V): a transposed weight
    idx = np.random.randint(0, 8, size=(4, 3))
    out = pf.embedding(make_tensor(idx, "int32"), make_tensor(wt, dtype).T)
    assert_close(out, wt.T[idx], dtype)
    idx_t = make_tensor(idx).T  # non-contiguous indices
    assert_close(pf.embedding(idx_t, make_tensor(wt, dtype).T), wt.T[idx.T], dtype)


def test_embedding_errors(device):
    w = make_tensor(random_array((4, 3), "float32"))
    msg = _raises(IndexError, "embedding", pf.embedding, make_tensor(np.array([0, 4])), w)
    assert "4" in msg
    _raises(IndexError, "embedding", pf.embedding, make_tensor(np.array([[1], [-1]], np.int32)), w)
    _still_usable(device)
    _raises(ValueError, "embedding", pf.embedding, pf.zeros((2,)), w)
    _raises(ValueError, "embedding", pf.embedding, [0], pf.zeros((4,)))
    _raises(ValueError, "embedding", pf.embedding, [0], w, 4)
    _raises(ValueError, "embedding", pf.embedding, [0], w, -5)


# ---------------------------------------------------------------- pad

CONSTANT_CASES = [
    ((2, 3, 4), (1, 2)),
    ((2, 3, 4), (0, 0, 2, 1)),
    ((2, 3, 4), (1, 1, 1, 1, 1, 1)),
    ((2, 3, 4), (-1, 2)),          # negative pads crop
    ((2, 3, 4), (-2, -1, 1, -1)),
    ((2, 3, 4), (0, -4)),          # to an empty axis
    ((5,), (3, 0)),
    ((2, 1, 2, 1, 2, 1, 2, 1, 3), (1, 1)),  # 9 axes: leading ones merge
]


@pytest.mark.parametrize("case", CONSTANT_CASES, ids=str)
@pytest.mark.parametrize("value", [0.0, -2.5])
def test_pad_constant(device, case, value):
    shape, pads = case
    x = random_array(shape, "float32")
    want = F.pad(torch.tensor(x), pads, mode="constant", value=value).numpy()
    assert_close(pf.pad(make_tensor(x, "float32"), pads, value=value), want, "float32", device=device)


@pytest.mark.parametrize("dtype", EVERY_DTYPE)
def test_pad_constant_dtypes(device, dtype):
    x = random_array((3, 4), dtype)
    value = 1 if dtype != "float16" else 0.5
    want = np.pad(x, ((2, 0), (1, 3)), constant_values=value)
    assert_close(pf.pad(make_tensor(x, dtype), (1, 3, 2, 0), value=value), want, dtype)


def test_pad_non_contiguous(device):
    x = random_array((4, 5, 6), "float32")
    for t, xv in _views(x):
        for mode in ("constant", "reflect", "replicate", "circular"):
            pads = (2, 1, 1, 3)
            want = F.pad(torch.tensor(np.ascontiguousarray(xv))[None], pads, mode=mode)[0].numpy()
            assert_close(pf.pad(t, pads, mode=mode), want, "float32")


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("case", [((2, 3, 5), (2, 4)), ((2, 3, 5), (0, 3)), ((2, 4, 4, 5), (1, 2, 3, 0)),
                                  ((1, 2, 3, 4, 5), (1, 1, 2, 1, 0, 2)), ((2, 3, 5), (-1, 2))], ids=str)
def test_pad_modes(device, mode, case):
    shape, pads = case
    x = random_array(shape, "float32")
    if mode == "circular" and min(pads) < 0:  # torch 1.13 rejects these: wrap, then crop
        lo, hi = pads
        want = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(max(lo, 0), max(hi, 0))], mode="wrap")
        want = want[..., -min(lo, 0):want.shape[-1] + min(hi, 0)]
    else:
        want = F.pad(torch.tensor(x), pads, mode=mode).numpy()
    assert_close(pf.pad(make_tensor(x, "float32"), pads, mode=mode), want, "float32", device=device)


def test_pad_modes_dtypes(device):
    x = random_array((2, 3, 4), "int32")
    want = np.pad(x, ((0, 0), (0, 0), (3, 2)), mode="reflect")
    assert_close(pf.pad(make_tensor(x), (3, 2), mode="reflect"), want, "int32")
    want = np.pad(x, ((0, 0), (2, 2), (1, 0)), mode="edge")
    assert_close(pf.pad(make_tensor(x), (1, 0, 2, 2), mode="replicate"), want, "int32")
    xb = random_array((3, 4), "bfloat16")
    assert_close(pf.pad(make_tensor(xb, "bfloat16"), (4, 4), mode="circular"),
                 np.pad(xb, ((0, 0), (4, 4)), mode="wrap"), "bfloat16")


def test_pad_errors(device):
    x = pf.zeros((2, 3))
    _raises(ValueError, "pad", pf.pad, x, (1,))
    _raises(ValueError, "pad", pf.pad, x, (1, 1, 1, 1, 1, 1))
    _raises(ValueError, "pad", pf.pad, x, (-2, -2))
    _raises(ValueError, "pad", pf.pad, x, (3, 0), mode="reflect")
    _raises(ValueError, "pad", pf.pad, x, (0, 4), mode="circular")
    _raises(ValueError, "pad", pf.pad, pf.zeros((2, 0)), (1, 0), mode="replicate")
    _raises(ValueError, "pad", pf.pad, x, (1, 1), mode="mirror")
    _raises(ValueError, "pad", pf.pad, x, (1, 1), mode="reflect", value=1.0)
    _raises(ValueError, "pad", pf.pad, x, (1.5, 1))
    _raises(ValueError, "pad", pf.pad, pf.zeros((2,), dtype="int32"), (1, 1), value=float("nan"))
    assert_close(pf.pad(x, ()), np.zeros((2, 3)), "float32")
    assert_close(pf.pad(x, (0, 0)), np.zeros((2, 3)), "float32")


# ---------------------------------------------------------------- dropout

@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_statistics(device, p):
    n = 200_000
    x = pf.ones((n,))
    out = pf.dropout(x, p).numpy()
    zero = out == 0
    frac = zero.mean()
    assert abs(frac - p) < 5 * np.sqrt(p * (1 - p) / n)
    np.testing.assert_allclose(out[~zero], 1.0 / (1.0 - p), rtol=1e-6)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_dropout_mask_from_seed(device, dtype):
    """Element i is kept iff pf.rand(shape)[i] >= p for the same seed state."""
    p = 0.3
    x = random_array((7, 33), dtype)
    for t, xv in ((make_tensor(x, dtype), x), (make_tensor(x, dtype).T, x.T)):
        pf.manual_seed(1234)
        out = pf.dropout(t, p)
        pf.manual_seed(1234)
        u = pf.rand(*xv.shape).numpy().astype(np.float64)
        want = np.where(u >= p, rounded(xv, dtype) * (1.0 / (1.0 - p)), 0.0)
        assert_close(out, want, dtype, device=device)
    # The same seed gives the same mask; another seed a different one.
    pf.manual_seed(7)
    a = pf.dropout(pf.ones((1000,)), 0.5).numpy()
    pf.manual_seed(7)
    b = pf.dropout(pf.ones((1000,)), 0.5).numpy()
    c = pf.dropout(pf.ones((1000,)), 0.5).numpy()
    np.testing.assert_array_equal(a, b)
    assert (a != c).any()


def test_dropout_identity_cases_and_errors(device):
    x = random_array((4, 5), "float32")
    t = make_tensor(x)
    assert_close(pf.dropout(t, 0.0), x, "float32")
    assert_close(pf.dropout(t, 0.9, training=False), x, "float32")
    nan = pf.dropout(pf.full((1000,), float("nan")), 0.5).numpy()
    assert np.isnan(nan).all()  # NaN * 0 stays NaN, as in PyTorch
    for p in (1.0, -0.1, 1.5, float("nan")):
        _raises(ValueError, "dropout", pf.dropout, t, p)
    _raises(ValueError, "dropout", pf.dropout, pf.zeros((3,), dtype="int32"), 0.5)


def test_dropout_same_mask_cpu_and_gpu(gpu_device):
    x = random_array((5, 301), "float32")
    pf.manual_seed(99)
    a = pf.dropout(make_tensor(x, device="cpu"), 0.4).numpy()
    pf.manual_seed(99)
    b = pf.dropout(make_tensor(x, device=gpu_device), 0.4).numpy()
    np.testing.assert_array_equal(a == 0, b == 0)
    np.testing.assert_allclose(a, b, rtol=1e-6)


# ---------------------------------------------------------------- batch_matmul

@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_batch_matmul(device, dtype):
    a = random_array((3, 4, 5), dtype, -1, 1)
    b = random_array((3, 5, 6), dtype, -1, 1)
    want = np.matmul(a, b)
    tol = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 2e-2}[dtype]
    assert_close(pf.batch_matmul(make_tensor(a, dtype), make_tensor(b, dtype)), want, dtype,
                 rtol=tol, atol=tol, device=device)
    ta = make_tensor(a.transpose(0, 2, 1).copy(), dtype).transpose(0, 2, 1)
    assert_close(pf.batch_matmul(ta, make_tensor(b, dtype)), want, dtype, rtol=tol, atol=tol)


def test_batch_matmul_errors(device):
    _raises(ValueError, "batch_matmul", pf.batch_matmul, pf.zeros((4, 5)), pf.zeros((5, 6)))
    _raises(ValueError, "batch_matmul", pf.batch_matmul, pf.zeros((2, 4, 5)), pf.zeros((3, 5, 6)))
    _raises(ValueError, "batch_matmul", pf.batch_matmul, pf.zeros((2, 4, 5)), pf.zeros((2, 4, 6)))
    _raises(ValueError, "batch_matmul", pf.batch_matmul, pf.zeros((2, 4, 5)), pf.zeros((1, 2, 5, 6)))
