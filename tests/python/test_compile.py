"""pf.compile: a traced function replayed on later calls.

Every case compares a compiled function with the same Python function run
eagerly (the oracle is the eager path on the same device, whose ops the rest
of the suite checks against NumPy and PyTorch), on fresh inputs each call.
"""
import os
import threading

import numpy as np
import pytest

import pyflame as pf

nn = pf.nn


def close(a, b, tol=0.0):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def randt(rng, *shape, device=None):
    return pf.tensor(rng.standard_normal(shape).astype(np.float32), device=device)


def test_changing_inputs_match_eager(device, rng):
    def f(x, w, b):
        h = pf.relu(x @ w + b)
        return h.sum(axis=1), pf.softmax(h, axis=-1) * 0.5 - 1

    cf = pf.compile(f)
    w, b = randt(rng, 6, 5), randt(rng, 5)
    for _ in range(4):
        x = randt(rng, 3, 6)
        got, want = cf(x, w, b), f(x, w, b)
        assert isinstance(got, tuple) and len(got) == 2
        for g, e in zip(got, want):
            assert g.is_evaluated and g.device == e.device
            close(g.numpy(), e.numpy(), 1e-6)
    assert cf.traces == 1


def test_new_shapes_dtypes_and_static_args_trace_again(device, rng):
    calls = []

    def f(x, scale, mode="sum"):
        calls.append(1)
        y = x * scale
        return y.sum() if mode == "sum" else y.max()

    cf = pf.compile(f)
    x = randt(rng, 4, 3)
    for _ in range(2):
        close(cf(x, 2.0).numpy(), f(x, 2.0).numpy(), 1e-6)
    assert cf.traces == 1
    xb = randt(rng, 5, 3)  # another shape: traced
    close(cf(xb, 2.0).numpy(), f(xb, 2.0).numpy(), 1e-6)
    assert cf.traces == 2
    x64 = pf.tensor(rng.standard_normal((4, 3)))
    close(cf(x64, 2.0).numpy(), f(x64, 2.0).numpy(), 1e-12)
    close(cf(x, 3.0).numpy(), f(x, 3.0).numpy(), 1e-6)
    close(cf(x, 3.0, mode="max").numpy(), f(x, 3.0, mode="max").numpy())
    assert cf.traces == 5
    n = len(calls)
    cf(x, 3.0, mode="max")
    assert len(calls) == n  # replayed: the Python function did not run
    xt = randt(rng, 3, 4).T  # same shape, another layout: traced
    close(cf(xt, 2.0).numpy(), f(xt, 2.0).numpy(), 1e-5)
    assert cf.traces == 6


def test_trace_budget_then_eager_with_a_warning(rng):
    cf = pf.compile(lambda x: x + 1, max_traces=2)
    cf(randt(rng, 1))
    cf(randt(rng, 2))
    with pytest.warns(RuntimeWarning, match=r"\[compile\] .* runs eagerly from now on: traced 2"):
        out = cf(randt(rng, 3))
    assert out.shape == (3,)
    close(cf(pf.ones(4)).numpy(), np.full(4, 2, np.float32))
    with pytest.raises(ValueError, match=r"\[compile\] max_traces"):
        pf.compile(lambda x: x, max_traces=0)
    with pytest.raises(TypeError, match=r"\[compile\] expected a callable"):
        pf.compile(3)


def test_captured_tensors_follow_in_place_updates(device, rng):
    w = randt(rng, 4, 4)
    cf = pf.compile(lambda x: pf.tanh(x @ w))
    x = randt(rng, 2, 4)
    close(cf(x).numpy(), pf.tanh(x @ w).numpy(), 1e-6)
    w.mul_(-2.0)  # an in-place write rebinds w: the next call reads it
    close(cf(x).numpy(), pf.tanh(x @ w).numpy(), 1e-6)
    w[0] = 5.0
    close(cf(x).numpy(), pf.tanh(x @ w).numpy(), 1e-6)
    assert cf.traces == 1


