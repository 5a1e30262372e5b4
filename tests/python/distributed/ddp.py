"""Run by test_distributed.py on 2 processes: DistributedDataParallel against
NumPy. Replicas start from different seeds and must agree after wrapping;
gradients must equal the average of every rank's NumPy gradient (one bucket
and many); no_sync must keep them local."""
import os
import sys

import numpy as np

import pyflame as pf
import pyflame.distributed as dist
import pyflame.nn as nn


def batch(rank):
    rng = np.random.default_rng(50 + rank)
    return rng.normal(size=(5, 4)).astype(np.float32), rng.normal(size=(5, 3)).astype(np.float32)


def numpy_grads(w, b, x, y):
    """d/dW, d/db of mean((x @ W.T + b - y)^2)."""
    d = 2 * (x @ w.T + b - y) / y.size
    return d.T @ x, d.sum(0)


def main():
    dist.init_process_group(backend=os.environ.get("PYFLAME_DIST_BACKEND", "mpi"), timeout=60)
    rank, world = dist.get_rank(), dist.get_world_size()
    for cap in (25.0, 1e-6):  # one bucket; one bucket per parameter
        pf.manual_seed(rank)  # different replicas before wrapping
        lin = nn.Linear(4, 3)
        model = nn.parallel.DistributedDataParallel(lin, bucket_cap_mb=cap)
        assert model.bucket_sizes == ([2] if cap > 1 else [1, 1]), model.bucket_sizes
        w, b = lin.weight.numpy(), lin.bias.numpy()
        ws = [np.empty_like(w) for _ in range(world)]
        gathered = [pf.zeros(w.shape) for _ in range(world)]
        dist.all_gather(gathered, lin.weight)
        for g in gathered:
            np.testing.assert_array_equal(g.numpy(), w)  # rank 0's everywhere
        assert lin.weight.requires_grad and lin.weight.is_leaf

        x, y = batch(rank)
        loss = ((model(pf.tensor(x)) - pf.tensor(y)) ** 2).mean()
        loss.backward()
        want = [numpy_grads(w, b, *batch(r)) for r in range(world)]
        np.testing.assert_allclose(lin.weight.grad.numpy(), np.mean([g[0] for g in want], 0), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(lin.bias.grad.numpy(), np.mean([g[1] for g in want], 0), rtol=1e-5, atol=1e-6)

        # no_sync: local accumulation, then one synchronized backward averages the sums
        lin.zero_grad()
        with model.no_sync():
            ((model(pf.tensor(x)) - pf.tensor(y)) ** 2).mean().backward()
        np.testing.assert_allclose(lin.weight.grad.numpy(), numpy_grads(w, b, x, y)[0], rtol=1e-5, atol=1e-6)
        ((model(pf.tensor(x)) - pf.tensor(y)) ** 2).mean().backward()
        np.testing.assert_allclose(lin.weight.grad.numpy(), 2 * np.mean([g[0] for g in want], 0),
                                   rtol=1e-5, atol=1e-6)
        del ws
    print(f"rank {rank}: ddp ok", flush=True)


if __name__ == "__main__":
    sys.exit(main())
