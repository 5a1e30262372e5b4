"""Shape ops, indexing, dtype conversion and host transfer."""
import numpy as np
import pytest

import pyflame as pf
from conftest import EVERY_DTYPE, INT_DTYPES, NUMPY_OF, assert_close, bf16_round, make_tensor, random_array


@pytest.fixture
def x():
    return random_array((3, 4, 5), "float32")


# -------------------------------------------------------------- transpose

def test_transpose_forms(device, x):
    t = make_tensor(x, "float32")
    assert_close(t.T, x.T, "float32", device=device)
    assert_close(pf.transpose(t), x.T, "float32")
    assert_close(pf.transpose(t, (1, 0, 2)), x.transpose(1, 0, 2), "float32")
    assert_close(t.transpose(2, 0, 1), x.transpose(2, 0, 1), "float32")
    assert_close(t.permute(1, 2, 0), x.transpose(1, 2, 0), "float32")
    assert_close(t.permute((0, -1, 1)), x.transpose(0, 2, 1), "float32")
    assert_close(pf.swapaxes(t, 0, 2), np.swapaxes(x, 0, 2), "float32")
    assert_close(t.T.T, x, "float32")
    v = random_array((6,), "float32")
    assert_close(make_tensor(v, "float32").T, v, "float32")


def test_transpose_errors(device, x):
    t = make_tensor(x, "float32")
    with pytest.raises(ValueError, match=r"^\[transpose\]"):
        t.transpose(0, 1)
    with pytest.raises(ValueError, match=r"^\[transpose\]"):
        t.transpose(0, 0, 1)
    with pytest.raises(ValueError, match=r"^\[transpose\] axis 3"):
        t.transpose(0, 1, 3)


# ---------------------------------------------------------------- reshape

@pytest.mark.parametrize("shape", [(60,), (-1,), (4, 15), (5, -1), (-1, 3, 2), (2, 2, 3, 5),
                                   (1, 60, 1), (3, 4, 5)], ids=str)
def test_reshape(device, x, shape):
    t = make_tensor(x, "float32")
    assert_close(t.reshape(shape), x.reshape(shape), "float32", device=device)
    assert_close(t.reshape(*shape), x.reshape(shape), "float32")
    assert_close(pf.reshape(t, shape), x.reshape(shape), "float32")
    assert_close(t.view(shape), x.reshape(shape), "float32")


@pytest.mark.parametrize("view", ["T", "step", "negative", "broadcast", "int_index"])
def test_reshape_non_contiguous(device, x, view):
    t = make_tensor(x, "float32")
    tv, xv = {
        "T": (t.T, x.T),
        "step": (t[:, ::2, 1:], x[:, ::2, 1:]),
        "negative": (t[::-1, :, ::-1], x[::-1, :, ::-1]),
        "broadcast": (pf.broadcast_to(t[:, :1], (3, 4, 5)), np.broadcast_to(x[:, :1], (3, 4, 5))),
        "int_index": (t[:, 2], x[:, 2]),
    }[view]
    assert_close(tv.reshape(-1), xv.reshape(-1), "float32")
    assert_close(tv.reshape(xv.shape[0], -1), xv.reshape(xv.shape[0], -1), "float32")
    assert_close(pf.flatten(tv), xv.reshape(-1), "float32")
    # a reshape of a view and an op on the result
    assert_close(tv.reshape(-1) * 2.0, xv.reshape(-1) * 2.0, "float32")


def test_reshape_scalar_and_empty(device):
    v = float(np.random.randn())
    assert_close(pf.tensor(v).reshape(1, 1), np.full((1, 1), v, np.float32), "float32")
    assert_close(pf.tensor([v]).reshape(()), np.float32(v), "float32")
    e = pf.zeros((0, 4))
    assert_close(e.reshape(2, 0, 8), np.zeros((2, 0, 8)), "float32")
    assert_close(e.reshape(4, 0), np.zeros((4, 0)), "float32")


def test_reshape_errors(device, x):
    t = make_tensor(x, "float32")
    with pytest.raises(ValueError, match=r"^\[reshape\] cannot reshape"):
        t.reshape(7, -1)
    with pytest.raises(ValueError, match=r"^\[reshape\]"):
        t.reshape(-1, -1)
    with pytest.raises(ValueError, match=r"^\[reshape\]"):
        t.reshape(61)
    with pytest.raises(ValueError, match=r"^\[reshape\]"):
        t.reshape(-2, 30)
    with pytest.raises(ValueError, match=r"^\[reshape\]"):
        pf.zeros((0, 4)).reshape(-1, 0)


