"""Gradients of the index family: concat/stack/split, gather, index_select,
embedding (padding_idx), pad (every mode) and dropout, against torch and
finite differences on every device."""
import numpy as np
import pytest

import pyflame as pf
from conftest import random_array
from gradcheck import check_finite_differences, check_vs_torch

torch = pytest.importorskip("torch")
F = torch.nn.functional

LOW_PRECISION = [("float16", 2e-2, 2e-2), ("bfloat16", 6e-2, 6e-2)]


# ---------------------------------------------------------------- concat / stack / split

@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_concat_grad(device, axis):
    shapes = [[3, 4, 5], [3, 4, 5], [3, 4, 5]]
    for i, s in enumerate(shapes):
        s[axis] = i + 1
    xs = [random_array(s) for s in shapes]
    check_vs_torch(lambda *t: pf.concat(list(t), axis=axis), lambda *t: torch.cat(t, axis),
                   xs, device)
    check_finite_differences(lambda *t: pf.cat(list(t), axis), xs, device, dtype="float64")


def test_concat_grad_some_inputs(device):
    a, b, c = random_array((2, 3)), random_array((2, 1)), random_array((2, 4))
    check_vs_torch(lambda x, y, z: pf.cat([x, y, z], 1), lambda x, y, z: torch.cat([x, y, z], 1),
                   [a, b, c], device, grad_mask=[False, True, False])


def test_concat_grad_reused_input_and_promotion(device):
    a = random_array((2, 3))
    check_vs_torch(lambda x: pf.cat([x, x * 2, x], 0), lambda x: torch.cat([x, x * 2, x], 0),
                   [a], device)
    # float16 joined with float32 promotes; the float16 input gets a float16 gradient
    x = pf.tensor(a.astype(np.float16), device=device, requires_grad=True)
    y = pf.tensor(a.astype(np.float32), device=device, requires_grad=True)
    out = pf.cat([x, y], 1)
    assert out.dtype == pf.float32
    (out * 3.0).sum().backward()
    assert x.grad.dtype == pf.float16
    np.testing.assert_array_equal(x.grad.astype("float32").numpy(), np.full((2, 3), 3.0))
    np.testing.assert_array_equal(y.grad.numpy(), np.full((2, 3), 3.0))


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_stack_grad(device, axis):
    xs = [random_array((3, 4)) for _ in range(3)]
    check_vs_torch(lambda *t: pf.stack(list(t), axis), lambda *t: torch.stack(t, axis), xs, device)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("sizes", [2, [1, 3, 2]])
def test_split_grad(device, axis, sizes):
    x = random_array((6, 6, 6))

    def weighted(pieces, cat):  # every piece scaled differently, so a mix-up shows
        return cat([p * float(i + 1) for i, p in enumerate(pieces)], axis)

    check_vs_torch(lambda t: weighted(pf.split(t, sizes, axis), pf.cat),
                   lambda t: weighted(torch.split(t, sizes, axis), torch.cat), [x], device)


def test_split_grad_unused_piece(device):
    x = random_array((5, 4))
    check_vs_torch(lambda t: pf.split(t, [2, 3], 0)[1] * 2.0,
                   lambda t: torch.split(t, [2, 3], 0)[1] * 2.0, [x], device)


# ---------------------------------------------------------------- gather family

@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2])
@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64])
def test_gather_grad_duplicates(device, axis, idx_dtype):
    x = random_array((4, 5, 6))
    ishape = [3, 4, 5]  # smaller than x off the axis
    ishape[axis] = 7    # more entries than the axis: duplicates guaranteed
    index = np.random.randint(0, x.shape[axis], size=ishape).astype(idx_dtype)
    check_vs_torch(lambda t, i: pf.gather(t, axis, i),
                   lambda t, i: torch.gather(t, axis, i.long()), [x, index], device)
    check_finite_differences(lambda t, i: pf.gather(t, axis, i), [x, index], device,
                             dtype="float64")


