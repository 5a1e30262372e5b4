"""Hostile inputs: sizes that overflow 64 bits, allocations that cannot be
satisfied, values that do not fit a dtype, and the edge cases where an op
used to answer wrongly. Each behaves as NumPy/PyTorch do (their value where
they give one, an error where one of them raises), the error names the
function, and the process stays usable. Every case runs on each device under
test ('rocm' included)."""
import re

import numpy as np
import pytest

import pyflame as pf
from conftest import assert_close, make_tensor, random_array, torch_or_skip

BIG = 2**62


def _usable(device):
    a = random_array((3, 4))
    out = (make_tensor(a, "float32", device) * 2.0).sum(1)
    assert_close(out, (a * 2.0).sum(1), "float32")


def _raises(exc, fn, call, device):
    with pytest.raises(exc) as info:
        call()
    msg = str(info.value)
    assert re.match(rf"^\[{fn}\] \S", msg), f"message {msg!r} does not start with '[{fn}] '"
    assert "std::" not in msg and "bad_alloc" not in msg
    _usable(device)
    return msg


# ------------------------------------------------- size arithmetic overflow

@pytest.mark.parametrize("call, fn", [
    (lambda: pf.zeros(BIG).sum().item(), "zeros"),
    (lambda: pf.ones(BIG, 4), "ones"),
    (lambda: pf.full((BIG,), 1.0), "full"),
    (lambda: pf.rand(BIG, 4), "rand"),
    (lambda: pf.randn(4, BIG), "randn"),
    (lambda: pf.randint(0, 4, (BIG, 4)), "randint"),
    (lambda: pf.eye(2**31).numpy(), "eye"),
    (lambda: pf.arange(0, BIG).sum().item(), "arange"),
    (lambda: (pf.broadcast_to(pf.ones(1), (BIG,)) + 1).sum().item(), "broadcast_to"),
    (lambda: pf.ones(2**40, 2**40).sum(), "ones"),
    (lambda: pf.zeros(0).reshape(BIG, 4), "reshape"),
    (lambda: pf.zeros(0, BIG, 4), "zeros"),
    (lambda: pf.concat([pf.broadcast_to(pf.ones(1, dtype=pf.bool_), (BIG,))] * 2), "concat"),
    (lambda: pf.pad(pf.ones(2), (BIG, BIG)), "pad"),
    (lambda: pf.split(pf.ones(4), [BIG, BIG, 4]), "split"),
    (lambda: pf.nn.functional.conv_transpose2d(pf.ones(1, 1, 4, 4), pf.ones(1, 1, 2, 2), stride=BIG),
     "conv_transpose2d"),
    (lambda: pf.nn.functional.conv2d(pf.ones(1, 1, 4, 4), pf.ones(1, 1, 3, 3), dilation=BIG), "conv2d"),
    (lambda: pf.nn.functional.conv2d(pf.ones(1, 1, 4, 4), pf.ones(1, 1, 2, 2), padding=BIG), "conv2d"),
    (lambda: pf.nn.functional.adaptive_avg_pool2d(pf.ones(1, 1, 4, 4), (BIG, BIG)), "adaptive_avg_pool2d"),
])
def test_size_overflow_is_a_value_error(device, call, fn):
    msg = _raises(ValueError, fn, call, device)
    assert "overflow" in msg or "too large" in msg


def test_numpy_rejects_the_same_shapes():
    # The rule matches NumPy's: zero extents count as one for the overflow
    # check, and the byte count must fit too.
    for shape in [(BIG, 4), (0, BIG, 4), (2**40, 2**40)]:
        with pytest.raises(ValueError):
            np.empty(shape, dtype=np.float32)


def test_large_valid_sizes_are_recorded_not_rejected(device):
    t = pf.zeros(2**40)
    assert t.size == 2**40 and t.nbytes == 2**42
    b = pf.broadcast_to(pf.ones(1, dtype=pf.bool_), (BIG,))
    assert b.shape == (BIG,)
    assert pf.arange(5)[::BIG].numpy().tolist() == [0]      # a huge step, one element
    assert pf.arange(5)[::-BIG].numpy().tolist() == [4]


def test_unsatisfiable_allocation_is_out_of_memory(device):
    # 2**62 bytes fit 64 bits but no host or GPU has them.
    with pytest.raises(pf.OutOfMemoryError) as info:
        pf.zeros(2**60).sum().item()
    assert isinstance(info.value, RuntimeError)
    assert "std::" not in str(info.value)
    b = pf.broadcast_to(pf.ones(1, dtype=pf.bool_), (BIG,))  # a view: no memory until copied
    for copy in (lambda: b.numpy(), lambda: b.contiguous().eval()):
        with pytest.raises(pf.OutOfMemoryError, match=r"^\[allocate\] out of "):
            copy()
    _usable(device)


def test_index_beyond_int64_is_an_index_error(device):
    x = pf.ones(3)
    for i in (2**63, -(2**63) - 5, 2**100):
        with pytest.raises(IndexError, match=r"^\[getitem\] index -?\d+ is out of bounds for axis 0 with size 3"):
            x[i]
    with pytest.raises(IndexError):
        np.ones(3)[2**62]
    _usable(device)


# ------------------------------------------------------- bool scalar index