def test_replaced_parameter_is_seen(device, rng):
    lin = nn.Linear(4, 3)
    cf = pf.compile(lambda x: lin(x))
    x = randt(rng, 2, 4)
    close(cf(x).numpy(), lin(x).numpy(), 1e-6)
    lin.weight = nn.Parameter(randt(rng, 3, 4))  # a new tensor: the old one is gone
    close(cf(x).numpy(), lin(x).numpy(), 1e-6)
    lin.bias = nn.Parameter(randt(rng, 5))  # ... and a new shape: broadcasting fails as eagerly
    with pytest.raises(ValueError):
        lin(x)
    with pytest.raises(ValueError):
        cf(x)


def test_random_ops_draw_fresh_numbers_as_eager(device, rng):
    def f(x):
        return pf.nn.functional.dropout(x, 0.5) + pf.rand(*x.shape) + pf.randn(3).sum()

    cf = pf.compile(f)
    x = randt(rng, 64)
    pf.manual_seed(7)
    got = [cf(x).numpy() for _ in range(3)]
    pf.manual_seed(7)
    want = [f(x).numpy() for _ in range(3)]
    for g, e in zip(got, want):
        close(g, e, 1e-6)
    assert not np.array_equal(got[1], got[2])
    assert cf.traces == 1


def test_errors_are_the_eager_ones_and_the_process_stays_usable(device, rng):
    table = randt(rng, 5, 3)
    cf = pf.compile(lambda i: pf.nn.functional.embedding(i, table) * 2)
    ok = pf.tensor(np.array([0, 4, 2]))
    close(cf(ok).numpy(), (pf.nn.functional.embedding(ok, table) * 2).numpy())
    bad = pf.tensor(np.array([0, 7, 2]))
    with pytest.raises(IndexError, match=r"\[embedding\] index 7 is out of range"):
        cf(bad).numpy()
    close(cf(ok).numpy(), (pf.nn.functional.embedding(ok, table) * 2).numpy())
    with pytest.raises(ValueError, match=r"^\[matmul\]"):
        pf.compile(lambda a, b: a @ b)(randt(rng, 2, 3), randt(rng, 4, 5))


def test_host_read_runs_eagerly_with_one_warning(device, rng):
    def f(x):
        return x * 2 if x.sum().item() > 0 else x * -1

    cf = pf.compile(f)
    with pytest.warns(RuntimeWarning, match=r"runs eagerly from now on: it makes a host read"):
        cf(randt(rng, 3))
    for _ in range(2):
        x = randt(rng, 3)
        close(cf(x).numpy(), f(x).numpy())


def test_nested_outputs_and_non_tensor_values(device, rng):
    cf = pf.compile(lambda d: {"y": [d["a"] + 1, (d["a"] * d["b"],)], "n": 3})
    for _ in range(2):
        a, b = randt(rng, 2), randt(rng, 2)
        out = cf({"a": a, "b": b})
        assert out["n"] == 3
        close(out["y"][0].numpy(), (a + 1).numpy())
        close(out["y"][1][0].numpy(), (a * b).numpy())


def test_a_compiled_function_inside_another_is_part_of_its_trace(device, rng):
    inner = pf.compile(lambda x: pf.exp(x) + 1)
    outer = pf.compile(lambda x: inner(x) * inner(x * 2))
    for _ in range(3):
        x = randt(rng, 4)
        close(outer(x).numpy(), ((pf.exp(x) + 1) * (pf.exp(x * 2) + 1)).numpy(), 1e-6)
    assert outer.traces == 1 and inner.traces == 0


def test_compiled_forward_then_eager_backward(device, rng):
    lin = nn.Linear(3, 2)
    cf = pf.compile(lambda x: (lin(x) ** 2).sum())
    for _ in range(2):
        x = randt(rng, 4, 3)
        lin.zero_grad()
        cf(x).backward()
        got = lin.weight.grad.numpy()
        lin.zero_grad()
        (lin(x) ** 2).sum().backward()
        close(got, lin.weight.grad.numpy(), 1e-5)


