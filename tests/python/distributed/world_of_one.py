"""Run by test_distributed.py as one process on a GPU build: NCCL/RCCL in a
world of one, where every collective returns its input (on the GPU)."""
import os
import sys

import numpy as np

import pyflame as pf
import pyflame.distributed as dist


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
    try:
        dist.all_reduce(pf.ones(3))  # a CPU tensor on the GPU backend
        raise AssertionError("no error for a CPU tensor")
    except ValueError as e:
        assert "use backend='mpi'" in str(e), str(e)
    dist.destroy_process_group()
    print("world of one ok", flush=True)


if __name__ == "__main__":
    sys.exit(main())