def test_gather_grad_all_one_index(device):
    x = random_array((3, 4))
    index = np.zeros((5, 4), np.int64)  # every row gathers row 0: sums of 5
    check_vs_torch(lambda t, i: pf.gather(t, 0, i), lambda t, i: torch.gather(t, 0, i),
                   [x, index], device)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_index_select_grad(device, axis):
    x = random_array((4, 5, 3))
    index = np.array([0, 2, 2, 1, 0, 2], np.int64)
    index = index[index < x.shape[axis]]
    check_vs_torch(lambda t, i: pf.index_select(t, axis, i),
                   lambda t, i: torch.index_select(t, axis, i), [x, index], device)
    check_finite_differences(lambda t, i: pf.index_select(t, axis, i), [x, index], device,
                             dtype="float64")


def test_index_select_grad_scalar_index(device):
    x = random_array((4, 3))
    index = np.array(2, np.int64)
    check_vs_torch(lambda t, i: pf.index_select(t, 0, i),
                   lambda t, i: torch.index_select(t, 0, i), [x, index], device)


@pytest.mark.parametrize("padding_idx", [None, 0, 3, -1])
@pytest.mark.parametrize("ishape", [(7,), (3, 5), (2, 2, 3)])
def test_embedding_grad(device, padding_idx, ishape):
    w = random_array((6, 4))
    idx = np.random.randint(0, 6, size=ishape).astype(np.int64)
    if padding_idx is not None:
        idx.flat[::2] = padding_idx % 6  # the padding row is looked up, and gets no gradient
    check_vs_torch(lambda i, t: pf.embedding(i, t, padding_idx),
                   lambda i, t: F.embedding(i, t, padding_idx), [idx, w], device)


def test_embedding_padding_row_gets_no_gradient(device):
    w = pf.tensor(np.ones((4, 2), np.float32), device=device, requires_grad=True)
    idx = pf.tensor(np.array([[1, 1, 3], [1, 0, 0]], np.int32), device=device)
    pf.embedding(idx, w, padding_idx=1).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [[2, 2], [0, 0], [0, 0], [1, 1]])


def test_embedding_grad_non_contiguous_indices(device):
    w = random_array((5, 3))
    idx = np.random.randint(0, 5, size=(4, 6)).astype(np.int64)
    check_vs_torch(lambda i, t: pf.embedding(i.T, t), lambda i, t: F.embedding(i.T, t),
                   [idx, w], device)
    check_finite_differences(lambda i, t: pf.embedding(i.T, t), [idx, w], device, dtype="float64")


def test_gather_backward_range_error(device):
    w = pf.tensor(np.ones((4, 2), np.float32), device=device, requires_grad=True)
    out = pf.embedding(pf.tensor(np.array([0, 9]), device=device), w)
    with pytest.raises(IndexError, match="out of range for an embedding of 4 rows"):
        out.sum().backward()  # the forward is never evaluated: the backward checks too
    x = pf.tensor(np.ones((3, 2), np.float32), device=device, requires_grad=True)
    out = pf.gather(x, 0, pf.tensor(np.array([[0, -1]]), device=device))
    with pytest.raises(IndexError, match="out of bounds for axis 0 with size 3"):
        out.sum().backward()


def test_gather_index_gets_no_gradient(device):
    x = pf.tensor(np.ones((3, 2), np.float32), device=device, requires_grad=True)
    idx = pf.tensor(np.array([[0, 2]]), device=device)
    with pytest.raises(ValueError, match="requires_grad|floating|integer"):
        idx.requires_grad = True
    out = pf.gather(x, 0, idx)
    (gx,) = pf.grad(out.sum(), [x])
    np.testing.assert_array_equal(gx.numpy(), [[1, 0], [0, 0], [0, 1]])


@pytest.mark.parametrize("dtype,rtol,atol", LOW_PRECISION)
def test_gather_family_grad_low_precision(device, dtype, rtol, atol):
    w = random_array((6, 4))
    idx = np.random.randint(0, 6, size=(5, 3)).astype(np.int64)
    check_vs_torch(lambda i, t: pf.embedding(i, t, 1), lambda i, t: F.embedding(i, t, 1),
                   [idx, w], device, rtol=rtol, atol=atol, dtype=dtype)
    x = random_array((4, 5))
    index = np.random.randint(0, 4, size=(9, 5)).astype(np.int64)
    check_vs_torch(lambda t, i: pf.gather(t, 0, i), lambda t, i: torch.gather(t, 0, i),
                   [x, index], device, rtol=rtol, atol=atol, dtype=dtype)


