"""Gradients of the scatter family (put, scatter, scatter_add, index_add)
and of item assignment, against torch and finite differences on every
device."""
import numpy as np
import pytest

import pyflame as pf
from conftest import random_array
from gradcheck import check_finite_differences, check_vs_torch

torch = pytest.importorskip("torch")


def test_put_grad(device):
    x, s = random_array((3, 4)), random_array((5,))

    def torch_put(t, i, v):
        return t.put(i, v)
    unique = np.array([0, 11, 5, 2, 7], np.int64)
    check_vs_torch(lambda t, i, v: pf.put(t, i, v), torch_put, [x, unique, s], device)
    check_finite_differences(lambda t, i, v: pf.put(t, i, v), [x, unique, s], device)


def test_put_grad_repeated_index_reaches_the_kept_write():
    # The CPU keeps the last write: only it gets a gradient.
    x, s = random_array((3, 4)), random_array((5,))
    index = np.array([0, 11, -1, 5, 11], np.int64)
    check_finite_differences(lambda t, i, v: pf.put(t, i, v), [x, index, s], "cpu")


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_grad(device, axis):
    x = random_array((4, 5))
    n = x.shape[axis]
    other = 5 if axis == 0 else 4
    perm = np.stack([np.random.permutation(n)[:3] for _ in range(other)])  # unique targets
    index = perm.T if axis == 0 else perm
    src = random_array(index.shape)
    check_vs_torch(lambda t, i, v: pf.scatter(t, axis, i, v),
                   lambda t, i, v: torch.scatter(t, axis, i, v), [x, index, src], device)


@pytest.mark.parametrize("axis", [0, 1])
def test_scatter_add_and_index_add_grad(device, axis):
    x = random_array((4, 5))
    index = np.random.randint(0, x.shape[axis], (6, 5) if axis == 0 else (4, 7))
    src = random_array(index.shape)
    check_vs_torch(lambda t, i, v: pf.scatter_add(t, axis, i, v),
                   lambda t, i, v: torch.scatter_add(t, axis, i, v), [x, index, src], device)
    rows = np.array([3, 0, 3], np.int64)
    s = random_array((3, 5) if axis == 0 else (4, 3))
    check_vs_torch(lambda t, i, v: pf.index_add(t, axis, i, v, alpha=1.5),
                   lambda t, i, v: torch.index_add(t, axis, i, v, alpha=1.5), [x, rows, s], device)
    check_finite_differences(lambda t, i, v: pf.index_add(t, axis, i, v), [x, rows, s], device)


def test_setitem_grad(device):
    x, v = random_array((4, 6)), random_array((2, 3))

    def ours(t, u):
        h = t * 1.0
        h[1:3, ::2] = u
        h[np.array([0, 3]), 1] = u[0, :2]
        return h

    def theirs(t, u):
        h = t * 1.0
        h[1:3, ::2] = u
        h[torch.tensor([0, 3]), 1] = u[0, :2]
        return h
    check_vs_torch(ours, theirs, [x, v], device)
    check_finite_differences(ours, [x, v], device)