@pytest.mark.parametrize("key", [True, False, (Ellipsis, True), (True, 0), (0, True), (slice(1, None), True),
                                 (True, slice(1, None)), (None, True), (True, None), (False, Ellipsis, 1)])
def test_bool_scalar_index_adds_an_axis(device, key):
    a = np.arange(6).reshape(2, 3)
    expected = a[key]
    got = make_tensor(a, "int64", device)[key]
    assert_close(got, expected, "int64")


def test_numpy_bool_scalar_index(device):
    a = np.arange(6).reshape(2, 3)
    for key in (np.True_, np.False_, (np.True_, 1)):
        assert_close(make_tensor(a, "int64", device)[key], a[key], "int64")


def test_bool_scalar_index_of_a_0d_tensor(device):
    a = np.array(5)
    assert_close(make_tensor(a, "int64", device)[True], a[True], "int64")
    assert_close(make_tensor(a, "int64", device)[False], a[False], "int64")


# ------------------------------------------------------------ integer pow

@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_pow_negative_exponent_raises(device, dtype):
    x = make_tensor(np.array([2, 3]), dtype, device)
    with pytest.raises(ValueError):
        np.array([2, 3]) ** np.array([-1, 2])
    _raises(ValueError, "pow", lambda: x ** -1, device)
    _raises(ValueError, "pow", lambda: pf.pow(x, -2), device)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_pow_computed_negative_exponent_raises(device, dtype):
    # A lazily computed exponent is checked when the kernel runs (the GPU
    # reads a flag back).
    x = make_tensor(np.array([2, 3]), dtype, device)
    e = make_tensor(np.array([-1, 2]), dtype, device)
    _raises(ValueError, "pow", lambda: (x ** e).numpy(), device)
    _raises(ValueError, "pow", lambda: (2 ** (e - 0)).numpy(), device)
    _raises(ValueError, "pow", lambda: (x ** pf.broadcast_to(e[:1], (2,))).numpy(), device)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_pow_matches_numpy_including_wraparound(device, dtype):
    npt = np.int32 if dtype == "int32" else np.int64
    base = np.array([-3, -1, 0, 1, 2, 3, 7], dtype=npt)
    exp = np.array([0, 1, 2, 5, 31, 40, 63], dtype=npt)
    with np.errstate(over="ignore"):
        expected = base ** exp
    assert_close(make_tensor(base, dtype, device) ** make_tensor(exp, dtype, device), expected, dtype)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_add_sub_mul_neg_wrap_like_numpy(device, dtype):
    npt = np.int32 if dtype == "int32" else np.int64
    info = np.iinfo(npt)
    a = np.array([info.max, info.min, info.max, -7], dtype=npt)
    b = np.array([1, -1, 2, 3], dtype=npt)
    ta, tb = make_tensor(a, dtype, device), make_tensor(b, dtype, device)
    with np.errstate(over="ignore"):
        assert_close(ta + tb, a + b, dtype)
        assert_close(ta - tb, a - b, dtype)
        assert_close(ta * tb, a * b, dtype)
        assert_close(-ta, -a, dtype)
        assert_close(abs(ta), np.abs(a), dtype)


# ------------------------------------------------ values that do not fit

@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 2**31, -(2**31) - 1, 1e20])
def test_full_value_out_of_int32_range_raises(device, value):
    torch, _ = torch_or_skip()
    with pytest.raises(RuntimeError):
        torch.full((2,), value, dtype=torch.int32)
    _raises(ValueError, "full", lambda: pf.full((2,), value, dtype=pf.int32), device)


def test_full_value_edges_fit(device):
    assert_close(pf.full((2,), -(2**31), dtype=pf.int32), np.full(2, -(2**31), np.int32), "int32")
    assert_close(pf.full((2,), 2**31 - 1, dtype=pf.int32), np.full(2, 2**31 - 1, np.int32), "int32")
    assert_close(pf.full((2,), 3.7, dtype=pf.int32), np.full(2, 3, np.int32), "int32")  # truncates, as torch
    _raises(ValueError, "full", lambda: pf.full((2,), float("nan"), dtype=pf.int64), device)


# Python ints outside the tensor's integer dtype: NumPy 2 raises OverflowError
# for arithmetic (NEP 50) and answers comparisons exactly; PyTorch wraps int32
# silently. Debian's NumPy 1.x upcasts instead, so the exact answers come from
# Python's own integers (NumPy object arrays).
_BEYOND = {"int32": [2**31, -(2**31) - 1, 2**40, 2**60, 2**63, -(2**63) - 1, 2**100],
           "int64": [2**63, -(2**63) - 1, 2**100, -(2**100)], "bool": [2**63, -(2**63) - 1]}


def _numpy2_raises_too(dtype, value):
    if int(np.__version__.split(".")[0]) >= 2 and dtype != "bool":
        with pytest.raises(OverflowError):
            np.array([1], dtype=dtype) + value


