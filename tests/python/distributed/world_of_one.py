"""Run by test_distributed.py as one process on a GPU build: NCCL/RCCL in a
world of one, where every collective returns its input (on the GPU), async
ones too (on the communicator's stream, after their lazy inputs), and DDP's
hook-launched buckets give plain backward's gradients."""
import os
import sys

import numpy as np

import pyflame as pf
import pyflame.distributed as dist
import pyflame.nn as nn


def main():
    dist.init_process_group(backend=os.environ.get("PYFLAME_DIST_BACKEND", "auto"), timeout=60)
    assert dist.get_backend() in ("nccl", "rccl"), dist.get_backend()
    assert (dist.get_rank(), dist.get_world_size()) == (0, 1)
    rng = np.random.default_rng(0)
    a = rng.normal(size=(33, 7)).astype(np.float32)
    for op in ("sum", "avg", "max", "min"):
        x = pf.tensor(a, device="rocm")
        dist.all_reduce(x, op=op)
        assert str(x.device).startswith("rocm"), x.device
        np.testing.assert_allclose(x.numpy(), a, rtol=1e-6)
    for dt in (pf.float16, pf.bfloat16, pf.int64, pf.bool_):
        x = pf.tensor(a > 0, device="rocm").astype(dt)
        want = x.numpy()
        dist.all_reduce(x)
        np.testing.assert_array_equal(x.numpy(), want)
    x = pf.tensor(a, device="rocm")
    dist.broadcast(x, 0)
    np.testing.assert_array_equal(x.numpy(), a)
    out = pf.zeros((33, 7), device="rocm")
    dist.all_gather_into_tensor(out, pf.tensor(a, device="rocm"))
    np.testing.assert_array_equal(out.numpy(), a)
    out = pf.zeros((33, 7), device="rocm")
    dist.reduce_scatter_tensor(out, pf.tensor(a, device="rocm"))
    np.testing.assert_array_equal(out.numpy(), a)
    dist.barrier()

    # async: lazy inputs (the collective follows their producer), waited in reverse;
    # one dropped unwaited (its buffer must outlive the collective)
    xs = [pf.tensor(a, device="rocm") * (i + 1) + 1 for i in range(3)]
    works = [dist.all_reduce(x, op="avg", async_op=True) for x in xs]
    dropped = dist.all_reduce(pf.tensor(a, device="rocm"), async_op=True)
    del dropped
    for w in reversed(works):
        assert w.wait() and w.is_completed()
    for i, x in enumerate(xs):
        np.testing.assert_allclose(x.numpy(), a * (i + 1) + 1, rtol=1e-6)

    # DDP: buckets launched from the gradient hooks equal plain backward's gradients
    pf.manual_seed(3)
    plain = nn.Linear(7, 3).to("rocm")
    pf.manual_seed(3)
    lin = nn.Linear(7, 3).to("rocm")
    model = nn.parallel.DistributedDataParallel(lin, bucket_cap_mb=1e-6)
    x = pf.tensor(a, device="rocm")
    (model(x) ** 2).mean().backward()
    (plain(x) ** 2).mean().backward()
    for p, q in zip(lin.parameters(), plain.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)
    try:
        dist.all_reduce(pf.ones(3))  # a CPU tensor on the GPU backend
        raise AssertionError("no error for a CPU tensor")
    except ValueError as e:
        assert "use backend='mpi'" in str(e), str(e)
    dist.destroy_process_group()
    print("world of one ok", flush=True)


if __name__ == "__main__":
    sys.exit(main())
