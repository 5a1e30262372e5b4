"""Automatic fusion: the same graphs evaluated with fusion on and off give
bit-identical results (NaN positions included) on each device, and their
gradients too; the plan is visible and the switches work. GPU fusion is
experimental and off by default: the tests that fuse turn it on themselves."""
import os
import subprocess
import sys

import numpy as np
import pytest

import pyflame as pf
from conftest import ALL_DTYPES, EVERY_DTYPE, FLOAT_DTYPES, make_tensor, random_array

NEW_DTYPES = [d for d in EVERY_DTYPE if d not in ALL_DTYPES]  # float64, int8, int16, uint8
FLOATS = FLOAT_DTYPES + ["float64"]


@pytest.fixture
def fusion_on():
    was, was_gpu = pf.get_fusion(), pf.get_fusion_gpu()
    pf.set_fusion(True, gpu=True)
    yield
    pf.set_fusion(was, gpu=was_gpu)


def bits(t):
    """Host bits of a tensor, floats as unsigned integers; NaNs set to one
    pattern (a NaN's payload is not part of the contract)."""
    raw = np.asarray(pf._core._to_host_bits(t))
    if t.dtype.name in FLOATS:
        vals = t.astype("float64").numpy()
        raw = np.where(np.isnan(vals), np.array(-1).astype(raw.dtype), raw)
        return raw, np.isnan(vals)
    return raw, None


def assert_same(a, b):
    assert a.shape == b.shape and a.dtype == b.dtype
    ra, na = bits(a)
    rb, nb = bits(b)
    if na is not None:
        assert np.array_equal(na, nb), "NaN positions differ"
    assert np.array_equal(ra, rb), f"fused and unfused differ at {np.argwhere(ra != rb)[:5].tolist()}"


def both_ways(build, first=None):
    """build() -> list of tensors; evaluated with fusion on and then off.
    With ``first``, one evaluation computes the first ``first`` tensors and a
    later one the rest (values held outside an evaluation)."""
    was, was_gpu = pf.get_fusion(), pf.get_fusion_gpu()
    try:
        pf.set_fusion(True, gpu=True)
        pf.reset_fusion_stats()
        fused = build()
        pf.eval(*fused[:first])
        regions = pf.fusion_stats()["regions"]
        pf.eval(*fused)
        # A GPU region whose kernel failed to compile runs unfused: right, but not what is tested.
        assert pf.fusion_stats()["fallbacks"] == 0, "run-time compilation failed (see the warning)"
        pf.set_fusion(False)
        plain = build()
        pf.eval(*plain)
    finally:
        pf.set_fusion(was, gpu=was_gpu)
    for a, b in zip(fused, plain):
        assert_same(a, b)
    return regions


# ------------------------------------------------------------ random graphs

UNARY_FLOAT = ["neg", "abs", "sqrt", "exp", "log", "sin", "cos", "tanh", "relu", "sigmoid", "gelu",
               "silu", "erf"]
UNARY_INT = ["neg", "abs", "relu"]
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "pow"]
COMPARE = ["eq", "ne", "lt", "le", "gt", "ge"]