def test_gather_family_grad_wide_rows(device):
    # rows longer than the CPU's column blocks, and a non-contiguous cotangent
    w = random_array((7, 150))
    idx = np.random.randint(0, 7, size=(3, 11)).astype(np.int64)
    check_vs_torch(lambda i, t: pf.embedding(i, t, 3), lambda i, t: F.embedding(i, t, 3),
                   [idx, w], device)
    x = random_array((5, 130))
    index = np.random.randint(0, 5, size=(9, 130)).astype(np.int32)
    check_vs_torch(lambda t, i: pf.gather(t, 0, i).T * 2.0,
                   lambda t, i: torch.gather(t, 0, i.long()).T * 2.0, [x, index], device)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_scatter_accumulates_16_bit_in_float32(device, dtype):
    # 3072 ones (exact in both): a 16-bit running sum would stall at 2048
    # (float16) or 256 (bfloat16)
    w = pf.detach(pf.ones(4, 2, device=device).astype(dtype))
    w.requires_grad = True
    idx = pf.tensor(np.full(3072, 2, np.int64), device=device)
    pf.embedding(idx, w).sum().backward()
    np.testing.assert_array_equal(w.grad.astype("float32").numpy(),
                                  [[0, 0], [0, 0], [3072, 3072], [0, 0]])


def test_scatter_add_is_deterministic_on_cpu():
    x = pf.tensor(np.random.randn(50, 8).astype(np.float32), requires_grad=True)
    idx = pf.tensor(np.random.randint(0, 50, size=(4000, 8)), dtype=pf.int64)
    cot = pf.tensor(np.random.randn(4000, 8).astype(np.float32))
    grads = [pf.grad(pf.gather(x, 0, idx), [x], [cot])[0].numpy() for _ in range(3)]
    assert all(np.array_equal(g, grads[0]) for g in grads)


# ---------------------------------------------------------------- pad

def torch_pad(t, pads, mode="constant", value=0.0):
    """F.pad for any input rank: torch's non-constant modes take exactly one
    batch and one channel axis ahead of the 1-3 padded ones."""
    if mode == "constant":
        return F.pad(t, pads, value=value)
    k = len(pads) // 2
    lead = t.shape[:t.dim() - k]
    y = F.pad(t.reshape(1, -1, *t.shape[t.dim() - k:]), pads, mode)
    return y.reshape(*lead, *y.shape[2:])


# (input shape, pad)
PAD_CASES = [
    ((2, 3, 5), (2, 1)),
    ((3, 5), (0, 4)),
    ((2, 3, 4, 5), (1, 2, 3, 0)),
    ((2, 3, 4, 5), (3, 3, 2, 2)),
    ((2, 2, 3, 4, 5), (1, 2, 0, 1, 2, 1)),
]


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape,pads", PAD_CASES)
def test_pad_grad(device, mode, shape, pads):
    x = random_array(shape)
    check_vs_torch(lambda t: pf.pad(t, pads, mode), lambda t: torch_pad(t, pads, mode), [x], device)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_grad_finite_differences(device, mode):
    x = random_array((2, 3, 4))
    check_finite_differences(lambda t: pf.pad(t, (2, 1, 1, 2), mode), [x], device, dtype="float64")


def test_pad_grad_wide_replicate_and_full_circular(device):
    x = random_array((2, 3, 3))
    for mode, pads in [("replicate", (7, 5, 4, 6)), ("circular", (3, 3, 3, 0)),
                       ("reflect", (2, 2, 2, 2))]:
        check_vs_torch(lambda t: pf.pad(t, pads, mode), lambda t: torch_pad(t, pads, mode), [x],
                       device)


def test_pad_grad_size_one_axes(device):
    x = random_array((2, 1, 1))
    for mode in ["replicate", "circular"]:
        check_vs_torch(lambda t: pf.pad(t, (1, 1, 1, 0), mode),
                       lambda t: torch_pad(t, (1, 1, 1, 0), mode), [x], device)


