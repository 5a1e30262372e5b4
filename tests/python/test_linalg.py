"""pf.linalg (the Array API's linalg extension) against NumPy: decompositions
on the CPU (LAPACK) and the GPU (hipSOLVER / cuSOLVER) over float32 and
float64, the rest as op compositions on every device."""
import numpy as np
import pytest

import pyflame as pf
from conftest import device_kind, random_array, rounded

la = pf.linalg


DTYPES = ["float32", "float64"]


def T(a, device="cpu", dtype="float32"):
    a = np.asarray(a)
    if a.dtype.kind == "f":
        a = a.astype(np.float64 if dtype == "float64" else np.float32)
    return pf.tensor(a, device=device)


def close(t, want, rtol=1e-4, atol=1e-4):
    np.testing.assert_allclose(t.numpy(), want, rtol=rtol, atol=atol)


def near(t, want, dtype, device, scale=1.0):
    """t (of `dtype`, on `device`) against a float64 NumPy reference, with a
    tolerance for the dtype (scaled for results of worse conditioning)."""
    assert str(t.dtype) == dtype and t.device.split(":")[0] == device_kind(device), (t.dtype, t.device)
    tol = (1e-10 if dtype == "float64" else 1e-4) * scale
    np.testing.assert_allclose(t.numpy().astype(np.float64), want, rtol=tol, atol=tol)


def spd(n, batch=()):
    """Symmetric positive definite, exactly representable in float32."""
    a = np.random.uniform(-1, 1, size=batch + (n, n))
    return rounded(a @ np.swapaxes(a, -1, -2) + n * np.eye(n), "float32")


def well(n, batch=()):
    """General and well conditioned (a dominant diagonal), exact in float32."""
    return random_array(batch + (n, n)) + 3 * n * np.eye(n)


def mT(a):
    return np.swapaxes(a, -1, -2)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", [(), (3,), (2, 2), (0,)])
def test_decompositions(device, dtype, batch):
    a, g, b = spd(4, batch), well(4, batch), random_array(batch + (4, 2))
    ta, tg = T(a, device, dtype), T(g, device, dtype)
    near(la.cholesky(ta), np.linalg.cholesky(a), dtype, device)
    near(la.cholesky(ta, upper=True), mT(np.linalg.cholesky(a)), dtype, device)
    near(la.inv(tg), np.linalg.inv(g), dtype, device)
    near(la.det(tg), np.linalg.det(g), dtype, device, 100)
    sign, logabs = la.slogdet(tg)
    ws, wl = np.linalg.slogdet(g)
    np.testing.assert_array_equal(sign.numpy(), ws)
    near(logabs, wl, dtype, device)
    near(la.solve(tg, T(b, device, dtype)), np.linalg.solve(g, b), dtype, device)
    w, v = la.eigh(ta)
    ww = np.linalg.eigvalsh(a)
    near(w, ww, dtype, device, 10)
    near(la.eigvalsh(ta), ww, dtype, device, 10)
    # Eigenvectors up to sign: A v = w v, orthonormal.
    vn = v.numpy().astype(np.float64)
    np.testing.assert_allclose(a @ vn, vn * w.numpy()[..., None, :], atol=2e-3 if dtype == "float32" else 1e-9)
    np.testing.assert_allclose(mT(vn) @ vn, np.broadcast_to(np.eye(4), vn.shape),
                               atol=1e-5 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
# Single matrices, stacks of small ones (batched on the GPU) and of larger ones.
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4), (2, 1, 6, 2), (3, 2, 5), (2, 40, 3), (0, 3, 2)])
def test_qr_svd(device, dtype, shape):
    a = random_array(shape)
    t = T(a, device, dtype)
    eps = 1e-4 if dtype == "float32" else 1e-10
    for mode in ("reduced", "complete"):
        q, r = la.qr(t, mode=mode)
        wq, wr = np.linalg.qr(a, mode=mode)
        assert q.shape == wq.shape and r.shape == wr.shape
        near(q @ r, a, dtype, device)
        np.testing.assert_array_equal(np.triu(r.numpy()), r.numpy())
        k = q.shape[-1]
        near(pf.linalg.matrix_transpose(q) @ q, np.broadcast_to(np.eye(k), q.shape[:-2] + (k, k)), dtype, device)
        # Q and R are unique up to the signs of R's diagonal.
        d = np.sign(np.diagonal(r.numpy(), axis1=-2, axis2=-1))[..., :min(shape[-2:])]
        wd = np.sign(np.diagonal(wr, axis1=-2, axis2=-1))[..., :min(shape[-2:])]
        kk = d.shape[-1]
        np.testing.assert_allclose(q.numpy()[..., :kk] * d[..., None, :], wq[..., :kk] * wd[..., None, :],
                                   atol=100 * eps)
    for full in (True, False):
        u, s, vh = la.svd(t, full_matrices=full)
        wu, ws, wvh = np.linalg.svd(a, full_matrices=full)
        assert u.shape == wu.shape and vh.shape == wvh.shape and s.shape == ws.shape
        near(s, ws, dtype, device, 10)
        k = s.shape[-1]
        near((u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :], a, dtype, device, 10)
        # Orthonormal columns of U and rows of Vh, the full factors' included.
        for f in (u.numpy().astype(np.float64), mT(vh.numpy().astype(np.float64))):
            c = f.shape[-1]
            np.testing.assert_allclose(mT(f) @ f, np.broadcast_to(np.eye(c), f.shape[:-2] + (c, c)), atol=10 * eps)
    near(la.svdvals(t), np.linalg.svd(a, compute_uv=False), dtype, device, 10)
    near(la.pinv(t), np.linalg.pinv(a), dtype, device, 100)
    np.testing.assert_array_equal(la.matrix_rank(t).numpy(), np.linalg.matrix_rank(a))


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_of_a_stack_of_larger_matrices(device, dtype):
    a = spd(40, (2,))
    w, v = la.eigh(T(a, device, dtype))
    near(w, np.linalg.eigvalsh(a), dtype, device, 10)
    vn = v.numpy().astype(np.float64)
    np.testing.assert_allclose(a @ vn, vn * w.numpy()[..., None, :], atol=1e-2 if dtype == "float32" else 1e-8)