def special(x, dtype, rng):
    """Mixes NaN, +-Inf and signed zeros into a float array."""
    if dtype in FLOATS and x.size:
        flat = x.reshape(-1)
        k = rng.integers(0, flat.size, size=max(1, flat.size // 8))
        flat[k] = rng.choice([np.nan, np.inf, -np.inf, 0.0, -0.0], size=k.size)
    return x


def random_graph(seed, dtype, shape, device, n_ops=8, held=0):
    """A builder of a random DAG of elementwise ops over broadcast inputs,
    views and scalars; the same seed builds the same graph. ``held`` more
    interior values are returned too (after the two outputs): values needed
    both inside a region and outside it."""
    rng = np.random.default_rng(seed)
    np.random.seed(seed)
    arrays = []
    for k in range(3):
        s = list(shape)
        if k == 1 and s:
            s[rng.integers(0, len(s))] = 1  # a broadcast operand
        if k == 2:
            s = s[1:]  # fewer axes
        a = random_array(s, dtype)
        arrays.append(special(np.array(a), dtype, rng))
    plan = [(str(rng.choice(["u", "b", "b", "c", "w", "s", "t", "v"])), int(rng.integers(0, 1 << 30)))
            for _ in range(n_ops)]

    def build():
        r = np.random.default_rng(seed + 1)
        vals = [make_tensor(a, dtype, device) for a in arrays]
        if len(shape) >= 2:  # a transposed view as an input
            vals.append(vals[0].transpose(*range(len(shape) - 1, -1, -1)).transpose(
                *range(len(shape) - 1, -1, -1)))
        live = list(vals)
        for kind, k in plan:
            x = live[k % len(live)]
            y = live[(k >> 3) % len(live)]
            if kind == "u":
                ops = UNARY_FLOAT if dtype in FLOATS else UNARY_INT
                if dtype == "bool":
                    z = pf.logical_not(x) if hasattr(pf, "logical_not") else x
                else:
                    z = getattr(pf, ops[k % len(ops)])(x)
            elif kind == "b":
                op = BINARY[k % len(BINARY)]
                if dtype == "bool" and op in ("sub", "pow"):
                    op = "add"
                if op == "pow" and dtype not in FLOATS:
                    op = "mul"
                z = getattr(pf, op)(x, y)
            elif kind == "c":
                c = getattr(pf, COMPARE[k % len(COMPARE)])(x, y)
                z = pf.where(c, x, y)
            elif kind == "w":
                z = pf.where(x > y, y, x) if dtype != "bool" else pf.where(x, y, x)
            elif kind == "s" and k % 3 == 0:
                # A constant tensor, alone or through views: a scalar step of
                # the region, never filled in memory.
                v = True if dtype == "bool" else 0.75 if dtype in FLOATS else 3
                c = pf.full((), v, dtype=dtype, device=x.device)
                if k % 2:
                    c = pf.broadcast_to(pf.reshape(c, (1,) * len(shape)), tuple(shape))
                z = pf.where(c, x, y) if dtype == "bool" else x * c
            elif kind == "s":
                # A Python number: a scalar operand of the Binary node.
                if dtype in FLOATS:
                    z = x * 0.5 if k % 2 else 1.5 - x
                else:
                    z = x + 3 if dtype != "bool" else x
            elif kind == "t":
                # Through another dtype: float -> small int wraps through int64, NaN -> 0.
                others = [d for d in ("float32", "float16", "int8", "uint8", "float64") if d != dtype]
                z = x.astype(others[k % len(others)]).astype(dtype)
            else:
                z = pf.clamp(x, -1 if dtype != "uint8" else 1, 2) if dtype != "bool" else x
            live.append(z)
        # Several outputs: the last value and one from the middle.
        out = [live[-1], live[len(vals) + len(plan) // 2]]
        return out + [live[len(vals) + int(i)] for i in picks]
    picks = rng.integers(0, n_ops, size=held)
    return build


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("seed", range(6))
def test_random_graphs_fused_equals_unfused(device, dtype, seed):
    shape = [(5, 7), (3, 4, 33), (1000,), (2, 1, 6)][seed % 4]
    build = random_graph(1000 * seed + ALL_DTYPES.index(dtype), dtype, shape, device)
    both_ways(build)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "bool", "float64", "uint8"])
@pytest.mark.parametrize("seed", range(4))
def test_random_graphs_with_values_held_outside(device, dtype, seed):
    # Interior values also held outside: stored by the region (multi-output),
    # whether they are evaluated with it or later.
    shape = [(5, 7), (3, 4, 33), (1000,), (2, 1, 6)][seed]
    build = random_graph(1000 * seed + 77 + EVERY_DTYPE.index(dtype), dtype, shape, device, n_ops=10, held=3)
    both_ways(build)
    both_ways(build, first=1)


@pytest.mark.parametrize("dtype", NEW_DTYPES)
@pytest.mark.parametrize("seed", range(4))
def test_random_graphs_new_dtypes_fused_equals_unfused(device, dtype, seed):
    shape = [(5, 7), (3, 4, 33), (1000,), (2, 1, 6)][seed]
    both_ways(random_graph(1000 * seed + 50 + EVERY_DTYPE.index(dtype), dtype, shape, device))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32", "int64", "bool"])
def test_zero_size_and_scalar_shapes(device, dtype):
    for shape in [(0,), (3, 0), ()]:
        both_ways(random_graph(7, dtype, shape, device, n_ops=6))


def test_long_chain_over_blocks(device):
    # More elements than one block, a length not a multiple of it, broadcast rows.
    x = random_array((3, 5001))
    b = random_array((5001,))

    def build():
        t, u = make_tensor(x, device=device), make_tensor(b, device=device)
        y = t
        for i in range(60):  # longer than one region may be
            y = pf.tanh(y * 1.01 + u) if i % 2 else pf.relu(y - u * 0.5)
        return [y]
    assert both_ways(build) >= 2


def test_gelu_chain_is_one_region(device, fusion_on):
    x, w, b = (make_tensor(random_array(s), device=device) for s in [(64, 32), (32,), (32,)])
    y = pf.gelu(x * w + b)
    plan = pf.explain(y)
    assert plan.count("fused[") == 1 and "gelu(add(mul(x0, x1), x2))" in plan, plan
    pf.reset_fusion_stats()
    ref = pf.gelu(pf.add(pf.mul(x, w), b))
    pf.set_fusion(False)
    ref.eval()
    pf.set_fusion(True)
    assert pf.fusion_stats()["regions"] == 0
    np.testing.assert_array_equal(y.numpy(), ref.numpy())
    assert pf.fusion_stats()["regions"] == 1


def test_values_held_outside_are_stored_by_the_region(device, fusion_on):
    x = make_tensor(random_array((40,)), device=device)
    h = x * 2.0          # a user handle: must be materialized
    y = pf.exp(h) + 1.0
    plan = pf.explain(y)
    # One region computes h and y and stores both.
    assert plan.count("fused[") == 1 and "2 outputs" in plan and "[+ stores mul(x0, s0)]" in plan, plan
    assert "mul" not in plan.split("fused[")[0], plan
    pf.reset_fusion_stats()
    y.eval()
    assert pf.fusion_stats()["regions"] == 1
    np.testing.assert_array_equal(h.numpy(), x.numpy() * np.float32(2.0))
    pf.set_fusion(False)
    np.testing.assert_array_equal(y.numpy(), (pf.exp(x * 2.0) + 1.0).numpy())


def test_value_needed_earlier_ends_the_region(device, fusion_on):
    # h feeds a reduction that the order runs before y's region: h cannot
    # wait for the region, so it is computed on its own and loaded.
    x = make_tensor(random_array((8, 5)), device=device)
    h = pf.exp(x * 0.5)
    s = h.sum()
    y = pf.tanh(h + s)
    del h
    plan = pf.explain(y)
    assert "outputs" not in plan, plan
    got = y.numpy()
    pf.set_fusion(False)
    h2 = pf.exp(x * 0.5)
    np.testing.assert_array_equal(got, pf.tanh(h2 + h2.sum()).numpy())


def test_gelu_gradient_is_one_region(device, fusion_on):
    x = make_tensor(random_array((64, 33)), device=device)
    x.requires_grad = True
    y = pf.gelu(x)
    up = make_tensor(random_array((64, 33)), device=device)
    (g,) = pf.grad([y], [x], [up])
    plan = pf.explain(g)
    assert plan.count("fused[") == 1 and "erf" in plan and "exp" in plan, plan
    assert "  mul" not in plan and "  add" not in plan, plan


def test_requires_grad_values_are_kept_for_backward(device, fusion_on):
    xs = random_array((6, 5))
    x = make_tensor(xs, device=device)
    x.requires_grad = True
    y = pf.sigmoid(pf.tanh(x * 3.0) + x)
    y.sum().backward()
    g_fused = x.grad.numpy()
    pf.set_fusion(False)
    x2 = make_tensor(xs, device=device)
    x2.requires_grad = True
    pf.sigmoid(pf.tanh(x2 * 3.0) + x2).sum().backward()
    np.testing.assert_array_equal(g_fused, x2.grad.numpy())


def test_forward_recording_gradients_fuses_with_stored_members(device, fusion_on):
    # nn.Linear then ReLU with parameters that require grad: the bias add and
    # the relu are one region that also stores the sum (backward reads both),
    # with the values and gradients of the unfused run, bit for bit. One row:
    # a GPU folds the bias and relu of larger products into the GEMM
    # (test_gemm_epilogue.py).
    rng = np.random.default_rng(7)
    xs, ws, bs = (rng.standard_normal(s).astype(np.float32) for s in ((1, 6), (6, 5), (5,)))
    plan = []

    def build():
        x = pf.tensor(xs, device=device)
        w, b = pf.tensor(ws, device=device), pf.tensor(bs, device=device)
        w.requires_grad = True
        b.requires_grad = True
        y = pf.relu(pf.matmul(x, w) + b)
        plan.append(pf.explain(y))
        (y * y).sum().backward()
        return [y, w.grad, b.grad]
    regions = both_ways(build)
    assert regions >= 1 and "relu(add(" in plan[0] and "stores add(" in plan[0], plan[0]
    assert "fused" not in plan[1], plan[1]


@pytest.mark.parametrize("seed", range(3))
def test_gradients_fused_equal_unfused(device, seed):
    rng = np.random.default_rng(seed)
    xs, ws = rng.standard_normal((8, 16)).astype(np.float32), rng.standard_normal(16).astype(np.float32)

    def build():
        x, w = pf.tensor(xs, device=device), pf.tensor(ws, device=device)
        x.requires_grad = True
        w.requires_grad = True
        y = pf.gelu(x * w + 0.25) * pf.sigmoid(x) - pf.clamp(x, -0.5, 0.5)
        (y * y).mean().backward()
        return [x.grad, w.grad]
    both_ways(build)


def test_adam_step_fused_equals_unfused(device):
    def build():
        np.random.seed(3)
        pf.manual_seed(3)
        model = pf.nn.Sequential(pf.nn.Linear(8, 16), pf.nn.GELU(), pf.nn.Linear(16, 4)).to(device)
        opt = pf.optim.Adam(model.parameters(), lr=1e-2)
        x = pf.tensor(np.random.randn(32, 8).astype(np.float32), device=device)
        for _ in range(3):
            opt.zero_grad()
            loss = (model(x) ** 2).mean()
            loss.backward()
            opt.step()
        return [p for p in model.parameters()]
    if not hasattr(pf.nn, "GELU"):
        pytest.skip("no nn.GELU")
    both_ways(build)


# ------------------------------------------------------------ reductions as anchors

REDUCE_CASES = [  # (shape, axis): trailing, leading, all, a middle axis (stays unfused), big
    ((7, 33), 1), ((7, 33), 0), ((3, 4, 5), (1, 2)), ((3, 4, 5), None), ((3, 4, 5), 1),
    ((70001,), None), ((2, 40000), 1), ((300, 257), 0), ((5, 0), 1), ((0, 6), 0),
]


def _prologue(x, y, dtype, k):
    if dtype not in FLOATS:
        return [x * y, pf.abs(x - y), x + 3][k % 3]
    return [x * x, x * y, pf.exp(x * 0.5) - y, pf.where(x > y, x, y * 2.0)][k % 4]


def _anchors(device, dtype, shape, axis):
    """1 where the reduction takes its prologue: each output's elements one
    row-major range (trailing axes; on the CPU leading ones too), a dtype the
    device's fused reductions take. An empty reduction is a constant."""
    nd = len(shape)
    axes = list(range(nd)) if axis is None else sorted(np.atleast_1d(axis) % nd)
    trailing = axes == list(range(nd - len(axes), nd))
    leading = axes == list(range(len(axes)))
    if 0 in shape:
        return 0
    if device == "cpu":
        return int(trailing or leading)
    return int(trailing and dtype in ("float32", "float16", "bfloat16"))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64", "int32", "int64", "uint8"])
@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
def test_reduction_prologue_fused_equals_unfused(device, dtype, op):
    rng = np.random.default_rng(abs(hash((dtype, op))) % 1000)
    for k, (shape, axis) in enumerate(REDUCE_CASES):
        if op in ("max", "min") and 0 in shape:
            continue  # an empty max is an error, fused or not
        xs = special(np.array(random_array(shape, dtype)), dtype, rng)
        ys = np.array(random_array(shape, dtype))

        def build():
            x, y = make_tensor(xs, dtype, device), make_tensor(ys, dtype, device)
            v = _prologue(x, y, dtype, k)
            r = getattr(v, op)(axis=axis) if axis is not None else getattr(v, op)()
            return [r, getattr(v * 2, op)(axis=axis, keepdim=True) if axis is not None else r]
        regions = both_ways(build)
        assert regions >= _anchors(device, dtype, shape, axis), (shape, axis)


def test_reduction_prologue_is_one_region(device, fusion_on):
    x, y = (make_tensor(random_array((64, 300)), device=device) for _ in range(2))
    for r, text in [((x * x).sum(axis=1), "sum(mul(x0, x0), axes=1)"),
                    ((x * y).mean(), "mean(mul(x0, x1), axes=0,1)"),
                    (pf.exp(x - y).max(axis=-1, keepdim=True), "max(exp(sub(x0, x1)), axes=1)")]:
        plan = pf.explain(r)
        assert plan.count("fused[") == 1 and text in plan and "  mul" not in plan, plan
        pf.reset_fusion_stats()
        r.eval()
        assert pf.fusion_stats()["regions"] == 1


def test_reduction_input_held_outside_is_written(device, fusion_on):
    x = make_tensor(random_array((8, 9)), device=device)
    sq = x * x  # held: the reduction loads it instead of recomputing it
    s = sq.sum(axis=1)
    plan = pf.explain(s)
    assert "fused[" not in plan, plan
    np.testing.assert_allclose(s.numpy(), (x.numpy() ** 2).sum(axis=1), rtol=1e-5)
    np.testing.assert_array_equal(sq.numpy(), x.numpy() * x.numpy())


def _adam_model(device, opt_cls, **kw):
    np.random.seed(5)
    pf.manual_seed(5)
    model = pf.nn.Sequential(pf.nn.Linear(8, 16), pf.nn.Linear(16, 4)).to(device)
    x = pf.tensor(np.random.randn(32, 8).astype(np.float32), device=device)
    opt = opt_cls(model.parameters(), **kw)

    def grads():
        opt.zero_grad()
        (model(x) ** 2).mean().backward()
        pf.eval(*[p.grad for p in model.parameters()])
    return model, opt, grads


@pytest.mark.parametrize("opt_cls,kw,stored", [
    ("Adam", dict(lr=1e-2), 3),
    ("AdamW", dict(lr=1e-2, weight_decay=0.1), 3),
    ("Adam", dict(lr=1e-2, amsgrad=True), 4),
    ("SGD", dict(lr=0.1, momentum=0.9), 2),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True), 2),
])
def test_optimizer_step_is_one_region_per_parameter(device, fusion_on, opt_cls, kw, stored):
    model, opt, grads = _adam_model(device, getattr(pf.optim, opt_cls), **kw)
    params = list(model.parameters())
    for _ in range(2):  # the first steps start from zero state (a constant, not a load)
        grads()
        opt.step()
    for step in range(3):
        grads()
        for g in opt.param_groups:
            g["lr"] *= 0.5  # a new learning rate: a kernel argument, not new source
        pf.reset_fusion_stats()
        if step < 2:
            opt.step()
        else:  # the step's own graph: one region per parameter, storing the state too
            with pf.no_grad():
                pending = [t for g in opt.param_groups for t in opt._update(g)]
            plan = pf.explain(*pending)
            assert plan.count("fused[") == len(params), plan
            assert plan.count(f"{stored} outputs") == len(params), plan
            pf.eval(*pending)
        s = pf.fusion_stats()
        # New moments and parameter written by one kernel per parameter;
        # the same kernels every step (nothing compiled after the first).
        assert s["regions"] == len(params) and s["fallbacks"] == 0, s
        assert s["compiles"] == 0 and s["disk_hits"] == 0, s


