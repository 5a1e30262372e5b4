"""Framework adapters and the timer shared by the workloads and the ceilings.

A workload is written once against an adapter (`F`): PyFlame and PyTorch
spell most ops alike (`F.softmax(x, -1)`, `F.conv2d(x, w, stride=1,
padding=1)`), and the adapter covers the rest (inputs, evaluation,
synchronization, uploads). So both frameworks run the same computation on
the same shapes.
"""
import statistics
import time

SHORT_DTYPE = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}


def has_attr_path(root, path):
    """True if `root` has the dotted attribute `path` ("nn.Linear",
    "Tensor.backward"); "a|b" accepts either. Submodules are imported."""
    import importlib
    for alt in path.split("|"):
        obj, ok = root, True
        for part in alt.split("."):
            if not hasattr(obj, part):
                try:  # a subpackage such as pyflame.nn is not imported by pyflame
                    importlib.import_module(f"{obj.__name__}.{part}")
                except (ImportError, AttributeError):
                    ok = False
                    break
            obj = getattr(obj, part)
        if ok:
            return True
    return False


class PyFlame:
    name, is_torch = "pyflame", False

    def __init__(self, device):
        import pyflame
        self.pf, self.device = pyflame, device
        pyflame.set_device(device)
        self.gpu = device != "cpu"

    def __getattr__(self, op):  # pf.relu, pf.matmul, pf.conv2d, pf.nn, ...
        try:
            return getattr(self.pf, op)
        except AttributeError:
            import importlib
            return importlib.import_module(f"pyflame.{op}")

    # Inputs: fresh values from the seeded RNG, evaluated before timing.
    def rand(self, *shape, dtype="float32"):
        """Uniform in [0.5, 1.5): never zero, safe for log/sqrt/div."""
        return self.pf.eval((self.pf.rand(*shape, device=self.device) + 0.5).astype(dtype))

    def randn(self, *shape, dtype="float32", scale=1.0):
        return self.pf.eval((self.pf.randn(*shape, device=self.device) * scale).astype(dtype))

    def randint(self, low, high, shape):
        return self.pf.eval(self.pf.randint(low, high, shape, device=self.device))

    def upload(self, array):
        return self.pf.tensor(array, device=self.device)

    def download(self, x):
        return x.numpy()

    def attend(self, q, k, v, k_cache, v_cache):
        """Attention of the new q/k/v over cache + new keys (B, H, S, D)."""
        out, _, _ = self.pf.scaled_dot_product_attention(q, k, v, k_cache=k_cache, v_cache=v_cache)
        return out

    def module(self, m):
        return m.to(self.device) if hasattr(m, "to") else m

    def compile(self, fn, *args, graph=True):
        """A step calling fn(*args) compiled (pf.compile: traced once,
        replayed after; a GPU graph where it can be captured)."""
        compiled = self.pf.compile(fn)
        return lambda: compiled(*args)

    def run(self, out):
        """Evaluates what a step recorded (PyTorch has already run it)."""
        if out is not None:
            self.pf.eval(out)

    def sync(self):
        self.pf.synchronize()