@pytest.mark.parametrize("dtype", DTYPES)
def test_symmetric_routines_read_one_triangle(device, dtype):
    # As PyTorch: eigh and cholesky read the lower triangle, cholesky(upper=True) the upper one.
    a = spd(4, (2,))
    junk = np.triu(random_array((2, 4, 4)) + 50, 1)
    t = T(a + junk, device, dtype)
    near(la.cholesky(t), np.linalg.cholesky(a), dtype, device)
    near(la.eigvalsh(t), np.linalg.eigvalsh(a), dtype, device, 10)
    near(la.cholesky(T(a + mT(junk), device, dtype), upper=True), mT(np.linalg.cholesky(a)), dtype, device)


@pytest.mark.parametrize("dtype", DTYPES)
def test_noncontiguous_inputs(device, dtype):
    g, a = well(3, (4,)), spd(3, (4,))
    # Transposed views and a strided batch.
    tg = la.matrix_transpose(T(mT(g), device, dtype))
    near(la.inv(tg), np.linalg.inv(g), dtype, device)
    near(la.det(T(g, device, dtype)[::2]), np.linalg.det(g[::2]), dtype, device, 100)
    near(la.cholesky(la.matrix_transpose(T(a, device, dtype))), np.linalg.cholesky(a), dtype, device)
    b = random_array((4, 2, 3))
    near(la.solve(tg, la.matrix_transpose(T(b, device, dtype))), np.linalg.solve(g, mT(b)), dtype, device)
    x = random_array((6, 4))
    near(la.svdvals(la.matrix_transpose(T(x, device, dtype))), np.linalg.svd(x.T, compute_uv=False), dtype, device, 10)
    near(pf.abs(la.qr(T(x, device, dtype)[::2]).R), np.abs(np.linalg.qr(x[::2])[1]), dtype, device)


@pytest.mark.parametrize("dtype", DTYPES)
def test_zero_by_zero_matrices(device, dtype):
    t = T(np.zeros((2, 0, 0)), device, dtype)
    near(la.det(t), np.ones(2), dtype, device)
    sign, logabs = la.slogdet(t)
    near(sign, np.ones(2), dtype, device)
    near(logabs, np.zeros(2), dtype, device)
    z = np.zeros((2, 0, 0))
    for f, ref in ((la.inv, np.linalg.inv), (la.cholesky, np.linalg.cholesky), (la.eigvalsh, np.linalg.eigvalsh)):
        assert f(t).numpy().shape == ref(z).shape


@pytest.mark.parametrize("dtype", DTYPES)
def test_rank_deficient_and_singular(device, dtype):
    a = np.outer([1.0, 2.0, 3.0], [1.0, -1.0, 2.0])
    assert int(la.matrix_rank(T(a, device, dtype), rtol=1e-5).numpy()) == 1  # a margin over float32's rounding
    # A zero column: exactly singular whatever the order of the elimination.
    z = np.array([[1.0, 0.0, 2.0], [3.0, 0.0, 4.0], [5.0, 0.0, 7.0]])
    sign, logabs = la.slogdet(T(z, device, dtype))
    assert sign.numpy() == 0 and logabs.numpy() == -np.inf
    assert la.det(T(z, device, dtype)).numpy() == 0
    stack = T(np.stack([np.eye(3), z]), device, dtype)
    np.testing.assert_array_equal(la.det(stack).numpy(), [1, 0])
    with pytest.raises(ValueError, match=r"\[linalg.inv\] the matrix is singular"):
        la.inv(stack).numpy()
    with pytest.raises(ValueError, match=r"\[linalg.solve\] the matrix is singular"):
        la.solve(T(z, device, dtype), T(np.ones(3), device, dtype)).numpy()
    with pytest.raises(ValueError, match=r"\[linalg.cholesky\] the matrix is not positive definite"):
        la.cholesky(T(np.stack([spd(3), -np.eye(3)]), device, dtype)).numpy()
    with pytest.raises(ValueError, match=r"\[linalg.det\]"):
        la.det(T(np.ones((2, 3)), device, dtype))
    near(la.inv(T(np.eye(2), device, dtype)), np.eye(2), dtype, device)  # still usable


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_vector_and_broadcast(device, dtype):
    a = random_array((2, 1, 3, 3)) + 9 * np.eye(3)
    b = random_array((4, 3, 1))
    want = np.linalg.solve(np.broadcast_to(a, (2, 4, 3, 3)), np.broadcast_to(b, (2, 4, 3, 1)))
    near(la.solve(T(a, device, dtype), T(b, device, dtype)), want, dtype, device)
    v = random_array((3,))
    near(la.solve(T(a[0, 0], device, dtype), T(v, device, dtype)), np.linalg.solve(a[0, 0], v), dtype, device)
    with pytest.raises(ValueError, match=r"\[linalg.solve\]"):
        la.solve(T(a, device, dtype), T(random_array((4,)), device, dtype))