def test_flatten(device, x):
    t = make_tensor(x, "float32")
    assert_close(t.flatten(), x.reshape(-1), "float32")
    assert_close(pf.flatten(t, 1), x.reshape(3, 20), "float32")
    assert_close(pf.flatten(t, 0, 1), x.reshape(12, 5), "float32")
    assert_close(pf.flatten(t, -2, -1), x.reshape(3, 20), "float32")
    assert_close(pf.flatten(pf.tensor(2.5)), np.array([2.5], np.float32), "float32")
    with pytest.raises(ValueError, match=r"^\[flatten\]"):
        pf.flatten(t, 2, 1)


# ------------------------------------------------------- squeeze/unsqueeze

def test_squeeze_unsqueeze(device):
    x = random_array((1, 3, 1, 4), "float32")
    t = make_tensor(x, "float32")
    assert_close(t.squeeze(), np.squeeze(x), "float32", device=device)
    assert_close(pf.squeeze(t, 0), np.squeeze(x, 0), "float32")
    assert_close(t.squeeze(-2), np.squeeze(x, -2), "float32")
    assert_close(t.squeeze((0, 2)), np.squeeze(x, (0, 2)), "float32")
    for axis in (0, 1, 4, -1, -5, 2):
        assert_close(pf.unsqueeze(t, axis), np.expand_dims(x, axis), "float32")
        assert_close(t.unsqueeze(axis), np.expand_dims(x, axis), "float32")
    # unsqueeze of a non-contiguous view, then an op on it
    tv, xv = t.T[:, ::2], x.T[:, ::2]
    assert_close(pf.unsqueeze(tv, 1) + 1.0, np.expand_dims(xv, 1) + 1.0, "float32")
    assert_close(pf.squeeze(pf.ones((1, 1))), np.float32(1.0), "float32")
    with pytest.raises(ValueError, match=r"^\[squeeze\]"):
        t.squeeze(1)
    with pytest.raises(ValueError, match=r"^\[unsqueeze\]"):
        t.unsqueeze(5)


# ------------------------------------------------------------ broadcast_to

@pytest.mark.parametrize("src,dst", [((3,), (2, 3)), ((3, 1), (3, 4)), ((), (2, 2)),
                                     ((1, 4, 1), (2, 3, 4, 5)), ((2, 3), (2, 3)), ((1,), (0,))],
                         ids=str)
def test_broadcast_to(device, src, dst):
    x = np.asarray(random_array(src, "float32"))
    t = make_tensor(x, "float32")
    assert_close(pf.broadcast_to(t, dst), np.broadcast_to(x, dst), "float32", device=device)
    assert_close(t.broadcast_to(*dst), np.broadcast_to(x, dst), "float32")


def test_broadcast_to_errors(device):
    with pytest.raises(ValueError, match=r"^\[broadcast_to\]"):
        pf.broadcast_to(pf.zeros(3), (4,))
    with pytest.raises(ValueError, match=r"^\[broadcast_to\]"):
        pf.broadcast_to(pf.zeros((2, 3)), (3,))


# --------------------------------------------------------------- indexing

INDEXES = [
    1, -1, -3, (0, 2), (2, -1, -5), (-1, 0, 4),
    slice(None), slice(1, None), slice(None, 2), slice(None, None, 2), slice(None, None, -1),
    slice(-1, None, -2), slice(5, -10, -1), slice(10, 20), slice(2, 1),
    (slice(None), 1), (Ellipsis, 2), (Ellipsis, slice(None, None, -2)), (1, Ellipsis),
    (slice(None, None, 2), slice(None), slice(1, None, 3)),
    (slice(None, None, -1), slice(3, 0, -2), slice(None, None, -3)),
    None, (None, 1), (slice(None), None, 2), (Ellipsis, None), (None, Ellipsis, None),
    (1, None, slice(None, None, -1), None), (-2, slice(1, 3), Ellipsis),
    Ellipsis, (), (np.int64(1), np.int32(-1)),
]


@pytest.mark.parametrize("index", INDEXES, ids=repr)
def test_getitem(device, x, index):
    t = make_tensor(x, "float32")
    want = x[index]
    assert_close(t[index], want, "float32", device=device)
    # the view feeds further ops correctly, and views of unevaluated results work
    assert_close(t[index] * 2.0 + 1.0, want * 2.0 + 1.0, "float32")
    assert_close((t - 1.0)[index], want - 1.0, "float32")


def test_getitem_chained_and_of_views(device, x):
    t = make_tensor(x, "float32")
    assert_close(t[::-1][1:][:, ::2][..., -1], x[::-1][1:][:, ::2][..., -1], "float32")
    assert_close(t.T[1, ::-1], x.T[1, ::-1], "float32")
    b = pf.broadcast_to(t[:1], (6, 4, 5))
    assert_close(b[3:, 1], np.broadcast_to(x[:1], (6, 4, 5))[3:, 1], "float32")


