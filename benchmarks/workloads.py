"""The workload registry: BENCHMARKS.md's workloads, each written once
against a framework adapter (see harness.py) so PyFlame and PyTorch run the
same computation.

A workload's `build(F, p, dtype)` makes its inputs and returns a step: a
function that does one iteration and returns what PyFlame must evaluate (or
None when the step evaluates by itself). `requires` names the PyFlame
attributes it needs ("conv2d", "nn.Linear", "a|b" for either); a workload
whose requirements are missing is reported as n/a, and lights up once the op
lands. Sizes come in three tiers: "gpu" (BENCHMARKS.md's GPU sizes), "cpu"
(its CPU table, smaller) and "small" (tiny, for CI smoke runs).
"""
from dataclasses import dataclass, field
from typing import Callable, Optional

from harness import ITEMSIZE, SHORT_DTYPE

M = 1 << 20
MLP_DIMS = (784, 256, 128, 10)


@dataclass
class Target:
    """A BENCHMARKS.md target; `check(result, context)` says whether it is
    met (None: not checkable here)."""
    text: str
    check: Optional[Callable] = None


def rate_at_least(text, value):
    return Target(text, lambda r, ctx: r["rate"] >= value)


def time_at_most(text, seconds):
    return Target(text, lambda r, ctx: r["ours_s"] <= seconds)


def ratio_at_most(text, ratio):
    return Target(text, lambda r, ctx: None if r.get("ratio") is None else r["ratio"] <= ratio)


def at_least_numpy(r, ctx):  # NumPy's GEMM rate is measured with the ceilings on the CPU
    numpy_rate = ctx["ceilings"]["gemm"]["float32"]["by"].get("numpy")
    return r["rate"] >= numpy_rate if isinstance(numpy_rate, float) else None


@dataclass
class Workload:
    name: str
    group: str  # matmul, conv, elementwise, reduction, softmax, norm, mlp, host, train, llm, multistream
    build: Callable  # build(F, p, dtype) -> step
    sizes: dict  # tier -> params; a "dtype" param fixes the dtype, else --dtype applies
    label: Callable  # params -> size text
    requires: tuple = ()
    bytes: Optional[Callable] = None  # (p, itemsize) -> minimum bytes moved per step
    flops: Optional[Callable] = None  # p -> FLOPs per step
    items: Callable = lambda p: 1  # items per step (ops, tokens, evaluations); times are per item
    unit: Optional[str] = None  # rate unit for item rates ("op/s", "tok/s", "eval/s")
    targets: dict = field(default_factory=dict)  # "gpu"/"cpu" -> Target
    gpu_only: bool = False
    note: str = ""

    def work(self, p, dtype):
        """Bytes moved (memory-bound workloads) or FLOPs (compute-bound) per step."""
        if self.bytes:
            return self.bytes(p, ITEMSIZE[dtype])
        return self.flops(p) if self.flops else None


def tiers(gpu, cpu, small):
    return {"gpu": gpu, "cpu": cpu, "small": small}


def n_label(p):
    n = p["n"]
    return f"{n // M}M" if n >= M else f"{n // 1024}K"


# ----------------------------------------------------------- elementwise

def binary_add(F, p, dt):
    x, y = F.rand(p["n"], dtype=dt), F.rand(p["n"], dtype=dt)
    return lambda: x + y


def unary(op):
    def build(F, p, dt):
        x, fn = F.rand(p["n"], dtype=dt), getattr(F, op)
        return lambda: fn(x)
    return build


def gelu_chain(F, p, dt):
    """gelu(x*w+b) on full-size operands: one read of x, w, b and one write
    when fused; PyFlame's lazy graph should fuse it with no annotation."""
    x, w, b = (F.rand(p["n"], dtype=dt) for _ in range(3))
    return lambda: F.gelu(x * w + b)


_CHAIN_OPS = ("relu", "tanh", "sigmoid", "exp", "sin", "cos", "silu", "gelu")


def fused_chain(cold):
    """A 12-op elementwise chain fused into one region. Cold: the chain's
    pattern is new at every step (a counter picks its ops, from a random
    start so no earlier process cached it), so each step pays for the
    region's first run, run-time compilation included on the GPU. Warm: the
    same pattern every step, its kernel cached."""
    def build(F, p, dt):
        import random
        x, w = F.rand(p["n"], dtype=dt), F.rand(p["n"], dtype=dt)
        state = {"k": random.randrange(1 << 20) if cold else 0}

        def step():
            k = state["k"]
            state["k"] += 1 if cold else 0
            y = x * w
            for bit in range(12):
                y = getattr(F, _CHAIN_OPS[2 * (bit % 4) + ((k >> bit) & 1)])(y)
            return y
        return step
    return build