@pytest.mark.parametrize("dtype", ["int32", "int64", "bool"])
@pytest.mark.parametrize("call, fn", [
    (lambda x, v: x + v, "add"), (lambda x, v: v + x, "add"), (lambda x, v: x - v, "sub"),
    (lambda x, v: v - x, "sub"), (lambda x, v: x * v, "mul"), (lambda x, v: pf.maximum(x, v), "maximum"),
    (lambda x, v: pf.minimum(v, x), "minimum"), (lambda x, v: pf.add(v, x), "add"),
])
def test_int_scalar_beyond_the_dtype_raises_in_arithmetic(device, dtype, call, fn):
    x = make_tensor(np.array([1, 0]), dtype, device)
    for v in _BEYOND[dtype]:
        _numpy2_raises_too(dtype, v)
        msg = _raises(pf.IntegerOverflowError, fn, lambda: call(x, v).numpy(), device)
        assert str(v) in msg and "out of bounds for" in msg
    # One class, caught either way: NumPy 2's OverflowError and a ValueError.
    assert issubclass(pf.IntegerOverflowError, OverflowError)
    assert issubclass(pf.IntegerOverflowError, ValueError)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_int_scalar_at_the_dtype_edges_wraps_like_numpy(device, dtype):
    info = np.iinfo(dtype)
    a = np.array([1, -1, 0], dtype=dtype)
    x = make_tensor(a, dtype, device)
    with np.errstate(over="ignore"):
        for v in (int(info.max), int(info.min)):
            assert_close(x + v, a + np.array(v, dtype=dtype), dtype)
            assert_close(x * v, a * np.array(v, dtype=dtype), dtype)


_COMPARISONS = [(pf.eq, np.equal), (pf.ne, np.not_equal), (pf.lt, np.less), (pf.le, np.less_equal),
                (pf.gt, np.greater), (pf.ge, np.greater_equal)]


@pytest.mark.parametrize("dtype", ["int32", "int64", "bool"])
@pytest.mark.parametrize("pf_op, np_op", _COMPARISONS)
def test_comparison_with_int_scalar_beyond_the_dtype_is_exact(device, dtype, pf_op, np_op):
    a = np.array([[1, 0], [-5, 7]]).astype(dtype)
    x = make_tensor(a, dtype, device)
    exact = a.astype(object)  # Python integers: no wrap, no rounding
    for v in _BEYOND[dtype] + [int(np.iinfo(np.int32).max)]:
        assert_close(pf_op(x, v), np_op(exact, v).astype(bool), "bool")
        assert_close(pf_op(v, x), np_op(v, exact).astype(bool), "bool")
    ops = {np.equal: lambda p, q: p == q, np.not_equal: lambda p, q: p != q, np.less: lambda p, q: p < q,
           np.less_equal: lambda p, q: p <= q, np.greater: lambda p, q: p > q,
           np.greater_equal: lambda p, q: p >= q}
    op = ops[np_op]
    for v in _BEYOND[dtype]:  # operators, the tensor on either side
        assert_close(op(x, v), np_op(exact, v).astype(bool), "bool")
        assert_close(op(v, x), np_op(v, exact).astype(bool), "bool")


def test_comparison_with_an_out_of_range_int_matches_torch_where_torch_is_exact(device):
    torch, _ = torch_or_skip()
    x = pf.tensor([1, 2], dtype=pf.int32, device=device)
    t = torch.tensor([1, 2], dtype=torch.int32)
    assert (x == 2**40).numpy().tolist() == (t == 2**40).tolist() == [False, False]
    assert (x != 2**40).numpy().tolist() == (t != 2**40).tolist() == [True, True]


def test_clamp_bound_out_of_int32_range_raises(device):
    torch, _ = torch_or_skip()
    with pytest.raises(RuntimeError):
        torch.clamp(torch.tensor([1], dtype=torch.int32), max=2**40)
    _raises(ValueError, "clamp", lambda: pf.clamp(pf.tensor([1], dtype=pf.int32), max=2**40), device)


def test_pad_value_out_of_range_raises(device):
    _raises(ValueError, "pad", lambda: pf.pad(pf.ones(2, dtype=pf.int32), (1, 1), value=1e20), device)


# ----------------------------------------------------------- creation ops

def test_eye_negative_sizes_raise(device):
    torch, _ = torch_or_skip()
    for args in [(2, -1), (-1,), (-2, 3), (3, -5)]:
        with pytest.raises(RuntimeError):
            torch.eye(*args)
        _raises(ValueError, "eye", lambda: pf.eye(*args), device)
    for n, m, k in [(3, None, 0), (2, 4, 1), (4, 2, -1), (3, 3, 5), (0, 2, 0)]:
        assert_close(pf.eye(n, m, k), np.eye(n, m, k, dtype=np.float32), "float32")


@pytest.mark.parametrize("start, stop, step", [(0.0, 1.0, 1e-19), (-1e308, 1e308, 1.0), (0.0, 2.0**64, 1.0)])
def test_arange_too_many_elements_raises(device, start, stop, step):
    with pytest.raises((ValueError, MemoryError)):
        np.arange(start, stop, step)
    _raises(ValueError, "arange", lambda: pf.arange(start, stop, step), device)


def test_arange_counts_match_numpy(device):
    for start, stop, step in [(0, 10, 3), (10, 0, -3), (0, 10, 2**62), (0.0, 1.0, 0.1), (5, 5, 1), (5, 0, 1)]:
        expected = np.arange(start, stop, step)
        got = pf.arange(start, stop, step)
        assert got.shape == expected.shape
    _raises(ValueError, "arange", lambda: pf.arange(0, 2**40, 2**38, dtype=pf.int32), device)


# ------------------------------------------------------------ repeated axes