def test_getitem_slices_make_one_view(x):
    # Consecutive slices of one index are one view (one step of a compiled
    # function); None, integers and ... between them split it.
    t = make_tensor(x, "float32")
    f = pf.compile(lambda t: (t[1:, :, ::2] * 2, t[:, None, 1:, ::-1], t[::2, 1, 2:]))
    for got, want in zip(f(t), (x[1:, :, ::2] * 2, x[:, None, 1:, ::-1], x[::2, 1, 2:])):
        assert_close(got, want, "float32")
    assert [n for n in f.steps[0] if n != "unsqueeze"] == ["slice", "mul", "slice", "slice", "slice", "slice"]


@pytest.mark.parametrize("dtype", EVERY_DTYPE)
def test_getitem_dtypes(device, dtype):
    x = random_array((4, 6), dtype)
    t = make_tensor(x, dtype)
    for index in ((slice(None, None, -1), slice(1, None, 2)), (2,), (Ellipsis, -1)):
        assert_close(t[index], x[index], dtype)


def test_getitem_out_of_range(device, x):
    t = make_tensor(x, "float32")
    for index in (3, -4, (0, 4), (0, 0, 5), (Ellipsis, -6), (slice(None), 10)):
        with pytest.raises(IndexError, match=r"^\[getitem\]"):
            t[index]
    with pytest.raises(IndexError, match=r"^\[getitem\] too many indices"):
        t[0, 0, 0, 0]
    with pytest.raises(IndexError, match=r"^\[getitem\]"):
        t[..., ...]
    with pytest.raises(IndexError, match=r"^\[getitem\]"):
        t[1.0]
    with pytest.raises(IndexError, match=r"^\[getitem\]"):
        pf.tensor(1.0)[0]
    with pytest.raises(ValueError):
        t[::0]


# ----------------------------------------------------------------- astype

@pytest.mark.parametrize("dst", EVERY_DTYPE)
@pytest.mark.parametrize("src", EVERY_DTYPE)
def test_astype(device, src, dst):
    if src == "bool" or src in INT_DTYPES:
        x = random_array((5, 4), src, -200, 200)
    else:
        x = random_array((5, 4), src, -200, 200)
        x[0, :3] = [0.0, -0.0, 0.5]
        x[1, :2] = [-2.5, 2.75]
    t = make_tensor(x, src)
    out = t.astype(dst)
    if dst == "bool":
        want = x != 0
    elif dst in ("int32", "int64"):
        want = np.trunc(x.astype(np.float64)).astype(NUMPY_OF[dst])  # toward zero
    elif dst == "bfloat16":
        want = bf16_round(x.astype(np.float32))
    else:
        want = x.astype(np.float64).astype(NUMPY_OF[dst])
    assert_close(out, want, dst, rtol=0, atol=0, device=device)
    assert_close(pf.astype(t, dst), want, dst, rtol=0, atol=0)
    assert_close(t.to(getattr(pf, "bool_" if dst == "bool" else dst)), want, dst, rtol=0, atol=0)


def test_astype_rounding_and_specials(device):
    x = np.array([1.0 + 2**-11, 1.0 + 3 * 2**-11, 65519.0, 70000.0, -70000.0, 1e-8,
                  np.inf, -np.inf, np.nan], np.float32)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    assert_close(make_tensor(x).astype("float16"), want, "float16", rtol=0, atol=0)
    y = np.array([1.0 + 2**-8, 1.0 + 3 * 2**-8, 3.0e38, np.inf, np.nan, -1e-30], np.float32)
    assert_close(make_tensor(y).astype("bfloat16"), bf16_round(y), "bfloat16", rtol=0, atol=0)


def test_astype_non_contiguous(device, x):
    t = make_tensor(x, "float32")
    assert_close(t.T[::-1].astype("float16"), x.T[::-1].astype(np.float16), "float16", rtol=0, atol=0)
    assert_close(t[:, 1].astype("int32"), np.trunc(x[:, 1]).astype(np.int32), "int32")


def test_astype_accepts_numpy_and_python_types(device):
    x = random_array((3,), "float32", 0, 9)
    t = make_tensor(x, "float32")
    assert t.astype(np.float16).dtype == pf.float16
    assert t.astype(np.int32).dtype == pf.int32
    assert t.astype(int).dtype == pf.int64
    assert t.astype(float).dtype == pf.float32
    assert t.astype(bool).dtype == pf.bool_
    assert t.astype(np.dtype("int64")).dtype == pf.int64
    assert t.astype(pf.bfloat16).dtype == pf.bfloat16