def _mlp(seed, momentum):
    pf.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.25), nn.Linear(16, 3))
    return model, pf.optim.SGD(list(model.parameters()), lr=0.1, momentum=momentum)


def _train_step(model, opt, x, y):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_training_loop_matches_eager_step_for_step(device, rng, momentum):
    m1, o1 = _mlp(3, momentum)
    m2, o2 = _mlp(3, momentum)
    step = pf.compile(lambda x, y: _train_step(m2, o2, x, y))
    tol = 0.0 if device == "cpu" else 1e-6  # a GPU graph may pick other GEMM kernels
    for i in range(6):
        x, y = randt(rng, 5, 8), pf.tensor(rng.integers(0, 3, 5))
        pf.manual_seed(100 + i)
        want = _train_step(m1, o1, x, y).item()
        pf.manual_seed(100 + i)
        got = step(x, y).item()
        close(got, want, tol)
        for p, q in zip(m1.parameters(), m2.parameters()):
            close(q.numpy(), p.numpy(), tol)
            close(q.grad.numpy(), p.grad.numpy(), tol)
            assert q.is_leaf and q.requires_grad
    assert step.traces <= 3  # first step (empty .grad, new state), then one program
    loss = step(randt(rng, 5, 8), pf.tensor(rng.integers(0, 3, 5)))
    with pytest.raises(RuntimeError, match=r"\[backward\] the graph was already released"):
        loss.backward()  # as after an eager step


def test_gpu_training_step_replays_a_graph(gpu_device, rng):
    def make():
        pf.manual_seed(11)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
        return model, pf.optim.SGD(list(model.parameters()), lr=0.1, momentum=0.9)
    m1, o1 = make()
    m2, o2 = make()
    step = pf.compile(lambda x, y: _train_step(m2, o2, x, y))
    for i in range(6):
        x, y = randt(rng, 5, 8), pf.tensor(rng.integers(0, 3, 5))
        close(step(x, y).item(), _train_step(m1, o1, x, y).item(), 1e-5)
        for p, q in zip(m1.parameters(), m2.parameters()):
            close(q.numpy(), p.numpy(), 1e-5)
            close(q.grad.numpy(), p.grad.numpy(), 1e-5)
    assert step.graphs == 1
    bad = pf.tensor(np.array([0, 1, 5, 2, 0]))  # a target out of range raises from the graph
    before = [q.numpy() for q in m2.parameters()]
    with pytest.raises(IndexError, match=r"\[cross_entropy\] target 5 is out of range"):
        step(randt(rng, 5, 8), bad)
    for b, q in zip(before, m2.parameters()):  # as eagerly: the failed step changed nothing
        close(q.numpy(), b)


def test_compiled_optimizer_step_reads_fresh_grads(device, rng):
    m1, o1 = _mlp(5, 0.0)
    m2, o2 = _mlp(5, 0.0)
    step = pf.compile(o2.step)
    for _ in range(4):
        x, y = randt(rng, 5, 8), pf.tensor(rng.integers(0, 3, 5))
        for m, o, s in ((m1, o1, o1.step), (m2, o2, step)):
            o.zero_grad()
            m.eval()
            nn.functional.cross_entropy(m(x), y).backward()
            s()
        for p, q in zip(m1.parameters(), m2.parameters()):
            close(q.numpy(), p.numpy())


def test_gpu_forward_replays_a_captured_graph(gpu_device, streams, rng):
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    with pf.no_grad():
        cf = pf.compile(lambda x: pf.softmax(model(x), axis=-1))
        outs = []
        for _ in range(4):
            x = randt(rng, 8, 16)
            got = cf(x)
            outs.append(got)
            close(got.numpy(), pf.softmax(model(x), axis=-1).numpy(), 1e-6)
        assert cf.graphs == 1 and cf.traces == 1
    # results are copies: a later replay does not change an earlier result
    first = outs[0].numpy().copy()
    with pf.no_grad():
        cf(randt(rng, 8, 16))
    close(outs[0].numpy(), first)