@pytest.mark.parametrize("opt_cls,kw", [("Adam", dict(lr=1e-2, amsgrad=True)),
                                        ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1))])
def test_optimizer_steps_fused_equal_unfused(device, opt_cls, kw):
    def build():
        model, opt, grads = _adam_model(device, getattr(pf.optim, opt_cls), **kw)
        for _ in range(3):
            grads()
            opt.step()
        state = [t for s in opt.state.values() for t in s.values() if isinstance(t, pf.Tensor)]
        return list(model.parameters()) + state
    both_ways(build)


# ------------------------------------------------------------ the switches

def test_set_fusion_and_plan_text(fusion_on):
    assert pf.get_fusion() is True
    x = pf.tensor(np.arange(6, dtype=np.float32))
    y = pf.relu(x + 1.0)
    assert "fused[" in pf.explain(y)
    pf.set_fusion(False)
    assert pf.get_fusion() is False
    text = pf.explain(y)
    assert "fusion off" in text and "fused[" not in text
    np.testing.assert_array_equal(y.numpy(), np.maximum(np.arange(6) + 1.0, 0))
    with pytest.raises(ValueError, match=r"\[explain\]"):
        pf.explain(x, 3)


def test_can_fuse_names_the_spec_patterns():
    assert pf.can_fuse(["matmul", "add", "relu"]) == "MATMUL_BIAS_RELU"
    assert pf.can_fuse(["matmul", "add", "gelu"]) == "MATMUL_BIAS_GELU"
    assert pf.can_fuse(["matmul", "add"]) == "MATMUL_BIAS"
    assert pf.can_fuse(["conv2d", "add"]) == "CONV_BIAS"
    assert pf.can_fuse(["conv2d", "add", "relu"]) == "CONV_BIAS_RELU"
    assert pf.can_fuse(["conv2d", "batch_norm", "relu"]) == "CONV_BN_RELU"
    assert pf.can_fuse(["add", "relu"]) == "ADD_RELU"
    assert pf.can_fuse(["mul", "add"]) == "MUL_ADD"
    assert pf.can_fuse(["relu", "matmul"]) is None
    assert pf.can_fuse([]) is None