def reduce_sum(F, p, dt):
    x = F.rand(p["n"], dtype=dt)
    return lambda: F.sum(x)


def softmax_rows(F, p, dt):
    x = F.randn(p["rows"], p["cols"], dtype=dt)
    return lambda: F.softmax(x, -1)


def layer_norm(F, p, dt):
    x = F.randn(p["rows"], p["cols"], dtype=dt)
    w, b = F.rand(p["cols"], dtype=dt), F.randn(p["cols"], dtype=dt)
    return lambda: F.layer_norm(x, (p["cols"],), w, b, 1e-5)


def rms_norm(F, p, dt):
    x, w = F.randn(p["rows"], p["cols"], dtype=dt), F.rand(p["cols"], dtype=dt)
    return lambda: F.rms_norm(x, w, 1e-6)


# ------------------------------------------------------- matmul, conv, pool

def gemm(F, p, dt):
    a = F.randn(p["m"], p["k"], dtype=dt, scale=p["k"] ** -0.5)
    b = F.randn(p["k"], p["n"], dtype=dt)
    return lambda: F.matmul(a, b)


def conv3x3(F, p, dt):
    x = F.randn(p["n"], p["c"], p["hw"], p["hw"], dtype=dt)
    w = F.randn(p["k"], p["c"], 3, 3, dtype=dt, scale=(9 * p["c"]) ** -0.5)
    return lambda: F.conv2d(x, w, stride=1, padding=1)


def max_pool(F, p, dt):
    x = F.randn(p["n"], p["c"], p["hw"], p["hw"], dtype=dt)
    return lambda: F.max_pool2d(x, kernel_size=2, stride=2)


# ------------------------------------------------------------ MLP, host

def mlp_weights(F, dt):
    return [(F.randn(i, o, dtype=dt, scale=i ** -0.5), F.randn(o, dtype=dt, scale=0.1))
            for i, o in zip(MLP_DIMS, MLP_DIMS[1:])]


def _mlp_apply(F, layers, h):
    for i, (w, b) in enumerate(layers):
        h = F.matmul(h, w) + b
        h = F.relu(h) if i < len(layers) - 1 else h
    return h


def mlp_forward(F, p, dt):
    """784-256-128-10 with ReLU, written with matmul/add/relu in both
    frameworks (what nn.Linear does), weights stored (in, out)."""
    x, layers = F.randn(p["batch"], MLP_DIMS[0], dtype=dt), mlp_weights(F, dt)
    return lambda: _mlp_apply(F, layers, x)


def mlp_forward_compiled(F, p, dt):
    """mlp_forward under pf.compile (PyTorch: a CUDA graph on a GPU, eager
    on the CPU)."""
    x, layers = F.randn(p["batch"], MLP_DIMS[0], dtype=dt), mlp_weights(F, dt)
    return F.compile(lambda h: _mlp_apply(F, layers, h), x)


def mlp_flops(batch):
    return 2 * batch * sum(i * o for i, o in zip(MLP_DIMS, MLP_DIMS[1:]))


def host_record(F, p, dt):
    """Python cost of recording a tiny op. PyFlame records lazily (nothing
    is evaluated); PyTorch has no lazy mode, so its figure is its eager op."""
    a, b, n = F.rand(16, dtype=dt), F.rand(16, dtype=dt), p["ops"]

    def step():
        for _ in range(n):
            a + b
    return step


def host_eager(F, p, dt):
    """A tiny op recorded and evaluated one at a time, as eager code does."""
    a, b, n = F.rand(16, dtype=dt), F.rand(16, dtype=dt), p["ops"]

    def step():
        for _ in range(n):
            F.run(a + b)
    return step


def host_eager_scalar(F, p, dt):
    """As host_eager with a Python number as the second operand (x * 0.5):
    the number travels as a kernel argument, no buffer or fill kernel."""
    a, n = F.rand(16, dtype=dt), p["ops"]

    def step():
        for _ in range(n):
            F.run(a * 0.5)
    return step


# --------------------------------------------------------- training step