# ------------------------------------------------- host side: item, numpy

def test_to_cpu_and_numpy(device, x):
    t = make_tensor(x, "float32", device=device)
    c = t.to("cpu")
    assert c.device == "cpu"
    assert_close(c, x, "float32", rtol=0, atol=0)
    assert_close(t.cpu(), x, "float32", rtol=0, atol=0)
    a = t.numpy()
    assert isinstance(a, np.ndarray) and a.dtype == np.float32
    np.testing.assert_array_equal(a, x.astype(np.float32))
    a[0, 0, 0] = 1234.0  # a copy: the tensor is unchanged
    assert t[0, 0, 0].item() == np.float32(x[0, 0, 0])
    np.testing.assert_array_equal(np.asarray(t), x.astype(np.float32))
    assert np.asarray(t, dtype=np.float64).dtype == np.float64


@pytest.mark.parametrize("dtype", EVERY_DTYPE)
def test_item(device, dtype):
    x = random_array((3,), dtype, -100, 100)
    t = make_tensor(x, dtype)
    for i in range(3):
        v = t[i].item()
        want = x[i].item()
        assert type(v) is type(want), (type(v), type(want))
        assert v == want
    assert make_tensor(x[:1], dtype).item() == x[0].item()  # one element, 1-d
    with pytest.raises(ValueError, match=r"^\[item\]"):
        t.item()


def test_python_conversions(device):
    v = float(random_array((), "float32"))
    t = pf.tensor(v)
    assert float(t) == v
    assert int(pf.tensor(7)) == 7
    assert bool(pf.tensor(0.0)) is False and bool(pf.tensor(2)) is True
    with pytest.raises(ValueError, match=r"^\[bool\]"):
        bool(pf.ones(2))


@pytest.mark.parametrize("dtype", EVERY_DTYPE)
def test_tolist(device, dtype):
    x = random_array((2, 3), dtype)
    t = make_tensor(x, dtype)
    got = t.tolist()
    assert got == x.astype(NUMPY_OF[dtype]).tolist()
    assert pf.tensor(float(x.ravel()[0])).tolist() == float(np.float32(x.ravel()[0]))


@pytest.mark.parametrize("dtype", EVERY_DTYPE)
def test_repr(device, dtype):
    t = make_tensor(random_array((2, 2), dtype), dtype)
    r = repr(t)
    assert f"dtype={dtype}" in r
    assert f"device='{t.device}'" in r
    assert r == str(t)
    assert t.device.startswith("cpu" if device == "cpu" else "rocm")


def test_len_and_properties(device):
    shape = tuple(int(s) for s in np.random.randint(1, 6, size=3))
    t = pf.zeros(shape, dtype="float16")
    assert len(t) == shape[0]
    assert len(t[0]) == shape[1]
    assert t.shape == shape and t.ndim == 3 and t.size == int(np.prod(shape))
    assert t.itemsize == 2 and t.nbytes == 2 * t.size
    with pytest.raises(ValueError, match=r"^\[len\]"):
        len(pf.tensor(1.0))


def test_float16_conversions_exhaustive(device):
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    h = bits.view(np.float16)
    # every float16 value (subnormals, inf, NaN included) widens exactly
    assert_close(make_tensor(h).astype("float32"), h.astype(np.float32), "float32", rtol=0, atol=0)
    # and float32 values of every magnitude round to nearest even like NumPy
    e = np.random.uniform(-30, 17, 20000)
    f = (np.random.choice([-1.0, 1.0], 20000) * 2.0 ** e).astype(np.float32)
    halfway = (h[np.isfinite(h)].astype(np.float32)[:-1] + h[np.isfinite(h)].astype(np.float32)[1:]) / 2
    f = np.concatenate([f, halfway[np.isfinite(halfway)][::7]])
    with np.errstate(over="ignore"):
        want = f.astype(np.float16)
    assert_close(make_tensor(f).astype("float16"), want, "float16", rtol=0, atol=0)


def test_bfloat16_conversions_exhaustive(device):
    bits = np.arange(1 << 16, dtype=np.uint32) << 16
    b = bits.view(np.float32)  # every bfloat16 value as float32
    t = make_tensor(b).astype("bfloat16")
    assert_close(t, b, "bfloat16", rtol=0, atol=0)
    assert_close(t.astype("float32"), b, "float32", rtol=0, atol=0)
    f = (np.random.choice([-1.0, 1.0], 20000) * 2.0 ** np.random.uniform(-130, 127, 20000)).astype(
        np.float32)
    assert_close(make_tensor(f).astype("bfloat16"), bf16_round(f), "bfloat16", rtol=0, atol=0)