class Torch:
    name, is_torch = "pytorch", True

    def __init__(self, device):
        import torch
        import torch.nn.functional as functional
        self.torch, self.F = torch, functional
        # PyFlame's 'rocm:N' is PyTorch's 'cuda:N' on NVIDIA and on ROCm alike.
        self.device = "cpu" if device == "cpu" else device.replace("rocm", "cuda")
        self.gpu = self.device != "cpu"
        self._rope_tables = {}
        # Same math mode as PyFlame, whose fp32 GEMM/conv do not use TF32.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False

    def __getattr__(self, op):  # functional first (gelu, softmax, conv2d), then torch
        return getattr(self.F, op, None) or getattr(self.torch, op)

    def _dt(self, dtype):
        return getattr(self.torch, dtype)

    def rand(self, *shape, dtype="float32"):
        return (self.torch.rand(*shape, device=self.device) + 0.5).to(self._dt(dtype))

    def randn(self, *shape, dtype="float32", scale=1.0):
        return (self.torch.randn(*shape, device=self.device) * scale).to(self._dt(dtype))

    def randint(self, low, high, shape):
        return self.torch.randint(low, high, shape, device=self.device)

    def upload(self, array):
        return self.torch.from_numpy(array).to(self.device)

    def download(self, x):
        return x.cpu().numpy()

    # PyFlame's signatures where PyTorch's differ or PyTorch has no op.
    def rms_norm(self, x, weight, eps=1e-6):
        if hasattr(self.F, "rms_norm"):  # PyTorch >= 2.4
            return self.F.rms_norm(x, (x.shape[-1],), weight, eps)
        return x * self.torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight

    def rope(self, x, offset=0, theta=10000.0):
        """Llama's rotate-half RoPE of x (..., seq, D), as PyTorch models write
        it: cos/sin tables computed once, then two multiplies and a concat."""
        torch, seq, half = self.torch, x.shape[-2], x.shape[-1] // 2
        key = (offset, seq, half, theta, x.dtype)
        if key not in self._rope_tables:
            pos = torch.arange(offset, offset + seq, device=x.device, dtype=torch.float64)
            inv_freq = theta ** (-torch.arange(half, device=x.device, dtype=torch.float64) / half)
            angles = torch.outer(pos, inv_freq).repeat(1, 2)
            self._rope_tables[key] = (angles.cos().to(x.dtype), angles.sin().to(x.dtype))
        cos, sin = self._rope_tables[key]
        return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin

    def attend(self, q, k, v, k_cache, v_cache):
        keys, values = self.torch.cat([k_cache, k], -2), self.torch.cat([v_cache, v], -2)
        if hasattr(self.F, "scaled_dot_product_attention"):  # PyTorch >= 2.0
            return self.F.scaled_dot_product_attention(q, keys, values)
        scores = q @ keys.transpose(-1, -2) * q.shape[-1] ** -0.5
        return self.torch.softmax(scores.float(), -1).to(q.dtype) @ values

    def module(self, m):
        return m.to(self.device)

    def compile(self, fn, *args, graph=True):
        """fn(*args) replayed from a CUDA graph on a GPU (graph=True; the
        capture warms up on a side stream, as PyTorch documents), else eager."""
        torch = self.torch
        if not (self.gpu and graph):
            return lambda: fn(*args)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                fn(*args)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = fn(*args)

        def replay():
            g.replay()
            return out
        return replay

    def run(self, out):
        pass

    def sync(self):
        if self.gpu:
            self.torch.cuda.synchronize(self.device)


def measure(step, sync, iterations, warmup, batch=1, max_time=None):
    """Seconds per step: the median over batches of `batch` steps, each batch
    timed with the monotonic clock and bracketed by `sync` (on a GPU, so the
    queue is drained; on the CPU the steps are synchronous and batch is 1).

    Warm-up and timing stop early once `max_time` seconds are spent (with at
    least one warm-up step and three timed batches), so that a slow device
    does not take minutes per workload. Returns (median, samples).
    """
    t_stop = time.perf_counter() + (max_time or float("inf"))
    for i in range(max(warmup, 1)):
        step()
        if i and time.perf_counter() > t_stop:
            break
    sync()
    samples = []
    t_stop = time.perf_counter() + (max_time or float("inf"))
    for _ in range(max(1, -(-iterations // batch))):
        t0 = time.perf_counter()
        for _ in range(batch):
            step()
        sync()
        samples.append((time.perf_counter() - t0) / batch)
        if len(samples) >= 3 and time.perf_counter() > t_stop:
            break
    return statistics.median(samples), samples


def cuda_event_median(torch, step, iterations):
    """PyTorch's per-step time from CUDA events (the way BENCHMARKS.md's
    PyTorch figures were taken), kept as a cross-check of `measure`."""
    times = []
    for _ in range(iterations):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        times.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in times) / 1e3