def _mlp_module(F):
    """The MLP as an nn.Sequential of Linear and ReLU on the device."""
    nn, dims = F.nn, MLP_DIMS
    return F.module(nn.Sequential(nn.Linear(dims[0], dims[1]), nn.ReLU(),
                                  nn.Linear(dims[1], dims[2]), nn.ReLU(),
                                  nn.Linear(dims[2], dims[3])))


def _train_setup(F, p):
    """The MLP, its SGD and one batch; step(x, y) is one training step."""
    model = _mlp_module(F)
    opt = F.optim.SGD(list(model.parameters()), lr=0.01)
    x, y = F.randn(p["batch"], MLP_DIMS[0]), F.randint(0, MLP_DIMS[3], (p["batch"],))

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return model, x, y, step


def mlp_forward_module(F, p, dt):
    """The MLP as an nn.Sequential, called as a user calls it: the parameters
    require grad, so the forward records autograd."""
    model, x = _mlp_module(F), F.randn(p["batch"], MLP_DIMS[0])
    return lambda: model(x)


def train_step(F, p, dt):
    """MLP 784-256-128-10, forward + cross-entropy + backward + SGD."""
    model, x, y, step = _train_setup(F, p)
    # the updated weights must be computed
    return lambda: [step(x, y), *model.parameters()]


def train_step_compiled(F, p, dt):
    """train_step as one compiled function (PyTorch: eager)."""
    model, x, y, step = _train_setup(F, p)
    compiled = F.compile(step, x, y, graph=False)
    return lambda: [compiled(), *model.parameters()]


# ------------------------------------------------------------ LLM decode, prefill

def llm_decode(compiled):
    def build(F, p, dt):
        """One decode token of a Llama-shaped model (random weights in a
        temporary safetensors directory, loaded by pyflame.llm; PyTorch runs
        the same weights, see llm_model.py), batch 1, at position `ctx` of a
        fixed-capacity KV cache filled by a prefill. Every step rewinds the
        cache to `ctx`, so all steps cost the same. compiled: ours through
        model.decode (the compiled step generate uses: one trace, on a GPU one
        graph, replayed per token); else the eager model call. PyTorch: eager."""
        import llm_model
        model = llm_model.load(F, p, dt)
        cache = model.make_cache(1, p["ctx"] + 1)
        prompt = [[(7 * i + 3) % p["vocab"] for i in range(p["ctx"])]]
        F.run(model(prompt, cache))
        token = [[5]]
        run = model.decode if compiled and not F.is_torch else model

        def step():
            cache.offset = p["ctx"]
            return run(token, cache)
        return step
    return build


def llm_prefill(F, p, dt):
    """The logits of a `prompt`-token prompt through the same model (cache
    rewound each step)."""
    import llm_model
    model = llm_model.load(F, p, dt)
    cache = model.make_cache(1, p["prompt"])
    prompt = [[(7 * i + 3) % p["vocab"] for i in range(p["prompt"])]]

    def step():
        cache.offset = 0
        return model(prompt, cache)
    return step


def llm_bytes(p, itemsize):
    """Weights once per token (layers, embedding row and lm_head) plus the KV
    cache read (the floor)."""
    d, ffn, kv = p["d"], p["ffn"], p["d"] * p["kv_heads"] // p["heads"]
    layer = 2 * d * d + 2 * d * kv + 3 * d * ffn + 2 * p["ctx"] * kv
    return itemsize * (p["layers"] * layer + p["vocab"] * d)


def llm_prefill_flops(p):
    d, ffn, kv, S = p["d"], p["ffn"], p["d"] * p["kv_heads"] // p["heads"], p["prompt"]
    per_token = 2 * (p["layers"] * (2 * d * d + 2 * d * kv + 3 * d * ffn) + p["vocab"] * d)
    return S * per_token + p["layers"] * 2 * d * S * S  # + causal attention (half of 4dS^2)


# ----------------------------------------------------------- multi_stream

def multistream(on, compiled=False):
    def build(F, p, dt):
        """`threads` Python threads, each uploading a batch, running an
        8-layer 1024-wide net and downloading the result, `evals` times per
        step. PyTorch runs the same from threads on its default stream."""
        import numpy as np
        from concurrent.futures import ThreadPoolExecutor
        if not F.is_torch:
            F.set_multi_stream(on)
        width = p["width"]
        weights = [F.randn(width, width, dtype=dt, scale=width ** -0.5) for _ in range(p["layers"])]
        rng = np.random.default_rng()
        inputs = [rng.standard_normal((b, width)).astype(dt) for b in p["batches"]]

        def layers(x):
            for wt in weights:
                x = F.relu(F.matmul(x, wt))
            return x

        # compiled: each thread its own compiled function of the layers
        # (the upload and download stay outside: they are host transfers).
        run = [F.pf.compile(layers) if compiled and not F.is_torch else layers
               for _ in range(p["threads"])]

        def worker(i):
            for j in range(p["evals"]):
                F.download(run[i](F.upload(inputs[(i + j) % len(inputs)])))
        pool = ThreadPoolExecutor(p["threads"])

        def step():  # each evaluation downloads its result: nothing left to run
            list(pool.map(worker, range(p["threads"])))
        return step
    return build