def test_matmul_bias_relu_epilogue(device, fusion_on):
    """The CPU runs the bias and relu as a region after the matmul; a GPU as
    one GEMM with the library's epilogue (float32; test_gemm_epilogue.py),
    and a 16-bit bias again as a region."""
    a, w, b = (make_tensor(random_array(s), device=device) for s in [(4, 8), (8, 5), (5,)])
    plan = pf.explain(pf.relu(pf.matmul(a, w) + b))
    if device == "cpu":
        assert "matmul" in plan and "relu(add(x0, x1))" in plan, plan
        return
    assert "fused_gemm" in plan and "matmul" not in plan, plan
    a, w, b = (t.astype(pf.float16) for t in (a, w, b))
    pf.eval(a, w, b)
    plan = pf.explain(pf.relu(pf.matmul(a, w) + b))
    assert "matmul" in plan and "relu(add(x0, x1))" in plan, plan


def test_scalar_operands_are_kernel_arguments(fusion_on):
    x = pf.tensor(np.linspace(-2, 2, 50, dtype=np.float32))
    y = pf.relu(1.375 - x * 0.3125)
    plan = pf.explain(y)
    assert "2 scalars" in plan and "relu(sub(s1, mul(x0, s0)))" in plan, plan
    # The numbers are not in the generated source: another value, the same kernel.
    (name, src), = pf._core._fused_sources([y])
    (name2, _), = pf._core._fused_sources([pf.relu(-3.5 - x * 0.1)])
    assert name == name2 and "0.3125" not in src and "1.375" not in src
    xs = np.linspace(-2, 2, 50, dtype=np.float32)
    ref = np.maximum(np.float32(1.375) - xs * np.float32(0.3125), np.float32(0))
    np.testing.assert_array_equal(y.numpy(), ref)


