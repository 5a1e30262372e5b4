"""The lazy graph: long chains, concurrent evaluation from threads, pf.eval."""
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import pyflame as pf
from conftest import assert_close, make_tensor, random_array


def test_lazy_until_evaluated(device):
    x = random_array((3, 4), "float32")
    t = make_tensor(x, "float32")
    y = pf.exp(t) * 2.0
    assert not y.is_evaluated
    assert_close(y, np.exp(x) * 2.0, "float32")
    assert y.is_evaluated


def test_100k_op_chain(device):
    n = 100_000
    x0 = random_array((8,), "int32", -1000, 1000).astype(np.float32)
    a = random_array((8,), "int32", -3, 3).astype(np.float32)
    b = random_array((8,), "int32", -3, 3).astype(np.float32)
    x, ta, tb = make_tensor(x0), make_tensor(a), make_tensor(b)
    for i in range(n // 2):
        x = x + ta
        x = x - tb
    # every step is exact in float32 (small integers)
    assert_close(x, x0.astype(np.float64) + (n // 2) * (a.astype(np.float64) - b), "float32",
                 rtol=0, atol=0)


def test_100k_op_chain_of_mixed_ops(device):
    n = 100_000
    x0 = random_array((5,), "float32", 0.5, 2.0)
    pf_ops = [lambda v: v * 2.0, lambda v: pf.abs(v), lambda v: v * 0.5, lambda v: -v,
              lambda v: pf.maximum(v, -100.0), lambda v: v.reshape(5), lambda v: pf.sqrt(v * v)]
    np_ops = [lambda v: v * 2.0, np.abs, lambda v: v * 0.5, np.negative,
              lambda v: np.maximum(v, -100.0), lambda v: v.reshape(5), lambda v: np.sqrt(v * v)]
    x, want = make_tensor(x0, "float32"), x0.copy()
    for i in range(n):
        x = pf_ops[i % len(pf_ops)](x)
    for i in range(n % len(np_ops)):  # every full cycle maps v to |v|
        want = np_ops[i](np.abs(want) if i == 0 and n >= len(np_ops) else want)
    assert_close(x, want, "float32")


def test_long_chain_dropped_without_eval(device):
    x = pf.ones(4)
    for _ in range(100_000):
        x = x * 1.0
    del x  # freeing a deep unevaluated graph must not overflow the stack
    v = random_array((4,), "float32")
    assert_close(make_tensor(v, "float32") + 1.0, v + 1.0, "float32")


def test_wide_graph(device):
    parts = [random_array((3,), "float32") for _ in range(2000)]
    total = make_tensor(parts[0], "float32")
    for p in parts[1:]:
        total = total + make_tensor(p, "float32")
    want = np.zeros(3, np.float32)
    for p in parts:  # the same order of float32 additions, each rounded
        want = want + p.astype(np.float32)
    assert_close(total, want, "float32", rtol=0, atol=0)


def test_eval_several_tensors(device):
    x = random_array((4, 5), "float32")
    t = make_tensor(x, "float32")
    shared = pf.tanh(t) * 3.0
    a = shared + 1.0
    b = pf.sum(shared, axis=0)
    c = shared.T
    d = pf.relu(t)
    out = pf.eval(a, [b, c], (d,))
    assert len(out) == 3
    for u in (a, b, c, d):
        assert u.is_evaluated
    s = np.tanh(x) * 3.0
    assert_close(a, s + 1.0, "float32")
    assert_close(b, s.sum(0), "float32")
    assert_close(c, s.T, "float32")
    assert_close(d, np.maximum(x, 0), "float32")
    assert pf.eval(a) is a  # one tensor in, the same tensor out
    pf.eval()  # nothing to do


def test_eval_one_output_keeps_others_valid(device):
    x = random_array((6,), "float32")
    y = make_tensor(x, "float32") * 2.0
    a = y + 1.0
    b = y - 1.0
    pf.eval(a)  # frees what a no longer needs, but b still needs y
    assert_close(b, x * 2.0 - 1.0, "float32")
    assert_close(a, x * 2.0 + 1.0, "float32")
    c = y * y  # y was evaluated along the way; reuse it
    assert_close(c, (x * 2.0) ** 2, "float32")


def test_evaluated_tensor_reused_in_new_graphs(device):
    x = random_array((3, 3), "float32")
    t = make_tensor(x, "float32") @ make_tensor(x, "float32")
    t.eval()
    for k in range(5):
        assert_close(t + float(k), x @ x + k, "float32")
    assert_close(t[1:, ::-1] * 2.0, (x @ x)[1:, ::-1] * 2.0, "float32")


def _thread_graph(a, b, c):
    ta, tb, tc = (make_tensor(v, "float32") for v in (a, b, c))
    h = pf.relu(ta @ tb + tc)
    return [pf.softmax(h, -1), pf.sum(h, axis=0), pf.max(h * -1.0, axis=1)]


def _reference(a, b, c):
    h = np.maximum(a @ b + c, 0)
    e = np.exp(h - h.max(-1, keepdims=True))
    return [e / e.sum(-1, keepdims=True), h.sum(0), (-h).max(1)]


def test_threads_build_and_evaluate_own_graphs(device):
    n_threads, iters = 4, 6
    inputs = [[(random_array((8, 16), "float32", -1, 1), random_array((16, 12), "float32", -1, 1),
                random_array((12,), "float32", -1, 1)) for _ in range(iters)]
              for _ in range(n_threads)]
    shared = make_tensor(random_array((8, 12), "float32"), "float32")
    shared.eval()  # read by every thread
    barrier = threading.Barrier(n_threads)

    def work(tid):
        barrier.wait()  # start together for the most overlap
        results = []
        for a, b, c in inputs[tid]:
            outs = _thread_graph(a, b, c)
            if tid % 2:
                pf.eval(*outs)
                outs = [o.numpy() for o in outs]
            else:
                outs = [o.numpy() for o in outs]
            results.append((outs, (pf.exp(shared) + float(tid)).numpy()))
        return results

    with ThreadPoolExecutor(n_threads) as pool:
        all_results = list(pool.map(work, range(n_threads)))
    s = shared.numpy().astype(np.float64)
    for tid, results in enumerate(all_results):
        assert len(results) == iters
        for (a, b, c), (outs, sh) in zip(inputs[tid], results):
            for got, want in zip(outs, _reference(a, b, c)):
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(sh, np.exp(s) + tid, rtol=1e-5, atol=1e-6)


def test_threads_random_draws_are_distinct(device):
    n = 4

    def draw(_):
        return pf.randn(1000).numpy()

    with ThreadPoolExecutor(n) as pool:
        draws = list(pool.map(draw, range(n)))
    for i in range(n):
        assert abs(draws[i].mean()) < 0.2 and abs(draws[i].std() - 1) < 0.2
        for j in range(i):
            assert not np.array_equal(draws[i], draws[j])


def test_eval_outputs_that_feed_each_other(device):
    c = pf.ones(3, 4, device=device)
    n = -c
    pf.eval(c, n)  # c is an output and an input of a later output
    np.testing.assert_array_equal(n.numpy(), -np.ones((3, 4), np.float32))