def test_pad_grad_constant_crop_and_value(device):
    x = random_array((3, 4, 5))
    for pads in [(-1, 2), (2, -3, -1, 1), (-1, -1, 0, 0, 1, 1)]:
        check_vs_torch(lambda t: pf.pad(t, pads, value=1.5),
                       lambda t: F.pad(t, pads, value=1.5), [x], device)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_grad_crop_non_constant(device, mode):
    # Cropping one side while padding the other: checked against the
    # definition (finite differences and the adjoint of pad itself).
    x = random_array((2, 4, 5))
    pads = (-2, 3, 1, -1)
    check_finite_differences(lambda t: pf.pad(t, pads, mode), [x], device, dtype="float64")
    xt = pf.tensor(x.astype(np.float32), device=device, requires_grad=True)
    y = pf.pad(xt, pads, mode)
    cot = np.random.uniform(-1, 1, size=tuple(y.shape)).astype(np.float32)
    y.backward(pf.tensor(cot, device=device))
    probe = np.random.uniform(-1, 1, size=x.shape).astype(np.float32)
    lhs = float((pf.pad(pf.tensor(probe, device=device), pads, mode).numpy() * cot).sum())
    rhs = float((xt.grad.numpy() * probe).sum())
    assert abs(lhs - rhs) <= 1e-4 * max(1.0, abs(lhs))


def test_pad_grad_many_leading_axes(device):
    x = random_array((2, 1, 2, 1, 2, 3))
    check_vs_torch(lambda t: pf.pad(t, (1, 2, 0, 1)), lambda t: F.pad(t, (1, 2, 0, 1)), [x],
                   device)
    check_vs_torch(lambda t: pf.pad(t, (1, 2), "replicate").reshape(-1, 6),
                   lambda t: F.pad(t.reshape(8, 1, 3), (1, 2), "replicate").reshape(-1, 6), [x],
                   device)


@pytest.mark.parametrize("dtype,rtol,atol", LOW_PRECISION)
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_grad_low_precision(device, dtype, rtol, atol, mode):
    x = random_array((2, 3, 4, 5))
    check_vs_torch(lambda t: pf.pad(t, (2, 1, 1, 3), mode),
                   lambda t: torch_pad(t, (2, 1, 1, 3), mode), [x], device, rtol=rtol, atol=atol,
                   dtype=dtype)


# ---------------------------------------------------------------- dropout

@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("p", [0.2, 0.5, 0.9])
def test_dropout_grad_uses_the_forward_mask(device, dtype, p):
    x = pf.tensor(np.random.uniform(1, 2, size=(37, 29)).astype(np.float32), device=device)
    x = pf.detach(x.astype(dtype))
    x.requires_grad = True
    y = pf.dropout(x, p)
    cot = np.random.uniform(-1, 1, size=(37, 29)).astype(np.float32)
    y.backward(pf.tensor(cot, device=device).astype(dtype))
    kept = y.astype("float32").numpy() != 0  # inputs are never 0
    assert 0 < kept.sum() < kept.size
    scale = 1.0 / (1.0 - p)
    cot_in = pf.tensor(cot, device=device).astype(dtype).astype("float32").numpy()
    want = pf.tensor(np.where(kept, cot_in * scale, 0).astype(np.float32)).astype(dtype)
    np.testing.assert_array_equal(x.grad.astype("float32").numpy(),
                                  want.astype("float32").numpy())


def test_dropout_grad_through_views_and_finite_differences(device):
    x = random_array((6, 8))

    def f(t):  # a fixed key per call, so every evaluation draws the same mask
        pf.manual_seed(123)
        return pf.dropout(t.T * 2.0, 0.4)[1:, ::2]

    check_finite_differences(f, [x], device, dtype="float64")
    xt = pf.tensor(x.astype(np.float32), device=device, requires_grad=True)
    y = f(xt)
    y.sum().backward()
    mask = np.zeros((8, 6))
    mask[1:, ::2] = (y.numpy() != 0)
    np.testing.assert_allclose(xt.grad.numpy(), (mask * 2.0 / 0.6).T, rtol=1e-6)


def test_dropout_eval_mode_grad_is_identity(device):
    x = random_array((4, 5))
    check_vs_torch(lambda t: pf.dropout(t, 0.5, training=False),
                   lambda t: F.dropout(t, 0.5, training=False), [x], device)