def test_gpu_graph_replay_off_replays_op_by_op(gpu_device):
    """PYFLAME_GRAPH_REPLAY=0 (read at start, so in a fresh process): no
    graph is captured, and the replays give the eager results."""
    import subprocess
    import sys
    code = """
import sys, numpy as np, pyflame as pf
pf.set_device(sys.argv[1])
rng = np.random.default_rng(0)
w = pf.tensor(rng.standard_normal((16, 8)).astype(np.float32))
cf = pf.compile(lambda x: pf.relu(pf.matmul(x, w)) * 2)
for _ in range(3):
    x = pf.tensor(rng.standard_normal((4, 16)).astype(np.float32))
    np.testing.assert_array_equal(cf(x).numpy(), (pf.relu(pf.matmul(x, w)) * 2).numpy())
print(cf.traces, cf.graphs)
"""
    env = dict(os.environ, PYFLAME_GRAPH_REPLAY="0")
    r = subprocess.run([sys.executable, "-c", code, gpu_device], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "0"], r.stdout


@pytest.mark.parametrize("n,dtype", [(5, np.float16), (1 << 20, np.float32), ((1 << 19) + 3, np.float16)])
def test_gpu_replays_queued_back_to_back_keep_their_own_inputs(gpu_device, rng, n, dtype):
    # The replay's copies run as graph nodes reading a rotating pointer
    # table: more queued replays than table slots, none read until the end.
    w = pf.tensor(rng.standard_normal(n).astype(dtype))
    cf = pf.compile(lambda a, b: (a * w + b, (a - b).abs()))
    xs = [(rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)) for _ in range(9)]
    args = [(pf.tensor(a), pf.tensor(b)) for a, b in xs]
    got = [cf(a, b) for a, b in args]
    assert cf.graphs == 1
    for (a, b), (s, d) in zip(xs, got):
        wf = w.numpy().astype(np.float32)
        close(s.numpy().astype(np.float32), a.astype(np.float32) * wf + b.astype(np.float32),
              1e-2 if dtype == np.float16 else 1e-6)
        close(d.numpy().astype(np.float32), np.abs(a.astype(np.float32) - b.astype(np.float32)),
              1e-2 if dtype == np.float16 else 1e-6)


def test_gpu_graph_raises_its_range_checks(gpu_device, rng):
    table = randt(rng, 5, 3)
    cf = pf.compile(lambda i: pf.nn.functional.embedding(i, table) * 2)
    ok, bad = pf.tensor(np.array([0, 4, 2])), pf.tensor(np.array([0, 7, 2]))
    for _ in range(3):
        close(cf(ok).numpy(), (pf.nn.functional.embedding(ok, table) * 2).numpy())
    assert cf.graphs == 1
    with pytest.raises(IndexError, match=r"\[embedding\] index 7 is out of range"):
        cf(bad)
    close(cf(ok).numpy(), (pf.nn.functional.embedding(ok, table) * 2).numpy())
    assert cf.graphs == 1


def test_gpu_graph_with_rope_inside(gpu_device, rng):
    """Rope (its frequency table made on first use, outside any capture) is
    captured and replays right, also after other uploads reused the pinned
    pool."""
    cf = pf.compile(lambda x: pf.rope(x, theta=500.0) + 1)
    for _ in range(4):
        x = randt(rng, 2, 3, 5, 8)
        close(cf(x).numpy(), (pf.rope(x, theta=500.0) + 1).numpy())
        pf.tensor(rng.standard_normal(64).astype(np.float32)).numpy()  # churn the pinned pool
    assert cf.graphs == 1 and cf.traces == 1


def test_gpu_program_with_host_data_says_why(gpu_device, rng, capfd):
    """A function of a CPU argument that it moves to the GPU is not captured
    (a graph cannot read host memory that changes): it replays uncaptured
    and says why, once."""
    cf = pf.compile(lambda h, x: h.to(gpu_device) + x)
    for _ in range(3):
        h, x = randt(rng, 4, device="cpu"), randt(rng, 4)
        close(cf(h, x).numpy(), h.numpy() + x.numpy())
    assert cf.graphs == 0 and cf.traces == 1
    err = capfd.readouterr().err
    assert err.count("replaying without a GPU graph") == 1 and "argument 0 lives on the CPU" in err


