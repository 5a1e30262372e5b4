"""Device report and a short workload on the best available device.

Run through `bash scripts/run.sh` (which builds first), or directly with the
installed package: `python examples/demo.py [--device cpu|rocm|auto]`.
"""
import argparse
import time

import numpy as np

import pyflame as pf


def report():
    print("PyFlame", pf.__version__)
    print(f"  GPU backend built: {pf._core.gpu_backend_compiled()} ({pf._core.gpu_platform()})")
    print(f"  rocm_is_available: {pf.rocm_is_available()}, devices: {pf.rocm_device_count()}")
    for i in range(pf.rocm_device_count()):
        info = pf.rocm_get_device_info(i)
        print(f"  rocm:{i}  {info['name']}  {info['architecture']}  "
              f"{info['total_memory'] / 2**30:.1f} GiB, {info['compute_units']} CUs")
    print("  current device:", pf.get_device(), pf.device_info())


def timed(fn, reps):
    fn()  # warm-up
    pf.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    pf.synchronize()
    return (time.perf_counter() - t0) / reps


def workload(reps):
    pf.manual_seed(0)
    x = pf.randn(256, 784)
    w1, b1 = pf.randn(784, 256) * 0.05, pf.zeros(256)
    w2, b2 = pf.randn(256, 10) * 0.05, pf.zeros(10)

    def mlp():
        h = pf.relu(x @ w1 + b1)
        return pf.log_softmax(h @ w2 + b2, axis=-1).eval()

    out = mlp().numpy()
    xn, w1n, w2n = x.numpy(), w1.numpy(), w2.numpy()
    logits = np.maximum(xn @ w1n, 0) @ w2n
    ref = logits - logits.max(-1, keepdims=True)
    ref = ref - np.log(np.exp(ref).sum(-1, keepdims=True))
    err = float(np.abs(out - ref).max())
    print(f"  MLP 784-256-10 forward, batch 256: max |ours - NumPy| = {err:.2e}")

    a, b = pf.randn(1024, 1024), pf.randn(1024, 1024)
    t = timed(lambda: (a @ b).eval(), reps)
    print(f"  matmul 1024^3 fp32: {t * 1e3:.2f} ms  ({2 * 1024**3 / t / 1e9:.1f} GFLOP/s)")
    t = timed(mlp, reps)
    print(f"  MLP forward: {t * 1e3:.3f} ms")
    big = pf.randn(4 * 1024 * 1024)
    t = timed(lambda: pf.gelu(big * 1.5 + 0.5).eval(), reps)
    print(f"  gelu(x*w+b), 4M fp32: {t * 1e3:.2f} ms")
    t = timed(lambda: pf.sum(big).eval(), reps)
    print(f"  sum, 4M fp32: {t * 1e3:.3f} ms")
    return err


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    report()
    pf.set_device(args.device)
    print(f"\nDemo workload on {pf.get_device()}:")
    err = workload(args.reps)
    if err > 1e-3:
        raise SystemExit(f"demo result differs from NumPy by {err}")
    print("done.")


if __name__ == "__main__":
    main()