@pytest.mark.parametrize("call, fn", [
    (lambda x: pf.squeeze(x, (0, 0)), "squeeze"),
    (lambda x: pf.squeeze(x, (0, -2)), "squeeze"),
    (lambda x: pf.sum(x, (0, 0)), "sum"),
    (lambda x: pf.mean(x, (1, -1)), "mean"),
    (lambda x: pf.max(x, (0, -2)), "max"),
    (lambda x: pf.prod(x, (0, 0)), "prod"),
    (lambda x: pf.transpose(x, (0, 0)), "transpose"),
])
def test_repeated_axes_raise(device, call, fn):
    torch, _ = torch_or_skip()
    with pytest.raises(RuntimeError):
        torch.sum(torch.zeros(1, 1), (0, 0))
    _raises(ValueError, fn, lambda: call(pf.zeros((1, 1))), device)


# -------------------------------------------------------------------- bce

@pytest.mark.parametrize("bad", [1.5, -0.5, float("nan"), float("inf")])
def test_bce_loss_input_outside_unit_interval_raises(device, bad):
    torch, F = torch_or_skip()
    with pytest.raises(RuntimeError):
        F.binary_cross_entropy(torch.tensor([bad, 0.5]), torch.tensor([1.0, 0.0]))
    loss = pf.bce_loss(pf.tensor([bad, 0.5]), pf.tensor([1.0, 0.0]))
    _raises(ValueError, "bce_loss", lambda: loss.item(), device)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_bce_loss_value_and_gradient_match_torch(device, dtype):
    torch, F = torch_or_skip()
    p = np.random.uniform(0, 1, size=(4, 5))
    p[0, :3] = [0.0, 1.0, 0.5]  # the interval's ends are allowed
    y = np.random.uniform(0, 1, size=(4, 5))
    x = make_tensor(p, dtype, device)
    x.requires_grad = True
    loss = pf.bce_loss(x, make_tensor(y, "float32", device), reduction="sum")
    loss.backward()
    tp = torch.tensor(np.asarray(x.astype(pf.float32).numpy(), dtype=np.float64), requires_grad=True)
    tl = F.binary_cross_entropy(tp, torch.tensor(y), reduction="sum")
    tl.backward()
    tol = {"float32": 1e-4, "float16": 2e-2, "bfloat16": 5e-2}[dtype]
    np.testing.assert_allclose(loss.astype(pf.float32).item(), tl.item(), rtol=tol)
    g = x.grad.astype(pf.float32).numpy()
    inner = (tp.detach().numpy() > 0) & (tp.detach().numpy() < 1)  # torch divides by an epsilon at the ends
    np.testing.assert_allclose(g[inner], tp.grad.numpy()[inner], rtol=tol, atol=tol)


# ------------------------------------------------------------ NaN / -inf

def test_max_min_propagate_nan_like_numpy(device):
    a = random_array((4, 6))
    a[1, 2] = np.nan
    a[3, 0] = np.nan
    x = make_tensor(a, "float32", device)
    for axis in (None, 0, 1):
        assert_close(pf.max(x, axis), np.max(a, axis=axis), "float32")
        assert_close(pf.min(x, axis), np.min(a, axis=axis), "float32")


def test_reductions_over_infinities(device):
    a = np.array([[-np.inf, -np.inf], [np.inf, np.inf], [-np.inf, 1.0]], dtype=np.float32)
    x = make_tensor(a, "float32", device)
    assert_close(pf.max(x, 1), a.max(1), "float32")
    assert_close(pf.min(x, 1), a.min(1), "float32")
    assert_close(pf.sum(x, 1), a.sum(1), "float32")


def test_softmax_of_infinite_rows_matches_torch(device):
    torch, _ = torch_or_skip()
    a = np.array([[-np.inf, -np.inf, -np.inf], [-np.inf, 0.0, 1.0], [np.inf, 0.0, 1.0]], dtype=np.float32)
    x = make_tensor(a, "float32", device)
    assert_close(pf.softmax(x, 1), torch.softmax(torch.tensor(a), 1).numpy(), "float32")
    assert_close(pf.log_softmax(x, 1), torch.log_softmax(torch.tensor(a), 1).numpy(), "float32")


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_max_pool_over_minus_inf_is_minus_inf(device, nd):
    torch, F = torch_or_skip()
    shape = (1, 2) + (4,) * nd
    a = random_array(shape)
    a[..., :2] = -np.inf  # whole windows of -inf
    a.reshape(-1)[5] = np.nan
    fn = getattr(pf.nn.functional, f"max_pool{nd}d")
    tfn = getattr(F, f"max_pool{nd}d")
    got = fn(make_tensor(a, "float32", device), 2)
    assert_close(got, tfn(torch.tensor(a), 2).numpy(), "float32")


# --------------------------------------------------------------- gradients

def _torch_grad(torch, f, a):
    t = torch.tensor(a, requires_grad=True)
    f(t).backward()
    return t.grad.numpy()


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_clamp_gradient_is_one_at_the_bounds(device, dtype):
    torch, _ = torch_or_skip()
    a = np.round(random_array((5, 8)) * 2) / 2  # many values exactly on -1, 0.5
    lo, hi = -1.0, 0.5
    x = make_tensor(a, dtype, device)
    x.requires_grad = True
    w = random_array((5, 8))
    (pf.clamp(x, lo, hi) * make_tensor(w, dtype, device)).sum().backward()
    expected = _torch_grad(torch, lambda t: (torch.clamp(t, lo, hi) * torch.tensor(w)).sum(), a)
    assert_close(x.grad, expected, dtype)
    assert np.any(a == lo) or np.any(a == hi)


