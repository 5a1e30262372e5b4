"""Device ceilings, measured in the same run as the workloads: copy bandwidth
(read + write) and GEMM rate per dtype. Each is measured with every
framework at hand (PyFlame, PyTorch, and NumPy on the CPU) and the best
figure is the ceiling, so a workload's fraction of ceiling says how close it
comes to what this machine demonstrably does, not to a datasheet."""
import numpy as np

import workloads

COPY_ELEMS = {"gpu": 128 << 20, "cpu": 16 << 20, "small": 1 << 20}  # fp32: 512 MiB on a GPU
GEMM_SIZE = {"gpu": {"float32": 4096, "float16": 8192, "bfloat16": 8192},
             "cpu": {"float32": 1024, "float16": 1024, "bfloat16": 1024},
             "small": {"float32": 128, "float16": 128, "bfloat16": 128}}


def _copy_step(F, n):
    x = F.rand(n)
    if F.is_torch:  # a plain device-to-device copy
        out = F.torch.empty_like(x)
        return lambda: out.copy_(x)
    return lambda: F.neg(x)  # PyFlame has no bare copy op: the cheapest read + write kernel


class _NumPy:
    """Enough of an adapter for the timer: NumPy runs synchronously on the CPU."""
    name, is_torch, gpu = "numpy", False, False

    def run(self, out):
        pass

    def sync(self):
        pass


def best(by):
    rates = {k: v for k, v in by.items() if isinstance(v, float)}
    if not rates:
        return {"value": None, "source": None, "by": by}
    src = max(rates, key=rates.get)
    return {"value": rates[src], "source": src, "by": by}


def measure(frameworks, tier, gemm_dtypes, timer, progress=lambda msg: None):
    """`timer(F, step)` returns seconds per step. Returns
    {"copy": {...}, "gemm": {dtype: {...}}}, each {"value", "source", "by"}
    (rates in B/s and FLOP/s; a framework that failed maps to its error)."""
    def attempt(by, name, fn):
        try:
            by[name] = float(fn())
        except Exception as e:  # noqa: BLE001  (a missing dtype path must not stop the run)
            by[name] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:120]}"

    n = COPY_ELEMS[tier]
    progress(f"ceiling: copy {n >> 20}M f32")
    copy = {}
    for F in frameworks:
        attempt(copy, F.name, lambda: 8 * n / timer(F, _copy_step(F, n)))
    if not frameworks[0].gpu:
        src, dst = np.random.rand(n).astype(np.float32) + 0.5, np.empty(n, np.float32)
        attempt(copy, "numpy", lambda: 8 * n / timer(_NumPy(), lambda: np.copyto(dst, src)))

    gemm = {}
    for dt in gemm_dtypes:
        s = GEMM_SIZE[tier][dt]
        p = dict(m=s, n=s, k=s)
        progress(f"ceiling: GEMM {s}³ {dt}")
        by = {}
        for F in frameworks:
            attempt(by, F.name, lambda: 2 * s ** 3 / timer(F, workloads.gemm(F, p, dt)))
        if dt == "float32" and not frameworks[0].gpu:
            a, b = (np.random.rand(s, s).astype(np.float32) for _ in range(2))
            attempt(by, "numpy", lambda: 2 * s ** 3 / timer(_NumPy(), lambda: a @ b))
        gemm[dt] = best(by)
    return {"copy": best(copy), "gemm": gemm}
