"""matmul with NumPy semantics against float64 NumPy."""
import numpy as np
import pytest

import pyflame as pf
from conftest import assert_close, make_tensor, random_array

SHAPES = [
    ((3, 4), (4, 5)),         # 2-d
    ((1, 7), (7, 1)),
    ((2, 3, 4), (2, 4, 5)),   # batched
    ((2, 3, 4), (4, 5)),      # broadcast batch
    ((4, 5), (3, 5, 2)),
    ((2, 1, 3, 4), (5, 4, 6)),
    ((4,), (4, 5)),           # 1-d x 2-d
    ((3, 4), (4,)),           # 2-d x 1-d
    ((6,), (6,)),             # 1-d x 1-d
    ((4,), (2, 4, 3)),
    ((2, 3, 4), (4,)),
]


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_matmul_shapes(device, shapes):
    a = random_array(shapes[0], "float32")
    b = random_array(shapes[1], "float32")
    ta, tb = make_tensor(a, "float32"), make_tensor(b, "float32")
    want = np.matmul(a, b)
    assert_close(pf.matmul(ta, tb), want, "float32", device=device)
    assert_close(ta @ tb, want, "float32")
    assert_close(ta.matmul(tb), want, "float32")


def test_matmul_larger(device):
    a = random_array((65, 130), "float32", -1, 1)
    b = random_array((130, 97), "float32", -1, 1)
    assert_close(pf.matmul(make_tensor(a, "float32"), make_tensor(b, "float32")), a @ b, "float32",
                 atol=1e-5)


@pytest.mark.parametrize("which", ["a_T", "b_T", "both_T", "sliced", "negative_step", "batch_T",
                                   "broadcast"])
def test_matmul_non_contiguous(device, which):
    A = random_array((6, 8), "float32")
    B = random_array((8, 6), "float32")
    ta, tb = make_tensor(A, "float32"), make_tensor(B, "float32")
    if which == "a_T":
        x, y, nx, ny = ta.T, tb.T, A.T, B.T  # (8,6) @ (6,8)
    elif which == "b_T":
        x, y, nx, ny = ta, make_tensor(A, "float32").T, A, A.T
    elif which == "both_T":
        x, y, nx, ny = tb.T, ta.T, B.T, A.T
    elif which == "sliced":
        x, y, nx, ny = ta[::2, 1::2], tb[::2, :5], A[::2, 1::2], B[::2, :5]
    elif which == "negative_step":
        x, y, nx, ny = ta[::-1, ::-2], tb[::-2, ::-1], A[::-1, ::-2], B[::-2, ::-1]
    elif which == "batch_T":
        C = random_array((3, 4, 5), "float32")
        D = random_array((3, 4, 2), "float32")
        x = make_tensor(C, "float32").transpose(0, 2, 1)
        y = make_tensor(D, "float32").transpose(1, 0, 2)[:, :, ::-1].transpose(1, 0, 2)
        nx, ny = C.transpose(0, 2, 1), D[:, :, ::-1]
    else:
        x = pf.broadcast_to(ta[:1], (4, 8))
        y = pf.broadcast_to(tb[:, 2:3], (8, 3))
        nx, ny = np.broadcast_to(A[:1], (4, 8)), np.broadcast_to(B[:, 2:3], (8, 3))
    assert_close(pf.matmul(x, y), np.matmul(nx, ny), "float32")


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_matmul_int(device, dtype):
    a = random_array((2, 3, 5), dtype, -20, 20)
    b = random_array((5, 4), dtype, -20, 20)
    assert_close(pf.matmul(make_tensor(a), make_tensor(b)), a @ b, dtype, device=device)
    assert_close(pf.matmul(make_tensor(a)[:, ::-1].transpose(0, 2, 1),
                           make_tensor(b.T.copy()).T[::2]),
                 a[:, ::-1].transpose(0, 2, 1) @ b[::2], dtype)


def test_matmul_int_large_values(device):
    a = random_array((3, 4), "int64", -(2**30), 2**30)
    b = random_array((4, 2), "int64", -(2**30), 2**30)
    assert_close(pf.matmul(make_tensor(a), make_tensor(b)), a @ b, "int64")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shapes", [((8, 16), (16, 4)), ((2, 5, 32), (32, 3)), ((16,), (16, 6))],
                         ids=str)
