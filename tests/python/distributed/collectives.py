"""Run by test_distributed.py on 2+ processes (mpirun or the launcher): every
collective against NumPy, then the errors. Each rank regenerates every rank's
input from its seed, so each can compute the expected results itself.
Device: PYFLAME_DIST_DEVICE (default cpu); backend: PYFLAME_DIST_BACKEND."""
import os
import sys

import numpy as np

import pyflame as pf
import pyflame.distributed as dist

DEVICE = os.environ.get("PYFLAME_DIST_DEVICE", "cpu")
if DEVICE == "rocm":  # one GPU per process, as the launcher means it
    DEVICE = f"rocm:{int(os.environ.get('LOCAL_RANK', '0')) % pf.rocm_device_count()}"


def data(rank, shape, dtype, salt=0):
    rng = np.random.default_rng(1000 * salt + rank)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-50, 50, shape).astype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    return rng.normal(size=shape).astype(dtype)


def tensor(a, dtype=None):
    return pf.tensor(a, device=DEVICE) if dtype is None else pf.tensor(a, device=DEVICE).astype(dtype)


def expect_raises(exc, words, fn):
    try:
        fn()
    except exc as e:
        for w in words:
            assert w in str(e), (w, str(e))
        return
    raise AssertionError(f"no {exc.__name__} raised")