@pytest.mark.parametrize("dtype", NEW_DTYPES)
def test_new_dtypes_fuse_on_cpu(fusion_on, dtype):
    x = make_tensor(random_array((4, 9), dtype), dtype, "cpu")
    y = pf.maximum(x + 1, x * 2)
    assert "fused[" in pf.explain(y), pf.explain(y)


def test_gpu_fusion_is_on_by_default():
    code = "import pyflame as pf; print(pf.get_fusion(), pf.get_fusion_gpu())"
    env = {k: v for k, v in os.environ.items() if k != "PYFLAME_FUSION_GPU"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]
    env["PYFLAME_FUSION_GPU"] = "0"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False"]


def test_gpu_switch(fusion_on):
    pf.set_fusion(True, gpu=False)
    assert pf.get_fusion() is True and pf.get_fusion_gpu() is False
    pf.set_fusion(False)  # gpu left as it is
    assert pf.get_fusion_gpu() is False
    pf.set_fusion(True, gpu=True)
    assert pf.get_fusion_gpu() is True


def test_gpu_regions_stay_unfused_unless_enabled(gpu_device, fusion_on):
    x = pf.tensor(np.linspace(-2, 2, 64, dtype=np.float32), device=gpu_device)
    # The plans are made outside the asserts: pytest's assertion rewriting
    # would hold the intermediate tensors, and held values end a region.
    pf.set_fusion(True, gpu=False)
    plan = pf.explain(pf.gelu(x * 0.5 + 1.0))
    assert "fused[" not in plan
    pf.set_fusion(True, gpu=True)
    plan = pf.explain(pf.gelu(x * 0.5 + 1.0))
    assert "fused[" in plan