def test_threads_replay_their_own_compiled_functions(device, streams, rng):
    ws = [randt(rng, 8, 8) for _ in range(4)]
    xs = [[randt(rng, 4, 8) for _ in range(5)] for _ in range(4)]
    fns = [pf.compile(lambda x, w=w: pf.relu(x @ w) @ w) for w in ws]
    want = [[(pf.relu(x @ w) @ w).numpy() for x in xi] for w, xi in zip(ws, xs)]
    got, errors = [None] * 4, []

    def body(i):
        try:
            got[i] = [fns[i](x).numpy() for x in xs[i]]
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for g, e in zip(got, want):
        for a, b in zip(g, e):
            close(a, b, 1e-5)


def test_replay_after_clear_pool_and_out_of_memory(device, rng):
    cf = pf.compile(lambda x: pf.exp(x) * 2)
    x = randt(rng, 16)
    close(cf(x).numpy(), (pf.exp(x) * 2).numpy(), 1e-6)
    if device != "cpu":
        pf.backend.rocm.get_memory_manager().clear_pool()
    with pytest.raises(pf.OutOfMemoryError):
        pf.zeros(2**60).sum().item()
    for _ in range(2):
        x = randt(rng, 16)
        close(cf(x).numpy(), (pf.exp(x) * 2).numpy(), 1e-6)


def test_switching_fusion_between_calls(device, rng):
    """A program plans its fusion once, when traced; calls after a switch
    (CPU or GPU fusion) give the eager results of that switch, bit for bit."""
    def f(x, w, b):
        y = pf.gelu(x * w + b)
        return y, (y * y).sum(axis=-1)

    cf = pf.compile(f)
    was, was_gpu = pf.get_fusion(), pf.get_fusion_gpu()
    try:
        for on, gpu in ((True, True), (False, True), (True, False), (True, True), (False, False)):
            pf.set_fusion(on, gpu=gpu)
            for _ in range(2):
                x, w, b = randt(rng, 4, 33), randt(rng, 33), randt(rng, 4, 1)
                pf.reset_fusion_stats()
                got = cf(x, w, b)
                if device == "cpu":  # a GPU replay may launch a captured graph: no evaluation to count
                    assert pf.fusion_stats()["regions"] == (2 if on else 0)
                want = f(x, w, b)
                for g, e in zip(got, want):
                    close(g.numpy(), e.numpy())
    finally:
        pf.set_fusion(was, gpu=was_gpu)


def test_a_tensor_passed_twice_then_two_tensors(device, rng):
    """The program of f(x, x) reads x once; f(x, y) must not replay it."""
    def f(a, b):
        return pf.relu(a * b + a)

    cf = pf.compile(f)
    x, y = randt(rng, 8), randt(rng, 8)
    close(cf(x, x).numpy(), f(x, x).numpy())
    close(cf(x, y).numpy(), f(x, y).numpy())
    close(cf(y, y).numpy(), f(y, y).numpy())


def test_aliasing_views_at_trace_time_do_not_stick(device, rng):
    """Arguments that view the same memory when traced are one load of its
    fused region; later calls with separate arguments read each one."""
    def f(a, b):
        with pf.no_grad():
            return pf.exp(a * b + a) * b

    def views(*bases):  # evaluated views kept with their base (requires_grad)
        vs = [x[2:6] for x in bases]
        pf.eval(*vs)
        return vs

    def base():
        return pf.tensor(rng.standard_normal(8).astype(np.float32), requires_grad=True)

    cf = pf.compile(f)
    x = base()
    a, b = views(x, x)
    close(cf(a, b).numpy(), f(a, b).numpy())
    for _ in range(2):
        a, b = views(base(), base())
        close(cf(a, b).numpy(), f(a, b).numpy())
    assert cf.traces == 1