def main():
    dist.init_process_group(backend=os.environ.get("PYFLAME_DIST_BACKEND", "auto"), timeout=60)
    rank, world = dist.get_rank(), dist.get_world_size()
    assert world >= 2 and int(os.environ["RANK"]) == rank, (world, os.environ.get("RANK"))
    reduce = {"sum": np.sum, "max": np.max, "min": np.min, "avg": np.mean}

    # all_reduce over dtypes and ops
    for dt in (np.float32, np.float64, np.int32, np.int64, np.int8, np.uint8):
        for op in ("sum", "max", "min") + (("avg",) if dt in (np.float32, np.float64) else ()):
            if dt in (np.int8, np.uint8) and op == "sum":
                continue  # wraps; covered by int32/int64
            x = tensor(data(rank, (3, 5), dt))
            dist.all_reduce(x, op=op)
            want = reduce[op](np.stack([data(r, (3, 5), dt) for r in range(world)]), axis=0)
            np.testing.assert_allclose(x.numpy(), want.astype(dt), rtol=1e-6, atol=1e-6)
    # bool: or / and; 16-bit floats reduce in float32 and round once
    x = tensor(data(rank, (7,), np.bool_))
    dist.all_reduce(x, op="max")
    np.testing.assert_array_equal(x.numpy(), np.any([data(r, (7,), np.bool_) for r in range(world)], 0))
    for low in (pf.float16, pf.bfloat16):
        x = tensor(data(rank, (4, 4), np.float32), low)
        dist.all_reduce(x, op=dist.ReduceOp.AVG)
        assert x.dtype == low
        want = np.mean([tensor(data(r, (4, 4), np.float32), low).astype(pf.float32).numpy()
                        for r in range(world)], axis=0)
        np.testing.assert_allclose(x.astype(pf.float32).numpy(), want, rtol=1e-2, atol=1e-2)
    # a 0-d tensor and a non-contiguous view
    s = tensor(np.float32(rank + 1))
    dist.all_reduce(s)
    assert s.item() == world * (world + 1) / 2
    base = tensor(data(rank, (4, 6), np.float32))
    v = base.T
    dist.all_reduce(v)
    want = np.sum([data(r, (4, 6), np.float32) for r in range(world)], axis=0)
    np.testing.assert_allclose(v.numpy(), want.T, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(base.numpy(), want, rtol=1e-6, atol=1e-6)  # written through the view

    # broadcast from each rank
    for src in range(world):
        x = tensor(data(rank, (2, 3), np.float32, salt=1))
        dist.broadcast(x, src)
        np.testing.assert_array_equal(x.numpy(), data(src, (2, 3), np.float32, salt=1))

    # all_gather (list and tensor forms)
    mine = data(rank, (2, 3), np.int64, salt=2)
    outs = [tensor(np.zeros((2, 3), np.int64)) for _ in range(world)]
    dist.all_gather(outs, tensor(mine))
    for r in range(world):
        np.testing.assert_array_equal(outs[r].numpy(), data(r, (2, 3), np.int64, salt=2))
    out = tensor(np.zeros((2 * world, 3), np.int64))
    dist.all_gather_into_tensor(out, tensor(mine))
    np.testing.assert_array_equal(out.numpy(), np.concatenate([data(r, (2, 3), np.int64, salt=2)
                                                               for r in range(world)]))

    # reduce_scatter (tensor and list forms)
    full = [data(r, (2 * world, 3), np.float32, salt=3) for r in range(world)]
    out = tensor(np.zeros((2, 3), np.float32))
    dist.reduce_scatter_tensor(out, tensor(full[rank]), op="sum")
    np.testing.assert_allclose(out.numpy(), np.sum(full, 0)[2 * rank:2 * rank + 2], rtol=1e-5, atol=1e-6)
    out = tensor(np.zeros((2, 3), np.float32))
    dist.reduce_scatter(out, [tensor(full[rank][2 * r:2 * r + 2]) for r in range(world)], op="max")
    np.testing.assert_array_equal(out.numpy(), np.max(full, 0)[2 * rank:2 * rank + 2])

    # send / recv around a ring, twice with different tags
    for tag in (0, 5):
        nxt, prv = (rank + 1) % world, (rank - 1) % world
        buf = tensor(np.zeros((3, 2), np.float32))
        if rank % 2 == 0:
            dist.send(tensor(data(rank, (3, 2), np.float32, salt=4 + tag)), nxt, tag=tag)
            assert dist.recv(buf, prv, tag=tag) == prv
        else:
            dist.recv(buf, prv, tag=tag)
            dist.send(tensor(data(rank, (3, 2), np.float32, salt=4 + tag)), nxt, tag=tag)
        np.testing.assert_array_equal(buf.numpy(), data(prv, (3, 2), np.float32, salt=4 + tag))

    # async_op: several in flight, waited out of order; the tensor holds the result after wait()
    xs = [tensor(data(rank, (1000 + i,), np.float32, salt=6 + i)) for i in range(3)]
    works = [dist.all_reduce(x, op="avg", async_op=True) for x in xs]
    b = tensor(data(rank, (5,), np.float32, salt=9))
    works.append(dist.broadcast(b, world - 1, async_op=True))
    for w in reversed(works):
        assert isinstance(w, dist.Work) and w.wait() and w.is_completed()
    for i, x in enumerate(xs):
        want = np.mean([data(r, (1000 + i,), np.float32, salt=6 + i) for r in range(world)], 0)
        np.testing.assert_allclose(x.numpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(b.numpy(), data(world - 1, (5,), np.float32, salt=9))
    assert dist.barrier(async_op=True).is_completed()

    # a parameter (a grad leaf) takes the result and stays a leaf
    p = tensor(data(rank, (3,), np.float32, salt=5))
    p.requires_grad = True
    dist.broadcast(p, 0)
    assert p.requires_grad and p.is_leaf
    np.testing.assert_array_equal(p.numpy(), data(0, (3,), np.float32, salt=5))

    # errors: every rank raises alike, and the group stays usable
    shape = (2, 3) if rank == 0 else (3, 3)
    expect_raises(ValueError, ["[all_reduce]", "rank 0", "(2,3)", "(3,3)"],
                  lambda: dist.all_reduce(tensor(np.zeros(shape, np.float32))))
    dt = np.float32 if rank == 0 else np.float64
    expect_raises(ValueError, ["[all_gather]", "float32", "float64"],
                  lambda: dist.all_gather_into_tensor(tensor(np.zeros((2 * world,), dt)),
                                                      tensor(np.zeros((2,), dt))))
    expect_raises(ValueError, ["[broadcast]", "from rank 0", "from rank 1"],
                  lambda: dist.broadcast(tensor(np.zeros(2, np.float32)), min(rank, 1)))
    expect_raises(ValueError, ["[reduce_scatter]", "multiple of the world size"],
                  lambda: dist.reduce_scatter_tensor(tensor(np.zeros(1, np.float32)),
                                                     tensor(np.zeros(2 * world + 1, np.float32))))
    expect_raises(ValueError, ["[all_reduce]", "avg", "int64"],
                  lambda: dist.all_reduce(tensor(np.zeros(2, np.int64)), op="avg"))
    expect_raises(ValueError, ["[broadcast]", "src 9"], lambda: dist.broadcast(tensor(np.zeros(1)), 9))
    expect_raises(ValueError, ["[send]", "dst"], lambda: dist.send(tensor(np.zeros(1)), rank))
    expect_raises(ValueError, ["unknown op"], lambda: dist.all_reduce(tensor(np.zeros(1)), op="prod"))
    expect_raises(RuntimeError, ["already initialized"], lambda: dist.init_process_group())
    if rank == 0:
        dist.send(tensor(np.zeros((4,), np.float32)), 1, tag=9)
    elif rank == 1:
        expect_raises(ValueError, ["[recv]", "rank 0 sent float32 (4)", "expects float32 (2,2)"],
                      lambda: dist.recv(tensor(np.zeros((2, 2), np.float32)), 0, tag=9))
    x = tensor(np.ones(3, np.float32))
    dist.all_reduce(x)
    np.testing.assert_array_equal(x.numpy(), np.full(3, world, np.float32))
    dist.barrier()
    dist.destroy_process_group()
    assert not dist.is_initialized()
    print(f"rank {rank}: collectives ok", flush=True)


if __name__ == "__main__":
    sys.exit(main())
