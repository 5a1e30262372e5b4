"""Threads sharing graphs and leaves get the serial results.

Evaluation claims each node it computes, so several threads evaluating one
unevaluated graph compute every node once and all read the same values;
backward() passes that share leaves accumulate every contribution. Each case
runs on every device under test and, on a GPU, with multi_stream off and on.
"""
import threading

import numpy as np
import pytest

import pyflame as pf

THREADS = 6


def run_threads(fn, n=THREADS):
    """Runs fn(i) on n threads started together; re-raises the first error."""
    barrier = threading.Barrier(n)
    results, errors = [None] * n, []

    def body(i):
        try:
            barrier.wait()
            results[i] = fn(i)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def _chain(a, depth):
    g = a
    for _ in range(depth):
        g = pf.tanh(g @ a * 0.25 + 0.5)
    return g


def _chain_ref(a, depth):
    g = a.astype(np.float64)
    for _ in range(depth):
        g = np.tanh(g @ a * 0.25 + 0.5)
    return g


def test_one_unevaluated_graph_from_many_threads(device, streams):
    for _ in range(10):
        a_np = np.random.randn(32, 32).astype(np.float32) * 0.3
        a = pf.tensor(a_np, device=device)
        g = _chain(a, 12)
        outs = run_threads(lambda i: g.numpy())
        for o in outs[1:]:
            np.testing.assert_array_equal(o, outs[0])
        np.testing.assert_allclose(outs[0], _chain_ref(a_np, 12), rtol=1e-4, atol=1e-5)


def test_overlapping_graphs_share_a_middle(device, streams):
    """Each thread extends a shared unevaluated trunk with its own branch."""
    for _ in range(10):
        a_np = np.random.randn(16, 16).astype(np.float32) * 0.3
        a = pf.tensor(a_np, device=device)
        trunk = _chain(a, 6)
        trunk_ref = _chain_ref(a_np, 6)
        outs = run_threads(lambda i: (trunk * float(i) + pf.exp(trunk)).sum(axis=1).numpy())
        for i, o in enumerate(outs):
            ref = (trunk_ref * i + np.exp(trunk_ref)).sum(axis=1)
            np.testing.assert_allclose(o, ref, rtol=1e-4, atol=1e-4)


def test_eval_several_outputs_and_read_back(device, streams):
    a = pf.tensor(np.random.randn(64).astype(np.float32), device=device)
    b = pf.exp(a) + 1.0
    c = b * b
    def body(i):
        outs = [b, c] if i % 2 else [c, b]
        pf.eval(*outs)
        return b.numpy(), c.numpy()
    for bb, cc in run_threads(body):
        np.testing.assert_array_equal(cc, (bb * bb).astype(np.float32))


def test_error_in_shared_graph_is_raised_in_every_thread(device, streams):
    """A failing node is released, not left half-claimed: every thread (and a
    later evaluation) sees the error, and the process stays usable."""
    x = pf.tensor(np.arange(6, dtype=np.float32), device=device)
    idx = pf.tensor(np.array([0, 9], dtype=np.int32), device=device)
    bad = pf.index_select(x, 0, idx) + 1.0

    def body(i):
        with pytest.raises(IndexError):
            bad.numpy()
        return True

    assert all(run_threads(body))
    with pytest.raises(IndexError):
        bad.numpy()
    np.testing.assert_array_equal((x + 1.0).numpy(), np.arange(6) + 1)


def test_backward_on_shared_leaf_accumulates(device, streams):
    for _ in range(5):
        w_np = np.random.randn(100).astype(np.float32)
        w = pf.tensor(w_np, device=device, requires_grad=True)
        run_threads(lambda i: (w * w * float(i + 1)).sum().backward())
        factor = sum(2 * (i + 1) for i in range(THREADS))
        np.testing.assert_allclose(w.grad.numpy(), factor * w_np, rtol=1e-5)


def test_backward_through_shared_retained_graph(device, streams):
    """Threads backpropagate through one shared (unevaluated) hidden layer."""
    x_np = np.random.randn(8, 5).astype(np.float32)
    w_np = np.random.randn(5, 4).astype(np.float32)
    x = pf.tensor(x_np, device=device)
    w = pf.tensor(w_np, device=device, requires_grad=True)
    h = pf.tanh(x @ w)

    run_threads(lambda i: h.sum().backward(retain_graph=True))
    th = np.tanh(x_np.astype(np.float64) @ w_np)
    ref = THREADS * (x_np.T @ (1 - th ** 2))
    np.testing.assert_allclose(w.grad.numpy(), ref, rtol=1e-4, atol=1e-4)


def test_functional_grad_from_threads(device, streams):
    w_np = np.random.randn(7).astype(np.float32)
    w = pf.tensor(w_np, device=device, requires_grad=True)
    shared = pf.sin(w)  # an interior node every thread differentiates through

    def body(i):
        (g,) = pf.grad((shared * float(i)).sum(), [w])
        return g.numpy()

    for i, g in enumerate(run_threads(body)):
        np.testing.assert_allclose(g, i * np.cos(w_np), rtol=1e-5, atol=1e-6)
    assert w.grad is None  # functional grad leaves .grad alone


def test_training_steps_from_threads_on_separate_models(device, streams):
    """Independent models trained concurrently match the same models trained
    one after another."""
    import pyflame.nn as nn

    def train(seed, steps=5):
        rng = np.random.default_rng(seed)
        model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)).to(device)
        model.load_state_dict({k: pf.tensor(rng.standard_normal(v.shape).astype(np.float32) * 0.5,
                                             device=device)
                               for k, v in model.state_dict().items()})
        opt = pf.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x = pf.tensor(rng.standard_normal((16, 6)).astype(np.float32), device=device)
        y = pf.tensor(rng.integers(0, 3, 16).astype(np.int64), device=device)
        for _ in range(steps):
            opt.zero_grad()
            loss = pf.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        return np.concatenate([p.numpy().ravel() for p in model.parameters()])

    serial = [train(100 + i) for i in range(4)]
    concurrent = run_threads(lambda i: train(100 + i), n=4)
    for s, c in zip(serial, concurrent):
        np.testing.assert_allclose(c, s, rtol=1e-5, atol=1e-6)


_THREAD_COUNT_SCRIPT = """
import ctypes, ctypes.util, numpy as np, pyflame as pf
omp = ctypes.CDLL(ctypes.util.find_library("gomp") or "libgomp.so.1")
omp.omp_set_num_threads(1)  # what another library in the process may do (PyTorch does)
x = np.random.default_rng(0).standard_normal(3_000_003).astype(np.float32)
t = pf.tensor(x)
np.testing.assert_allclose(pf.sum(t).item(), x.sum(dtype=np.float64), rtol=1e-4)
np.testing.assert_allclose((pf.exp(t * 0.1) + 1).sum().item(), (np.exp(x * 0.1) + 1).sum(dtype=np.float64),
                           rtol=1e-4)
np.testing.assert_allclose(pf.softmax(t.reshape(3, -1), axis=-1).numpy().sum(axis=-1), np.ones(3), rtol=1e-4)
print("ok")
"""


@pytest.mark.parametrize("threads", ["1", "3", ""])
def test_cpu_thread_count_settings(threads):
    """PYFLAME_NUM_THREADS (more threads than cores too), or by default every
    core whatever OpenMP's current default is: reductions whose partials are
    per thread, fused regions and row kernels give the right values."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, PYFLAME_NUM_THREADS=threads)
    r = subprocess.run([sys.executable, "-c", _THREAD_COUNT_SCRIPT], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