def test_clamp_values_nan_and_inverted_bounds_match_torch(device):
    torch, _ = torch_or_skip()
    a = np.array([np.nan, -3.0, 0.0, 3.0], dtype=np.float32)
    x = make_tensor(a, "float32", device)
    assert_close(pf.clamp(x, -1.0, 1.0), torch.clamp(torch.tensor(a), -1.0, 1.0).numpy(), "float32")
    assert_close(pf.clamp(x, 2.0, 1.0), torch.clamp(torch.tensor(a), 2.0, 1.0).numpy(), "float32")
    assert_close(pf.clamp(x, min=0.0), torch.clamp(torch.tensor(a), min=0.0).numpy(), "float32")
    ai = np.array([-5, 0, 5], dtype=np.int64)
    assert_close(pf.clamp(make_tensor(ai, "int64", device), -1, 1), np.clip(ai, -1, 1), "int64")


@pytest.mark.parametrize("call", [
    lambda m: m.sum(),
    lambda m: m.sum(0),
    lambda m: m.mean(0),
    lambda m: m.prod(0),
    lambda m: m.sum(1),
])
def test_zero_size_reductions_stay_in_autograd(device, call):
    torch, _ = torch_or_skip()
    x = pf.zeros(0, 3, requires_grad=True)
    out = call(x)
    (out * 1.0).sum().backward()
    t = torch.zeros(0, 3, requires_grad=True)
    tout = call(t)
    (tout * 1.0).sum().backward()
    assert_close(out, tout.detach().numpy(), "float32")
    assert_close(x.grad, t.grad.numpy(), "float32")


def test_zero_size_concat_and_stack_stay_in_autograd(device):
    torch, _ = torch_or_skip()
    a = pf.zeros(0, 3, requires_grad=True)
    b = make_tensor(random_array((2, 3)), "float32", device)
    b.requires_grad = True
    pf.concat([a, b, a]).sum().backward()
    assert_close(a.grad, np.zeros((0, 3)), "float32")
    assert_close(b.grad, np.ones((2, 3)), "float32")
    c = pf.zeros(0, 3, requires_grad=True)
    d = pf.zeros(0, 3, requires_grad=True)
    s = pf.stack([c, d], 1)
    assert s.shape == (0, 2, 3)
    s.sum().backward()
    assert_close(c.grad, np.zeros((0, 3)), "float32")
    assert_close(d.grad, np.zeros((0, 3)), "float32")
    tc = torch.zeros(0, 3, requires_grad=True)
    torch.stack([tc, tc], 1).sum().backward()
    assert tc.grad.shape == (0, 3)


@pytest.mark.parametrize("xshape, ishape, axis", [((3, 4), (0, 4), 0), ((3, 4), (3, 0), 1), ((0, 4), (0, 4), 0),
                                                  ((3, 0), (3, 0), 1), ((2, 3, 4), (2, 0, 4), 1)])
def test_gather_with_zero_size_index_has_zero_gradient(device, xshape, ishape, axis):
    torch, _ = torch_or_skip()
    a = random_array(xshape)
    x = make_tensor(a, "float32", device)
    x.requires_grad = True
    idx = np.zeros(ishape, dtype=np.int64)
    out = pf.gather(x, axis, make_tensor(idx, "int64", device))
    assert out.shape == ishape
    out.sum().backward()
    t = torch.tensor(a, requires_grad=True)
    torch.gather(t, axis, torch.tensor(idx)).sum().backward()
    assert_close(x.grad, t.grad.numpy(), "float32")


def test_index_select_and_embedding_with_empty_indices(device):
    torch, F = torch_or_skip()
    a = random_array((4, 3))
    x = make_tensor(a, "float32", device)
    x.requires_grad = True
    (pf.index_select(x, 0, pf.zeros(0, dtype=pf.int64)).sum() +
     pf.embedding(pf.zeros((2, 0), dtype=pf.int64), x).sum()).backward()
    t = torch.tensor(a, requires_grad=True)
    (torch.index_select(t, 0, torch.zeros(0, dtype=torch.int64)).sum() +
     F.embedding(torch.zeros((2, 0), dtype=torch.int64), t).sum()).backward()
    assert_close(x.grad, t.grad.numpy(), "float32")


# ---------------------------------------------------- errors at the boundary

def test_cpp_conversion_failures_are_not_leaked(device):
    with pytest.raises(ValueError, match=r"^\[split\] split_size 9223372036854775808 is out of the int64") as info:
        pf.split(pf.ones(4), 2**63)
    assert "std::" not in str(info.value) and "bad_cast" not in str(info.value)
    _usable(device)


