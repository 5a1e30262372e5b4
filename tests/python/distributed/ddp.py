"""Run by the tests on 2 processes: DistributedDataParallel against NumPy.
Replicas start from different seeds and must agree after wrapping;
gradients must equal the average of every rank's NumPy gradient (one bucket
and many); no_sync must keep them local; a parameter one rank leaves unused
counts as zeros there (no hang); the buckets must be launched during
backward, from the parameters' hooks, in bucket order.
Device: PYFLAME_DIST_DEVICE (cpu or rocm); backend: PYFLAME_DIST_BACKEND (mpi)."""
import os
import sys

import numpy as np

import pyflame as pf
import pyflame.distributed as dist
import pyflame.nn as nn

DEVICE = os.environ.get("PYFLAME_DIST_DEVICE", "cpu")
if DEVICE == "rocm":
    DEVICE = f"rocm:{int(os.environ.get('LOCAL_RANK', '0')) % pf.rocm_device_count()}"
TOL = dict(rtol=1e-5, atol=1e-6) if DEVICE == "cpu" else dict(rtol=1e-4, atol=1e-5)


def batch(rank):
    rng = np.random.default_rng(50 + rank)
    return rng.normal(size=(5, 4)).astype(np.float32), rng.normal(size=(5, 3)).astype(np.float32)


def numpy_grads(w, b, x, y):
    """d/dW, d/db of mean((x @ W.T + b - y)^2)."""
    d = 2 * (x @ w.T + b - y) / y.size
    return d.T @ x, d.sum(0)


def t(a):
    return pf.tensor(a, device=DEVICE)


def check_linear(rank, world):
    for cap in (25.0, 1e-6):  # one bucket; one bucket per parameter
        pf.manual_seed(rank)  # different replicas before wrapping
        lin = nn.Linear(4, 3).to(DEVICE)
        model = nn.parallel.DistributedDataParallel(lin, bucket_cap_mb=cap)
        assert model.bucket_sizes == ([2] if cap > 1 else [1, 1]), model.bucket_sizes
        w, b = lin.weight.numpy(), lin.bias.numpy()
        gathered = [pf.zeros(w.shape, device=DEVICE) for _ in range(world)]
        dist.all_gather(gathered, lin.weight)
        for g in gathered:
            np.testing.assert_array_equal(g.numpy(), w)  # rank 0's everywhere
        assert lin.weight.requires_grad and lin.weight.is_leaf

        x, y = batch(rank)
        loss = ((model(t(x)) - t(y)) ** 2).mean()
        loss.backward()
        want = [numpy_grads(w, b, *batch(r)) for r in range(world)]
        np.testing.assert_allclose(lin.weight.grad.numpy(), np.mean([g[0] for g in want], 0), **TOL)
        np.testing.assert_allclose(lin.bias.grad.numpy(), np.mean([g[1] for g in want], 0), **TOL)

        # no_sync: local accumulation, then one synchronized backward averages the sums
        lin.zero_grad()
        with model.no_sync():
            ((model(t(x)) - t(y)) ** 2).mean().backward()
        np.testing.assert_allclose(lin.weight.grad.numpy(), numpy_grads(w, b, x, y)[0], **TOL)
        ((model(t(x)) - t(y)) ** 2).mean().backward()
        np.testing.assert_allclose(lin.weight.grad.numpy(), 2 * np.mean([g[0] for g in want], 0), **TOL)


class TwoHeads(nn.Module):
    """Rank 1 leaves `b` unused: its gradient counts as zeros there."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 3)
        self.b = nn.Linear(4, 3)

    def forward(self, x, use_b):
        return self.a(x) + self.b(x) if use_b else self.a(x)


def check_unused_and_overlap(rank, world):
    pf.manual_seed(0)
    net = TwoHeads().to(DEVICE)
    model = nn.parallel.DistributedDataParallel(net, bucket_cap_mb=1e-6)  # one bucket per parameter
    launched = []
    real_launch = model._launch_ready

    def spy(through=None):  # which buckets each call launched, and from where
        before = len(model._launched)
        real_launch(through)
        launched.append(("end" if through is not None else "hook", before, len(model._launched)))

    object.__setattr__(model, "_launch_ready", spy)
    x, y = batch(rank)
    ((model(t(x), use_b=rank != 1) - t(y)) ** 2).mean().backward()
    # buckets (reverse order): b.bias, b.weight, a.bias, a.weight
    if rank == 0:  # every gradient came: all launched from hooks, in order
        assert any(kind == "hook" and hi > lo for kind, lo, hi in launched), launched
        assert all(hi == lo for kind, lo, hi in launched if kind == "end"), launched
    else:  # b unused: bucket 0 never fills, so everything waits for the end
        assert all(hi == lo for kind, lo, hi in launched if kind == "hook"), launched
    wa, ba = net.a.weight.numpy(), net.a.bias.numpy()
    wb, bb = net.b.weight.numpy(), net.b.bias.numpy()
    grads_b = []
    for r in range(world):
        xr, yr = batch(r)
        d = 2 * (xr @ wa.T + ba + (xr @ wb.T + bb if r != 1 else 0) - yr) / yr.size
        grads_b.append((d.T @ xr, d.sum(0)) if r != 1 else (np.zeros_like(wb), np.zeros_like(bb)))
    np.testing.assert_allclose(net.b.weight.grad.numpy(), np.mean([g[0] for g in grads_b], 0), **TOL)
    np.testing.assert_allclose(net.b.bias.grad.numpy(), np.mean([g[1] for g in grads_b], 0), **TOL)


def main():
    dist.init_process_group(backend=os.environ.get("PYFLAME_DIST_BACKEND", "mpi"), timeout=60)
    rank, world = dist.get_rank(), dist.get_world_size()
    check_linear(rank, world)
    check_unused_and_overlap(rank, world)
    print(f"rank {rank}: ddp ok", flush=True)


if __name__ == "__main__":
    sys.exit(main())