def multistream_target(r, ctx):
    off = ctx["results"].get("multistream_off", {}).get("ours_s")
    return None if not off else r["rate"] >= 25e3 and off / r["ours_s"] >= 3.5


def multistream_compiled_target(r, ctx):
    off = ctx["results"].get("multistream_off", {}).get("ours_s")
    return None if not off else off / r["ours_s"] >= 3.0


# -------------------------------------------------------------- registry

ELEMENT = tiers(dict(n=64 * M), dict(n=16 * M), dict(n=64 * 1024))
ROWS = tiers(dict(rows=8192, cols=4096), dict(rows=2048, cols=4096), dict(rows=64, cols=256))
GPU_BW = rate_at_least("≥ 2.8 TB/s", 2.8e12)
rows_label = lambda p: f"{p['rows']}x{p['cols']}"  # noqa: E731


def _gemm(dtype, gpu_size, gpu_target=None, cpu_target=None):
    sizes = tiers(dict(m=gpu_size, n=gpu_size, k=gpu_size, dtype=dtype),
                  dict(m=1024, n=1024, k=1024, dtype=dtype), dict(m=64, n=64, k=64, dtype=dtype))
    targets = {k: v for k, v in (("gpu", gpu_target), ("cpu", cpu_target)) if v}
    return Workload(f"gemm_{SHORT_DTYPE[dtype]}", "matmul", gemm, sizes, lambda p: f"{p['m']}³",
                    flops=lambda p: 2 * p["m"] * p["n"] * p["k"], targets=targets)


def _conv(name, dtype, gpu_only=False, gpu_target=None):
    sizes = tiers(dict(n=32, c=256, k=256, hw=14), dict(n=8, c=64, k=64, hw=56),
                  dict(n=2, c=8, k=8, hw=8))
    if dtype:
        sizes = {t: dict(s, dtype=dtype) for t, s in sizes.items()}
    targets = {"gpu": gpu_target}
    if not gpu_only:
        targets["cpu"] = ratio_at_most("≤ PyTorch", 1.0)
    return Workload(name, "conv", conv3x3, sizes,
                    lambda p: f"N{p['n']} C{p['c']}→{p['k']} {p['hw']}²", requires=("conv2d",),
                    flops=lambda p: 2 * 9 * p["n"] * p["c"] * p["k"] * p["hw"] ** 2,
                    targets=targets, gpu_only=gpu_only)