@pytest.mark.parametrize("shapes, pf_fn, torch_fn", [
    ([(3, 0), (0, 4)], lambda a, b: a @ b, lambda a, b: a @ b),
    ([(0, 3), (3, 4)], lambda a, b: a @ b, lambda a, b: a @ b),
    ([(0, 3)], lambda a: pf.softmax(a, 1), lambda a: a.softmax(1)),
    ([(0, 3)], lambda a: pf.layer_norm(a, (3,)), lambda a: __import__("torch").nn.functional.layer_norm(a, (3,))),
    ([(2, 0)], lambda a: pf.pad(a, (1, 1)), lambda a: __import__("torch").nn.functional.pad(a, (1, 1))),
    ([(0, 1, 4, 4), (2, 1, 3, 3)], lambda x, w: pf.nn.functional.conv2d(x, w),
     lambda x, w: __import__("torch").nn.functional.conv2d(x, w)),
    ([(0, 3), (2, 3)], lambda a, b: pf.concat([a, b * 2.0, a]), lambda a, b: __import__("torch").cat([a, b * 2.0, a])),
])
def test_zero_size_inputs_get_gradients_like_torch(device, shapes, pf_fn, torch_fn):
    torch, _ = torch_or_skip()
    arrays = [random_array(s) for s in shapes]
    xs = []
    for a in arrays:
        x = make_tensor(a, "float32", device)
        x.requires_grad = True
        xs.append(x)
    ts = [torch.tensor(a, dtype=torch.float32, requires_grad=True) for a in arrays]
    w = random_array(tuple(torch_fn(*ts).shape))
    out = pf_fn(*xs)
    (out * make_tensor(w, "float32", device)).sum().backward()
    tout = torch_fn(*ts)
    (tout * torch.tensor(w, dtype=torch.float32)).sum().backward()
    assert_close(out, tout.detach().numpy(), "float32", rtol=1e-4, atol=1e-5)
    for x, t in zip(xs, ts):
        assert_close(x.grad, t.grad.numpy(), "float32", rtol=1e-4, atol=1e-5)


def test_integer_sum_and_prod_wrap_like_numpy(device):
    a = np.array([[2**62, 2**62, 5], [-(2**63), -1, 3]], dtype=np.int64)
    x = make_tensor(a, "int64", device)
    with np.errstate(over="ignore"):
        assert_close(pf.sum(x, 1), a.sum(1), "int64")
        assert_close(pf.prod(x, 1), a.prod(1), "int64")
        assert_close(pf.sum(x), a.sum(), "int64")


def test_randint_over_the_full_int64_range(device):
    lo, hi = -(2**63), 2**63 - 1
    r = pf.randint(lo, hi, (1000,)).numpy()
    assert r.dtype == np.int64 and r.min() >= lo and r.max() < hi
    assert (r < 0).any() and (r > 0).any()  # both halves of the range are drawn


def test_gpu_kernels_index_past_2_31_elements(gpu_device):
    # 64-bit indexing in the GPU kernels: outputs and reductions of more than
    # 2**31 elements (about 2 GiB of bool each).
    n = 2**31 + 5
    b = pf.broadcast_to(pf.ones(1, dtype=pf.bool_), (n,))
    assert (b == b).sum().item() == n  # elementwise output, then a reduction
    t = pf.ones(n, dtype=pf.bool_)
    assert t[2**31 + 2:].sum().item() == 3
    assert pf.astype(t[n - 4:], pf.int32).numpy().tolist() == [1, 1, 1, 1]


def test_full_of_a_huge_integer_into_a_narrow_integer_dtype_raises(device):
    with pytest.raises(ValueError, match=r"^\[full\] "):
        pf.full((2,), 2**60, dtype=pf.int32, device=device)
    np.testing.assert_array_equal(pf.full((2,), 2**60, device=device).numpy(),
                                  np.full((2,), 2**60, dtype=np.int64))


# --------------------------------------- reductions without an identity

_NO_IDENTITY = [  # (pf call, NumPy call): NumPy raises on any empty reduced axis
    (lambda x, ax: pf.max(x, ax), lambda a, ax: np.max(a, axis=ax)),
    (lambda x, ax: pf.min(x, ax), lambda a, ax: np.min(a, axis=ax)),
    (lambda x, ax: x.max(ax, keepdim=True), lambda a, ax: np.max(a, axis=ax, keepdims=True)),
    (lambda x, ax: pf.argmax(x, ax), lambda a, ax: np.argmax(a, axis=ax)),
    (lambda x, ax: pf.argmin(x, ax), lambda a, ax: np.argmin(a, axis=ax)),
]


@pytest.mark.parametrize("shape, axis", [((0,), None), ((0,), 0), ((0, 3), 0), ((0, 3), 1), ((3, 0), 0),
                                         ((3, 0), 1), ((0, 0), 0), ((0, 0), 1), ((0, 0), None),
                                         ((2, 0, 3), 1), ((2, 0, 3), 2), ((2, 0, 3), (0, 2))])
@pytest.mark.parametrize("pf_call, np_call", _NO_IDENTITY)
def test_reductions_without_identity_over_empty_axes_raise_like_numpy(device, shape, axis, pf_call, np_call):
    a = np.zeros(shape, dtype=np.float32)
    if isinstance(axis, tuple) and np_call(np.ones((1, 1, 1)), 0).dtype == np.int64:
        pytest.skip("argmax/argmin take one axis")
    x = make_tensor(a, "float32", device)
    try:
        expected = np_call(a, axis)
    except ValueError:
        with pytest.raises(ValueError, match=r"^\[(max|min|argmax|argmin)\] .*(zero-size|empty)"):
            pf_call(x, axis).numpy()
        _usable(device)
        return
    got = pf_call(x, axis)
    assert got.shape == expected.shape
    assert_close(got, expected, "int64" if expected.dtype == np.int64 else "float32")


