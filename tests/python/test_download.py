"""Copies to the host (numpy(), item(), C++ copy_to_host): the values of pending graphs, evaluated
tensors and views of every layout, on each device and stream mode; a GPU download lands in the
destination directly, with no host tensor in between."""
import numpy as np
import pytest

import pyflame as pf
from test_threads import run_threads

cpu = pf.backend.cpu


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64", "int64", "int8", "bool"])
def test_pending_graph_downloads(device, streams, rng, dtype):
    a = rng.standard_normal((33, 17)).astype(np.float32)
    x = pf.tensor(a, device=device)
    y = (x * 3.0 + 1.0).astype(dtype)  # pending: computed and downloaded by one evaluation
    expected = (pf.tensor(a) * 3.0 + 1.0).astype(dtype).numpy()
    np.testing.assert_array_equal(y.numpy(), expected)
    np.testing.assert_array_equal(y.numpy(), expected)  # evaluated now: the download alone


@pytest.mark.parametrize("view", ["transpose", "slice", "offset_row", "broadcast", "scalar"])
def test_views_download_their_own_elements(device, streams, rng, view):
    a = rng.standard_normal((12, 10)).astype(np.float32)
    x = pf.eval(pf.tensor(a, device=device))
    make = {
        "transpose": lambda t: t.T,
        "slice": lambda t: t[1:9:2, 3:],
        "offset_row": lambda t: t[5],
        "broadcast": lambda t: pf.broadcast_to(t[:1], (4, 12, 10)),
        "scalar": lambda t: t[3, 4],
    }[view]
    expected = np.broadcast_to(a[:1], (4, 12, 10)) if view == "broadcast" else make(a)
    np.testing.assert_array_equal(make(x).numpy(), expected)


def test_empty_and_item(device, streams):
    e = pf.zeros((0, 5), device=device) + 1.0
    assert e.numpy().shape == (0, 5)
    assert (pf.full((3,), 2.5, device=device).sum() * 2).item() == 15.0


def test_failed_evaluation_raises_and_the_next_download_works(device, streams):
    x = pf.arange(5, device=device).astype("float32")
    bad = pf.index_select(x, 0, pf.tensor(np.array([0, 7]), device=device)) * 2
    with pytest.raises(IndexError, match=r"^\[index_select\]"):
        bad.numpy()
    np.testing.assert_array_equal((x + 1).numpy(), np.arange(1, 6, dtype=np.float32))


def test_gpu_download_makes_no_host_tensor(gpu_device):
    n = 1 << 20  # 4 MiB of float32
    x = pf.eval(pf.full((n,), 2.0, device=gpu_device))
    cpu.reset_peak_memory_stats()
    base = cpu.memory_allocated()
    out = (x + 1.0).numpy()
    assert cpu.max_memory_allocated() - base < 4096  # the download's 1-byte marker, no 4 MiB buffer
    np.testing.assert_array_equal(out, np.full(n, 3.0, dtype=np.float32))


class _HostScaled(pf.autograd.Function):
    """A backward that reads its cotangent on the host (a download while backward() runs)."""

    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, grad):
        host = grad.numpy()
        return grad * float(host.sum())


def test_download_inside_backward(device, streams):
    x = pf.tensor(np.arange(4, dtype=np.float32), device=device, requires_grad=True)
    y = _HostScaled.apply(x)
    (y * pf.tensor(np.full(4, 0.5, dtype=np.float32), device=device)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(4, 0.5 * 2.0, dtype=np.float32))


def test_downloads_from_threads(gpu_device, streams, rng):
    a = rng.standard_normal((64, 48)).astype(np.float32)
    x = pf.eval(pf.tensor(a, device=gpu_device))

    def work(k):
        for j in range(20):
            got = (x * float(k) + float(j)).numpy()
            np.testing.assert_allclose(got, a * k + j, rtol=1e-6, atol=1e-6)

    run_threads(work)
