"""pf.linalg (the Array API's linalg extension) against NumPy: decompositions
through LAPACK on the CPU, the rest as op compositions on every device."""
import numpy as np
import pytest

import pyflame as pf
from conftest import random_array

la = pf.linalg


def T(a, device="cpu"):
    return pf.tensor(np.asarray(a, dtype=np.float32) if np.asarray(a).dtype.kind == "f" else a, device=device)


def close(t, want, rtol=1e-4, atol=1e-4):
    np.testing.assert_allclose(t.numpy(), want, rtol=rtol, atol=atol)


def spd(n, batch=()):
    a = np.random.uniform(-1, 1, size=batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_decompositions(batch):
    a = spd(4, batch)
    g = random_array(batch + (4, 4))
    close(la.cholesky(T(a)), np.linalg.cholesky(a))
    close(la.cholesky(T(a), upper=True), np.swapaxes(np.linalg.cholesky(a), -1, -2))
    close(la.inv(T(g)), np.linalg.inv(g.astype(np.float32)), rtol=1e-3, atol=1e-3)
    close(la.det(T(g)), np.linalg.det(g), rtol=1e-4, atol=1e-3)
    sign, logabs = la.slogdet(T(g))
    ws, wl = np.linalg.slogdet(g)
    np.testing.assert_array_equal(sign.numpy(), ws)
    close(logabs, wl)
    b = random_array(batch + (4, 2))
    close(la.solve(T(g), T(b)), np.linalg.solve(g, b), rtol=1e-3, atol=1e-3)
    w, v = la.eigh(T(a))
    ww = np.linalg.eigvalsh(a)
    close(w, ww, rtol=1e-4, atol=1e-3)
    close(la.eigvalsh(T(a)), ww, rtol=1e-4, atol=1e-3)
    # Eigenvectors up to sign: A v = w v, orthonormal.
    vn = v.numpy().astype(np.float64)
    np.testing.assert_allclose(a @ vn, vn * w.numpy()[..., None, :], atol=2e-3)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
def test_qr_svd(shape):
    a = random_array(shape)
    for mode in ("reduced", "complete"):
        q, r = la.qr(T(a), mode=mode)
        wq, wr = np.linalg.qr(a, mode=mode)
        assert q.shape == wq.shape and r.shape == wr.shape
        close(q @ r, a, atol=1e-4)
        np.testing.assert_allclose(np.triu(r.numpy()), r.numpy())
        k = q.shape[-1]
        close(pf.linalg.matrix_transpose(q) @ q, np.broadcast_to(np.eye(k), q.shape[:-2] + (k, k)), atol=1e-5)
    for full in (True, False):
        u, s, vh = la.svd(T(a), full_matrices=full)
        wu, ws, wvh = np.linalg.svd(a, full_matrices=full)
        assert u.shape == wu.shape and vh.shape == wvh.shape
        close(s, ws)
        k = s.shape[-1]
        close((u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :], a, atol=1e-4)
    close(la.svdvals(T(a)), np.linalg.svd(a, compute_uv=False))
    close(la.pinv(T(a)), np.linalg.pinv(a), rtol=1e-3, atol=1e-3)
    np.testing.assert_array_equal(la.matrix_rank(T(a)).numpy(), np.linalg.matrix_rank(a))


def test_rank_deficient_and_singular():
    a = np.outer([1.0, 2.0, 3.0], [1.0, -1.0, 2.0])
    assert int(la.matrix_rank(T(a)).numpy()) == 1
    sign, logabs = la.slogdet(T(a))
    assert sign.numpy() == 0 and logabs.numpy() == -np.inf
    assert la.det(T(a)).numpy() == 0
    with pytest.raises(ValueError, match=r"\[linalg.inv\] the matrix is singular"):
        la.inv(T(a)).numpy()
    with pytest.raises(ValueError, match=r"\[linalg.cholesky\]"):
        la.cholesky(T(-np.eye(3))).numpy()
    with pytest.raises(ValueError, match=r"\[linalg.det\]"):
        la.det(T(np.ones((2, 3))))
    close(la.inv(T(np.eye(2))), np.eye(2))  # still usable


def test_solve_vector_and_broadcast():
    a = random_array((2, 1, 3, 3)) + 4 * np.eye(3)
    b = random_array((4, 3, 1))
    want = np.linalg.solve(np.broadcast_to(a, (2, 4, 3, 3)), np.broadcast_to(b, (2, 4, 3, 1)))
    close(la.solve(T(a), T(b)), want, rtol=1e-3, atol=1e-3)
    v = random_array((3,))
    close(la.solve(T(a[0, 0]), T(v)), np.linalg.solve(a[0, 0], v), rtol=1e-3, atol=1e-3)
    with pytest.raises(ValueError, match=r"\[linalg.solve\]"):
        la.solve(T(a), T(random_array((4,))))


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
    for ord in ("fro", 1, -1, np.inf, -np.inf):
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


def test_gpu_decompositions_raise(gpu_device):
    with pytest.raises(RuntimeError, match=r"\[linalg.inv\] not implemented on the rocm backend"):
        la.inv(pf.eye(3, device=gpu_device)).numpy()


def test_decomposition_grads_match_torch():
    from gradcheck import check_vs_torch
    torch = pytest.importorskip("torch")
    g = random_array((2, 3, 3)) + 3 * np.eye(3)
    b = random_array((2, 3, 2))
    s = spd(3, (2,))
    check_vs_torch(la.inv, torch.linalg.inv, [g], "cpu", rtol=1e-3, atol=1e-4)
    check_vs_torch(la.det, torch.linalg.det, [g], "cpu", rtol=1e-3, atol=1e-3)
    check_vs_torch(lambda x: la.slogdet(x).logabsdet, lambda x: torch.linalg.slogdet(x).logabsdet, [g], "cpu",
                   rtol=1e-3, atol=1e-4)
    check_vs_torch(la.solve, torch.linalg.solve, [g, b], "cpu", rtol=1e-3, atol=1e-4)
    for upper in (False, True):
        check_vs_torch(lambda x: la.cholesky(x, upper=upper), lambda x: torch.linalg.cholesky(x, upper=upper),
                       [s], "cpu", rtol=1e-3, atol=1e-4)
    check_vs_torch(la.eigvalsh, torch.linalg.eigvalsh, [s], "cpu", rtol=1e-3, atol=1e-4)
    # Eigenvectors up to sign: a sign-invariant function of them.
    check_vs_torch(lambda x: la.eigh(x).eigenvectors ** 2, lambda x: torch.linalg.eigh(x).eigenvectors ** 2,
                   [s], "cpu", rtol=1e-3, atol=1e-4)
    with pytest.raises(ValueError, match=r"not differentiable"):
        x = pf.tensor(s.astype(np.float32), requires_grad=True)
        pf.sum(la.svdvals(x)).backward()