def test_torch_also_rejects_empty_reduced_axes():
    torch, _ = torch_or_skip()
    for call in (lambda t: t.amax(0), lambda t: t.argmax(0), lambda t: t.amin(1)):
        with pytest.raises((RuntimeError, IndexError)):
            call(torch.zeros(0, 0))


# ------------------------------------------------ embedding_dim 0

def test_embedding_of_width_zero_still_checks_indices(device):
    torch, F = torch_or_skip()
    w = pf.zeros(3, 0, device=device)
    for bad in ([5], [-1], [0, 3]):
        with pytest.raises((IndexError, RuntimeError)):
            F.embedding(torch.tensor(bad), torch.zeros(3, 0))
        _raises(IndexError, "embedding", lambda: pf.embedding(make_tensor(np.array(bad), "int64", device), w).numpy(),
                device)
    idx = np.array([[0, 2], [1, 1]])
    w.requires_grad = True
    out = pf.embedding(make_tensor(idx, "int64", device), w)
    assert out.shape == (2, 2, 0) and out.numpy().shape == (2, 2, 0)
    out.sum().backward()
    assert w.grad.shape == (3, 0)


# --------------------------------------- axes beyond any int type

_AXIS_CALLS = [
    (lambda x, ax: pf.sum(x, ax), "sum"), (lambda x, ax: x.mean(ax), "mean"), (lambda x, ax: pf.max(x, ax), "max"),
    (lambda x, ax: pf.prod(x, (0, ax)), "prod"), (lambda x, ax: pf.softmax(x, ax), "softmax"),
    (lambda x, ax: pf.log_softmax(x, ax), "log_softmax"), (lambda x, ax: pf.concat([x, x], ax), "concat"),
    (lambda x, ax: pf.cat([x, x], ax), "(cat|concat)"), (lambda x, ax: pf.stack([x, x], ax), "stack"),
    (lambda x, ax: pf.split(x, 1, ax), "split"), (lambda x, ax: pf.gather(x, ax, pf.zeros(2, 3, dtype=pf.int64)), "gather"),
    (lambda x, ax: pf.index_select(x, ax, pf.zeros(1, dtype=pf.int64)), "index_select"),
    (lambda x, ax: pf.slice_update(x, x, 0, ax), "slice_update"), (lambda x, ax: pf.argmax(x, ax), "argmax"),
    (lambda x, ax: pf.argmin(x, ax), "argmin"), (lambda x, ax: pf.argsort(x, ax), "argsort"),
    (lambda x, ax: pf.sort(x, ax), "sort"), (lambda x, ax: pf.topk(x, 1, ax), "topk"),
    (lambda x, ax: pf.cumsum(x, ax), "cumsum"), (lambda x, ax: pf.flatten(x, ax), "flatten"),
    (lambda x, ax: pf.flatten(x, 0, ax), "flatten"), (lambda x, ax: pf.transpose(x, (ax, 0)), "transpose"),
    (lambda x, ax: x.permute(ax, 0), "transpose"), (lambda x, ax: pf.swapaxes(x, 0, ax), "swapaxes"),
    (lambda x, ax: pf.squeeze(x, ax), "squeeze"), (lambda x, ax: pf.unsqueeze(x, ax), "unsqueeze"),
]


@pytest.mark.parametrize("call, fn", _AXIS_CALLS)
def test_axis_beyond_int_range_is_a_clear_axis_error(device, call, fn):
    x = make_tensor(random_array((2, 3)), "float32", device)
    for ax in (5, 2**31, -(2**31) - 1, 2**63, 2**100, np.int64(2**40)):
        msg = _raises(ValueError, fn, lambda: call(x, ax), device)
        assert "axis" in msg and "out of range" in msg
        assert "incompatible function arguments" not in msg
    for ax in (1.0, "1", True):
        _raises(ValueError, fn, lambda: call(x, ax), device)  # as every bad axis (test_errors)


@pytest.mark.parametrize("call, fn", [
    (lambda x: pf.softmax(x, None), "softmax"), (lambda x: pf.gather(x, None, x), "gather"),
    (lambda x: pf.concat([x, x], None), "concat"), (lambda x: pf.cumsum(x, None), "cumsum"),
    (lambda x: pf.swapaxes(x, None, 0), "swapaxes"), (lambda x: pf.index_select(x, None, x), "index_select"),
])
def test_none_where_an_axis_is_required_is_a_clear_error(device, call, fn):
    msg = _raises(ValueError, fn, lambda: call(pf.ones(2, 2, device=device)), device)
    assert "incompatible function arguments" not in msg


def test_functional_dim_beyond_int_range(device):
    x = make_tensor(random_array((2, 3)), "float32", device)
    for f, fn in ((pf.nn.functional.softmax, "softmax"), (pf.nn.functional.log_softmax, "log_softmax")):
        for d in (2**31, 2**100):
            assert "out of range" in _raises(ValueError, fn, lambda: f(x, d), device)