def test_environment_switch_turns_fusion_off():
    code = "import pyflame as pf; print(pf.get_fusion())"
    env = dict(os.environ, PYFLAME_FUSION="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------ GPU kernel cache

_CACHE_PROBE = """
import numpy as np, pyflame as pf
pf.set_fusion(True, gpu=True)
x = pf.tensor(np.linspace(-3, 3, 5000, dtype=np.float32), device="rocm")
y = pf.gelu(x * 0.5 + 1.0)
got = y.numpy()
pf.set_fusion(False)
ref = pf.gelu(x * 0.5 + 1.0).numpy()
assert np.array_equal(got.view(np.uint32), ref.view(np.uint32))
s = pf.fusion_stats()
print(s["compiles"], s["disk_hits"], s["regions"], s["fallbacks"])
"""


def _probe(cache_dir):
    env = dict(os.environ, PYFLAME_CACHE_DIR=str(cache_dir))
    out = subprocess.run([sys.executable, "-c", _CACHE_PROBE], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return tuple(int(v) for v in out.stdout.split())


def test_disk_cache_second_process_compiles_nothing(gpu_device, tmp_path):
    assert _probe(tmp_path) == (1, 0, 1, 0)  # compiled once, ran fused
    files = list((tmp_path / "kernels").iterdir())
    assert len(files) == 1 and files[0].suffix == ".bin"  # no temporary left behind
    assert _probe(tmp_path) == (0, 1, 1, 0)  # read from disk


@pytest.mark.parametrize("damage", ["truncate", "flip", "foreign"])
def test_damaged_cache_file_is_rebuilt(gpu_device, tmp_path, damage):
    _probe(tmp_path)
    (f,) = list((tmp_path / "kernels").iterdir())
    data = bytearray(f.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip":
        data[-100] ^= 0xFF  # inside the code object: the checksum catches it
    else:
        data[20] ^= 0x01    # inside the stored key: another kernel's file
    f.write_bytes(bytes(data))
    assert _probe(tmp_path) == (1, 0, 1, 0)  # rebuilt, and still right
    assert _probe(tmp_path) == (0, 1, 1, 0)


def test_gpu_region_runs_one_kernel_and_is_listed(gpu_device, fusion_on):
    x = pf.tensor(np.linspace(-2, 2, 300, dtype=np.float32).reshape(3, 100), device=gpu_device)
    w = pf.tensor(np.linspace(0, 1, 100, dtype=np.float32), device=gpu_device)
    y = pf.gelu(x * w + 0.5)
    y.numpy()
    z = pf.gelu(x * w + 0.5)
    assert "run-time compiled kernel pf_fused_" in pf.explain(z) and "(loaded)" in pf.explain(z)


# ------------------------------------------------------------ CONV_BN_RELU in inference

@pytest.mark.parametrize("nd,groups,bias", [(2, 1, True), (2, 2, False), (1, 1, True)])
def test_conv_bn_relu_folds_in_inference(device, fusion_on, nd, groups, bias):
    torch = pytest.importorskip("torch")
    torch.manual_seed(nd + groups)
    conv, bn = (torch.nn.Conv2d, torch.nn.BatchNorm2d) if nd == 2 else (torch.nn.Conv1d, torch.nn.BatchNorm1d)
    ref_model = torch.nn.Sequential(conv(4, 6, 3, padding=1, groups=groups, bias=bias), bn(6), torch.nn.ReLU())
    with torch.no_grad():  # running statistics and affine parameters away from their defaults
        ref_model[1].running_mean.uniform_(-1, 1)
        ref_model[1].running_var.uniform_(0.25, 2)
        ref_model[1].weight.uniform_(-1.5, 1.5)
        ref_model[1].bias.uniform_(-0.5, 0.5)
    ref_model.eval()
    x = np.random.default_rng(nd).standard_normal((2, 4) + (9,) * nd).astype(np.float32)
    ref = ref_model(torch.tensor(x)).detach().numpy()

    pconv, pbn = (pf.nn.Conv2d, pf.nn.BatchNorm2d) if nd == 2 else (pf.nn.Conv1d, pf.nn.BatchNorm1d)
    model = pf.nn.Sequential(pconv(4, 6, 3, padding=1, groups=groups, bias=bias), pbn(6), pf.nn.ReLU())
    model.load_state_dict({k: v.numpy() for k, v in ref_model.state_dict().items()})
    model.to(device).eval()
    xt = pf.tensor(x, device=device)
    tol = 1e-5 if device == "cpu" else 1e-4  # a GPU convolution sums in another order
    with pf.no_grad():
        y = model(xt)
        plan = pf.explain(y)
        # Folded: no batch norm, the bias add and relu one region after the convolution.
        assert "batch_norm" not in plan and "conv" in plan and "relu(add(x0, x1))" in plan, plan
        np.testing.assert_allclose(y.numpy(), ref, rtol=tol, atol=tol)
        pf.set_fusion(False)  # unfolded: the batch norm kernel, the same values up to rounding
        y2 = model(xt)
        assert "batch_norm" in pf.explain(y2)
        np.testing.assert_allclose(y2.numpy(), ref, rtol=tol, atol=tol)
    pf.set_fusion(True)
    # Recording gradients: the graph keeps its batch norm (autograd sees the values it expects).
    y3 = model(xt)
    assert "batch_norm" in pf.explain(y3)


def test_constants_read_only_by_a_region_are_not_evaluated(device, fusion_on):
    """A constant (a full, through any views) that only a region reads
    becomes a kernel argument and is never filled in memory; one that
    something else also holds is evaluated as usual."""
    x = make_tensor(random_array((8, 6)), device=device)

    def build():
        a = pf.where(x > 0, x, pf.full((), -0.25)) * 2.0
        b = pf.exp(x) + pf.full((8, 6), 3.0)
        c = pf.tanh(x) - pf.broadcast_to(pf.reshape(pf.full((), 1.5), (1, 1)), (8, 6))
        return [a, b, c]
    for y in build():
        plan = pf.explain(y)
        assert plan.count("fused[") == 1 and "full" not in plan, plan
    both_ways(build)
    kept = pf.full((8, 6), 3.0)  # a user handle: filled, and read by the region as a load
    y = pf.exp(x) + kept
    assert "full" in pf.explain(y), pf.explain(y)
    np.testing.assert_allclose(y.numpy(), np.exp(x.numpy()) + np.float32(3.0), rtol=1e-6)
    np.testing.assert_array_equal(kept.numpy(), np.full((8, 6), 3.0, np.float32))


def test_relu_gradient_fills_no_zeros(device, fusion_on):
    x = make_tensor(random_array((16, 8)), device=device)
    w = make_tensor(random_array((8, 4)), device=device)
    w.requires_grad = True
    (g,) = pf.grad([pf.relu(pf.matmul(x, w)).sum()], [w])
    plan = pf.explain(g)
    assert "full" not in plan and plan.count("fused[") == 1, plan
    h = x.numpy() @ w.numpy()
    np.testing.assert_allclose(g.numpy(), x.numpy().T @ (h > 0).astype(np.float32), rtol=1e-5, atol=1e-5)