def test_matmul_half(device, dtype, shapes):
    a = random_array(shapes[0], dtype, -1, 1)
    b = random_array(shapes[1], dtype, -1, 1)
    out = pf.matmul(make_tensor(a, dtype), make_tensor(b, dtype))
    # float64 reference of the exact 16-bit inputs: fp32 accumulation,
    # one rounding to the 16-bit output.
    atol = {"float16": 5e-3, "bfloat16": 3e-2}[dtype]
    assert_close(out, a @ b, dtype, atol=atol, device=device)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_matmul_offset_views(device, dtype):
    """Operands starting 0-3 elements into their buffer (pointers of every
    alignment), batched or not, alternating: a GEMM set up for one
    alignment must not be reused for another."""
    base_a = random_array((3, 40, 36), dtype, -1, 1)
    base_b = random_array((3, 36, 44), dtype, -1, 1)
    ta, tb = make_tensor(base_a, dtype), make_tensor(base_b, dtype)
    atol = {"float32": 1e-4, "float64": 1e-10, "float16": 5e-2, "bfloat16": 3e-1}[dtype]
    for _ in range(2):
        for k in range(4):
            x, y = ta[:, k:k + 33, k:k + 32], tb[:, k:k + 32, k:k + 40]
            want = base_a[:, k:k + 33, k:k + 32] @ base_b[:, k:k + 32, k:k + 40]
            assert_close(pf.matmul(x, y), want, dtype, atol=atol, device=device)
            want = base_a[1, k:k + 33, k:k + 32] @ base_b[2, k:k + 32, k:k + 40]
            assert_close(pf.matmul(x[1], y[2]), want, dtype, atol=atol, device=device)


def test_matmul_many_problem_sizes(device):
    """More GEMM problems than a device context keeps plans for (1,024 on
    NVIDIA): the plans start over and every product stays right."""
    rng = np.random.default_rng(5)
    b = rng.standard_normal((8, 6)).astype(np.float32)
    tb = make_tensor(b, "float32")
    for m in range(2, 1100):
        a = rng.standard_normal((m, 8)).astype(np.float32)
        if m % 97 == 0 or m > 1090:
            assert_close(pf.matmul(make_tensor(a, "float32"), tb), a.astype(np.float64) @ b, "float32",
                         device=device)
        else:
            pf.eval(pf.matmul(make_tensor(a, "float32"), tb))


def test_matmul_mixed_dtypes(device):
    a = random_array((3, 4), "int32", -5, 5)
    b = random_array((4, 2), "float16", -2, 2)
    assert_close(pf.matmul(make_tensor(a), make_tensor(b, "float16")), a @ b, "float16")
    c = random_array((4, 2), "float32")
    assert_close(pf.matmul(make_tensor(b.T.copy(), "float16"), make_tensor(c.T.copy(), "float32").T),
                 b.T @ c, "float32", rtol=1e-4)


@pytest.mark.parametrize("shapes", [((3, 0), (0, 4)), ((0,), (0,)), ((2, 0, 5), (5, 3)),
                                    ((0, 5), (5, 2)), ((4, 5), (5, 0))], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_matmul_empty(device, shapes, dtype):
    a = random_array(shapes[0], dtype)
    b = random_array(shapes[1], dtype)
    assert_close(pf.matmul(make_tensor(a, dtype), make_tensor(b, dtype)), np.matmul(a, b), dtype)


def test_matmul_k0_after_other_work(device):
    # K = 0 must give exact zeros even when the output buffer is reused memory
    for _ in range(3):
        junk = pf.full((3, 4), float(np.random.uniform(1, 9))) * 2
        junk.eval()
        del junk
        assert_close(pf.matmul(pf.ones((3, 0)), pf.ones((0, 4))), np.zeros((3, 4)), "float32")


def test_matmul_errors(device):
    with pytest.raises(ValueError) as e:
        pf.matmul(pf.zeros((2, 3)), pf.zeros((4, 5)))
    assert str(e.value) == "[matmul] shapes (2,3) and (4,5) do not align"
    with pytest.raises(ValueError) as e:
        pf.zeros((2, 3)) @ pf.zeros((4, 5))
    assert str(e.value) == "[matmul] shapes (2,3) and (4,5) do not align"
    with pytest.raises(ValueError, match=r"^\[matmul\] shapes \(3,\) and \(4,\) do not align"):
        pf.matmul(pf.zeros(3), pf.zeros(4))
    with pytest.raises(ValueError, match=r"^\[matmul\]"):
        pf.matmul(pf.zeros((2, 2, 3)), pf.zeros((3, 3, 4)))  # batch 2 vs 3
    with pytest.raises(ValueError, match=r"^\[matmul\]"):
        pf.matmul(pf.tensor(2.0), pf.zeros(3))
    with pytest.raises(ValueError, match=r"^\[matmul\]"):
        pf.matmul(pf.ones(3, dtype="bool"), pf.ones(3, dtype="bool"))