def test_numpy_integer_axes_are_accepted(device):
    a = random_array((2, 3))
    x = make_tensor(a, "float32", device)
    assert_close(pf.sum(x, np.int64(1)), a.sum(1), "float32")
    assert_close(pf.softmax(x, np.int32(0)).sum(0), np.ones(3), "float32")
    assert_close(pf.sum(x, (np.int64(0), 1)), a.sum(), "float32")
    assert_close(pf.sum(x, np.array([0, 1])), a.sum(), "float32")


# ------------------------------ scratch space sized by a broadcast input

def _huge_view(*shape, dtype="float32"):
    return pf.broadcast_to(pf.ones(*(1,) * len(shape), dtype=getattr(pf, dtype)), shape)


@pytest.mark.parametrize("call", [
    lambda: (_huge_view(1, 2**50) @ _huge_view(2**50, 1)).item(),
    lambda: (_huge_view(1, 2**50, dtype="float16") @ _huge_view(2**50, 1, dtype="float16")).item(),
    # 64 query rows: the kernel's scratch fails inside its parallel loop.
    lambda: pf.nn.functional.scaled_dot_product_attention(
        pf.ones(1, 1, 64, 4), _huge_view(1, 1, 2**50, 4), _huge_view(1, 1, 2**50, 4)).numpy(),
])
def test_kernel_scratch_beyond_memory_is_out_of_memory(device, call):
    # The output is small, but a CPU kernel's temporary copy of a broadcast
    # operand is not: pf.OutOfMemoryError, not a C++ abort or terminate. The
    # sizes exceed any 64-bit address space (2**48 bytes and up), so the
    # allocation fails even where the kernel overcommits memory.
    if device != "cpu":
        pytest.skip("the CPU kernels' scratch space")
    msg = _raises(pf.OutOfMemoryError, "allocate", call, device)
    assert "out of" in msg


# ------------------------------- construction values beyond the dtype

@pytest.mark.parametrize("data, dtype", [
    ([float("nan")], "int32"), ([float("inf")], "int64"), ([1e20], "int32"), ([-1e20], "int64"),
    ([2**40], "int32"), ([1, -(2**31) - 1], "int32"), (np.array([2**40]), "int32"), (np.array([np.nan]), "int64"),
])
def test_tensor_data_beyond_an_integer_dtype_raises(device, data, dtype):
    torch, _ = torch_or_skip()
    if not isinstance(data, np.ndarray):  # torch checks Python numbers (it casts arrays)
        with pytest.raises((RuntimeError, OverflowError, ValueError)):
            torch.tensor(data, dtype=getattr(torch, dtype))
    msg = _raises(ValueError, "tensor", lambda: pf.tensor(data, dtype=getattr(pf, dtype), device=device), device)
    assert "without overflow" in msg


def test_tensor_data_at_the_integer_edges_converts(device):
    for data, dtype in [([2**31 - 1, -(2**31)], "int32"), ([3.9, -3.9], "int32"), ([2**62], "int64"),
                        (np.array([True, False]), "int32"), ([], "int32")]:
        expected = np.array(data).astype(dtype)
        assert_close(pf.tensor(data, dtype=getattr(pf, dtype), device=device), expected, dtype)


def test_clamp_integer_tensor_with_a_bound_beyond_int64_raises(device):
    torch, _ = torch_or_skip()
    with pytest.raises((RuntimeError, OverflowError)):  # the type varies by PyTorch version
        torch.clamp(torch.tensor([1]), 0, 2**70)
    _raises(ValueError, "clamp", lambda: pf.clamp(pf.tensor([1], device=device), 0, 2**70), device)
    # A float bound promotes instead (test_compare), an int one within range fits.
    assert pf.clamp(pf.tensor([1, 5], device=device), min=-(2.0**70)).dtype == pf.float32
    assert pf.clamp(pf.tensor([1, 5], device=device), max=2**63 - 2**10).numpy().tolist() == [1, 5]
    _raises(ValueError, "clamp", lambda: pf.clamp(pf.tensor([1.0], device=device), "a"), device)


# ------------------------------- integer arguments beyond int64

@pytest.mark.parametrize("call, fn", [
    (lambda v: pf.topk(pf.ones(3), v), "topk"), (lambda v: pf.multinomial(pf.ones(3), v), "multinomial"),
    (lambda v: pf.split(pf.ones(4), v), "split"), (lambda v: pf.slice_update(pf.ones(4), pf.ones(1), v), "slice_update"),
    (lambda v: pf.manual_seed(v * 2), "manual_seed"),
])
def test_integer_argument_beyond_int64_is_a_clear_error(device, call, fn):
    for v in (2**64, -(2**64), 2**100):
        msg = _raises(ValueError, fn, lambda: call(v), device)
        assert "range" in msg and "incompatible function arguments" not in msg
    for v in (1.5, "2", None):
        _raises(ValueError, fn, lambda: call(v) if fn != "manual_seed" else pf.manual_seed(v), device)


def test_manual_seed_takes_torchs_range(device):
    torch, _ = torch_or_skip()
    for seed in (-1, -(2**63), 2**64 - 1, np.int64(7)):
        torch.manual_seed(int(seed))
        pf.manual_seed(seed)
    pf.manual_seed(-1)
    a = pf.rand(4).numpy()
    pf.manual_seed(2**64 - 1)  # -1 modulo 2**64: the same stream
    np.testing.assert_array_equal(a, pf.rand(4).numpy())