def ref_vector_norm(a, axis, ord):
    x = np.abs(a)
    if ord == np.inf:
        return x.max(axis=axis)
    if ord == -np.inf:
        return x.min(axis=axis)
    if ord == 0:
        return (x != 0).sum(axis=axis).astype(np.float64)
    return (x ** ord).sum(axis=axis) ** (1.0 / ord)


def test_norms_and_compositions(device):
    a = random_array((2, 3, 4))
    t = T(a, device)
    for ord in (2, 1, np.inf, -np.inf, 0, 3, -1.5):
        for axis in (None, -1, (0, 2)):
            close(la.vector_norm(t, axis=axis, ord=ord), ref_vector_norm(a, axis, ord), rtol=1e-4, atol=1e-5)
    close(la.vector_norm(t, axis=()), np.abs(a))
    for ord in ("fro", 1, -1, np.inf, -np.inf, 2, -2, "nuc"):
        close(la.matrix_norm(t, ord=ord), np.linalg.norm(a, ord=ord, axis=(-2, -1)))
    close(la.matrix_norm(t, keepdims=True), np.linalg.norm(a, axis=(-2, -1), keepdims=True))
    close(la.trace(t), np.trace(a, axis1=-2, axis2=-1))
    for off in (-2, 0, 1, 5):
        close(la.diagonal(t, offset=off), np.diagonal(a, offset=off, axis1=-2, axis2=-1))
    u, v = random_array((4,)), random_array((5,))
    close(la.outer(T(u, device), T(v, device)), np.outer(u, v))
    x, y = random_array((2, 3)), random_array((3,))
    close(la.cross(T(x, device), T(y, device)), np.cross(x, y))
    m = random_array((3, 3)) / 3
    close(la.matrix_power(T(m, device), 3), np.linalg.matrix_power(m, 3))
    close(la.matrix_power(T(m, device), 0), np.eye(3))


def test_compositions_differentiate(device):
    from gradcheck import check_vs_torch
    torch = pytest.importorskip("torch")
    a = random_array((3, 4))
    check_vs_torch(lambda x: la.vector_norm(x, axis=1), lambda x: torch.linalg.vector_norm(x, dim=1), [a], device)
    check_vs_torch(lambda x: la.trace(x), lambda x: torch.trace(x), [a], device)


@pytest.mark.parametrize("dtype", DTYPES)
def test_decomposition_grads_match_torch(device, dtype):
    from gradcheck import check_vs_torch
    torch = pytest.importorskip("torch")
    g = well(3, (2,))
    b = random_array((2, 3, 2))
    s = spd(3, (2,))
    tol = dict(rtol=1e-3, atol=1e-4) if dtype == "float32" else dict(rtol=1e-9, atol=1e-10)
    check = lambda f, tf, xs, **kw: check_vs_torch(f, tf, xs, device, dtype=dtype, **{**tol, **kw})  # noqa: E731
    check(la.inv, torch.linalg.inv, [g])
    check(la.det, torch.linalg.det, [g], atol=1e-2 if dtype == "float32" else 1e-9)
    check(lambda x: la.slogdet(x).logabsdet, lambda x: torch.linalg.slogdet(x).logabsdet, [g])
    check(la.solve, torch.linalg.solve, [g, b])
    for upper in (False, True):
        check(lambda x: la.cholesky(x, upper=upper), lambda x: torch.linalg.cholesky(x, upper=upper), [s])
    check(la.eigvalsh, torch.linalg.eigvalsh, [s])
    # Eigenvectors up to sign: a sign-invariant function of them.
    check(lambda x: la.eigh(x).eigenvectors ** 2, lambda x: torch.linalg.eigh(x).eigenvectors ** 2, [s])
    with pytest.raises(ValueError, match=r"not differentiable"):
        x = T(s, device, dtype)
        x.requires_grad = True
        pf.sum(la.svdvals(x)).backward()