WORKLOADS = [
    Workload("add", "elementwise", binary_add, ELEMENT, n_label, bytes=lambda p, s: 3 * p["n"] * s,
             targets={"gpu": GPU_BW, "cpu": Target("≤ NumPy (14.7 ms)")}),
    *[Workload(op, "elementwise", unary(op), ELEMENT, n_label, bytes=lambda p, s: 2 * p["n"] * s,
               targets={"gpu": GPU_BW}) for op in ("relu", "gelu", "silu", "exp")],
    Workload("gelu(x*w+b)", "elementwise", gelu_chain, ELEMENT, n_label,
             bytes=lambda p, s: 4 * p["n"] * s,
             targets={"gpu": time_at_most("≤ 0.38 ms, fused", 0.38e-3),
                      "cpu": time_at_most("≤ 40 ms, fused", 40e-3)}),
    # Compile cost shows as the gap between these two (same size, same op count).
    *[Workload(f"fused_{kind}", "elementwise", fused_chain(kind == "cold"),
               tiers(dict(n=M), dict(n=M), dict(n=4096)), n_label, requires=("set_fusion",),
               bytes=lambda p, s: 3 * p["n"] * s) for kind in ("cold", "warm")],
    Workload("sum", "reduction", reduce_sum, ELEMENT, n_label, bytes=lambda p, s: p["n"] * s,
             targets={"gpu": time_at_most("≤ 0.10 ms", 0.10e-3)}),
    Workload("softmax", "softmax", softmax_rows, ROWS, rows_label,
             bytes=lambda p, s: 2 * p["rows"] * p["cols"] * s,
             targets={"gpu": time_at_most("≤ 0.10 ms", 0.10e-3)}),
    Workload("layer_norm", "norm", layer_norm, ROWS, rows_label, requires=("layer_norm",),
             bytes=lambda p, s: 2 * p["rows"] * p["cols"] * s,
             targets={"gpu": time_at_most("≤ 0.10 ms", 0.10e-3)}),
    Workload("rms_norm", "norm", rms_norm, ROWS, rows_label, requires=("rms_norm",),
             bytes=lambda p, s: 2 * p["rows"] * p["cols"] * s,
             targets={"gpu": time_at_most("≤ 0.10 ms", 0.10e-3)}),
    _gemm("float32", 4096, ratio_at_most("≥ 98% of PyTorch", 1 / 0.98), Target("≥ NumPy", at_least_numpy)),
    _gemm("float16", 8192),
    _gemm("bfloat16", 8192, ratio_at_most("≥ 98% of PyTorch", 1 / 0.98)),
    _conv("conv3x3", None, gpu_target=ratio_at_most("within 10% of PyTorch", 1.10)),
    _conv("conv3x3_bf16", "bfloat16", gpu_only=True,
          gpu_target=ratio_at_most("within 10% of PyTorch", 1.10)),
    Workload("max_pool2d", "conv", max_pool,
             tiers(dict(n=32, c=256, hw=56), dict(n=8, c=64, hw=56), dict(n=2, c=8, hw=8)),
             lambda p: f"N{p['n']} C{p['c']} {p['hw']}² k2s2", requires=("max_pool2d",),
             bytes=lambda p, s: p["n"] * p["c"] * p["hw"] ** 2 * s * 5 // 4),
    Workload("mlp_forward", "mlp", mlp_forward,
             tiers(dict(batch=32), dict(batch=32), dict(batch=32)),
             lambda p: f"784-256-128-10 b{p['batch']}", flops=lambda p: mlp_flops(p["batch"]),
             targets={"gpu": time_at_most("≤ 0.06 ms", 0.06e-3),
                      "cpu": ratio_at_most("≤ PyTorch", 1.0)}),
    Workload("mlp_forward_module", "mlp", mlp_forward_module,
             tiers(dict(batch=32), dict(batch=32), dict(batch=32)),
             lambda p: f"784-256-128-10 b{p['batch']}", flops=lambda p: mlp_flops(p["batch"]),
             note="nn.Sequential, recording autograd"),
    Workload("mlp_forward_compiled", "mlp", mlp_forward_compiled,
             tiers(dict(batch=32), dict(batch=32), dict(batch=32)),
             lambda p: f"784-256-128-10 b{p['batch']}", flops=lambda p: mlp_flops(p["batch"]),
             requires=("compile",),
             targets={"gpu": time_at_most("≤ 35 µs", 35e-6)},
             note="pf.compile; PyTorch: CUDA graph (GPU), eager (CPU)"),
    Workload("host_record", "host", host_record,
             tiers(dict(ops=1000), dict(ops=1000), dict(ops=100)), lambda p: "16 elems",
             items=lambda p: p["ops"], unit="op/s",
             targets={t: time_at_most("≤ 5 µs/op", 5e-6) for t in ("gpu", "cpu")},
             note="PyTorch: its eager op"),
    Workload("host_eager", "host", host_eager,
             tiers(dict(ops=1000), dict(ops=1000), dict(ops=100)), lambda p: "16 elems",
             items=lambda p: p["ops"], unit="op/s", note="record + eval per op"),
    Workload("host_eager_scalar", "host", host_eager_scalar,
             tiers(dict(ops=1000), dict(ops=1000), dict(ops=100)), lambda p: "16 elems",
             items=lambda p: p["ops"], unit="op/s", note="x * 0.5, record + eval per op"),
    Workload("train_step", "train", train_step,
             tiers(dict(batch=256, dtype="float32"), dict(batch=256, dtype="float32"),
                   dict(batch=32, dtype="float32")),
             lambda p: f"784-256-128-10 b{p['batch']}",
             requires=("nn.Sequential", "nn.Linear", "nn.ReLU", "cross_entropy", "optim.SGD",
                       "Tensor.backward"),
             flops=lambda p: 3 * mlp_flops(p["batch"]),
             targets={"gpu": time_at_most("≤ 0.5 ms", 0.5e-3),
                      "cpu": ratio_at_most("≤ PyTorch", 1.0)}),
    Workload("train_step_compiled", "train", train_step_compiled,
             tiers(dict(batch=256, dtype="float32"), dict(batch=256, dtype="float32"),
                   dict(batch=32, dtype="float32")),
             lambda p: f"784-256-128-10 b{p['batch']}",
             requires=("compile", "nn.Sequential", "nn.Linear", "cross_entropy", "optim.SGD"),
             flops=lambda p: 3 * mlp_flops(p["batch"]),
             targets={"gpu": time_at_most("≤ 0.30 ms", 0.30e-3)},
             note="pf.compile of the whole step; PyTorch: eager"),
    *[Workload("llm_decode" + ("" if compiled else "_eager"), "llm", llm_decode(compiled),
               tiers(dict(d=2048, layers=16, heads=16, kv_heads=16, ffn=5632, vocab=32000, ctx=256,
                          dtype="float16"),
                     dict(d=512, layers=4, heads=8, kv_heads=8, ffn=1408, vocab=32000, ctx=128,
                          dtype="float32"),
                     dict(d=64, layers=2, heads=2, kv_heads=2, ffn=176, vocab=256, ctx=16,
                          dtype="float32")),
               lambda p: f"d{p['d']} L{p['layers']} ctx{p['ctx']}",
               requires=("llm", "slice_update") + (("compile",) if compiled else ()),
               bytes=llm_bytes, unit="tok/s",
               targets={"gpu": rate_at_least("≥ 1,200 tok/s", 1200),
                        "cpu": ratio_at_most("≤ PyTorch", 1.0)} if compiled else {},
               note=("pyflame.llm compiled decode step" if compiled else "pyflame.llm eager step")
               + "; PyTorch: same weights, static cache, SDPA, eager")
      for compiled in (True, False)],
    Workload("llm_prefill", "llm", llm_prefill,
             tiers(dict(d=2048, layers=16, heads=16, kv_heads=16, ffn=5632, vocab=32000, prompt=512,
                        dtype="float16"),
                   dict(d=512, layers=4, heads=8, kv_heads=8, ffn=1408, vocab=32000, prompt=128,
                        dtype="float32"),
                   dict(d=64, layers=2, heads=2, kv_heads=2, ffn=176, vocab=256, prompt=16,
                        dtype="float32")),
             lambda p: f"d{p['d']} L{p['layers']} {p['prompt']} tok",
             requires=("llm", "slice_update"), flops=llm_prefill_flops,
             items=lambda p: p["prompt"], unit="tok/s",
             targets={"gpu": ratio_at_most("≤ PyTorch", 1.0)},
             note="prompt logits; PyTorch: SDPA"),
    *[Workload(f"multistream_{'on' if on else 'off'}", "multistream", multistream(on),
               tiers(dict(threads=8, layers=8, width=1024, batches=(16, 32, 64, 128, 256), evals=4,
                          dtype="float16"),
                     {}, dict(threads=8, layers=2, width=64, batches=(16, 32), evals=2,
                              dtype="float16")),
               lambda p: f"{p['threads']} thr, {p['layers']}x{p['width']}",
               requires=("set_multi_stream",), items=lambda p: p["threads"] * p["evals"],
               unit="eval/s", gpu_only=True,
               targets={"gpu": Target("≥ 3.5× off, ≥ 25k eval/s", multistream_target)}
               if on else {},
               note="PyTorch: threads, default stream")
      for on in (False, True)],
    Workload("multistream_compiled", "multistream", multistream(True, compiled=True),
             tiers(dict(threads=8, layers=8, width=1024, batches=(16, 32, 64, 128, 256), evals=4,
                        dtype="float16"),
                   {}, dict(threads=8, layers=2, width=64, batches=(16, 32), evals=2,
                            dtype="float16")),
             lambda p: f"{p['threads']} thr, {p['layers']}x{p['width']}, compiled",
             requires=("set_multi_stream", "compile"), items=lambda p: p["threads"] * p["evals"],
             unit="eval/s", gpu_only=True,
             targets={"gpu": Target("≥ 3× off", multistream_compiled_target)},
             note="each thread its own pf.compile'd layers; PyTorch: threads, default stream"),
]

GROUPS = ("matmul", "conv", "elementwise", "reduction", "softmax", "norm", "mlp", "host", "train",
          "llm", "multistream")
