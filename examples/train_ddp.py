"""Data-parallel training of examples/train.py's MLP (or CNN) with
DistributedDataParallel: each process takes its slice of every global batch,
gradients are averaged over processes, and every replica takes the same step,
which is the step one process takes on the whole global batch.

    python -m pyflame.distributed.run --nproc-per-node 2 examples/train_ddp.py
    mpirun -np 2 python examples/train_ddp.py           # the same, under mpirun
    python -m pyflame.distributed.run --launcher spawn --nproc-per-node 2 examples/train_ddp.py
                                                        # no mpirun: MASTER_ADDR rendezvous
    python examples/train_ddp.py                        # one process: the reference

On a GPU build each process uses GPU LOCAL_RANK and NCCL/RCCL (--device rocm).
--save params.npz writes the trained parameters (rank 0) for comparison.
"""
import argparse
import os
import sys

import numpy as np

import pyflame as pf
import pyflame.distributed as dist
import pyflame.nn as nn
import pyflame.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train import cnn, make_data, mlp  # noqa: E402


def launched():
    """Whether a launcher started this process as one of several."""
    size = os.environ.get("WORLD_SIZE") or os.environ.get("OMPI_COMM_WORLD_SIZE")
    return size is not None and int(size) > 1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", help="cpu or rocm (GPU LOCAL_RANK)")
    ap.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64, help="global batch (all processes)")
    ap.add_argument("--lr", type=float, default=0.3)
    ap.add_argument("--train-size", type=int, default=8192)
    ap.add_argument("--save", help="write the trained parameters here (.npz)")
    args = ap.parse_args(argv)

    rank, world = 0, 1
    if launched():
        # CPU tensors: MPI under mpirun, else the rendezvous store's 'tcp' backend
        cpu = "mpi" if "OMPI_COMM_WORLD_SIZE" in os.environ else "tcp"
        dist.init_process_group(backend="auto" if args.device != "cpu" else cpu)
        rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch % world:
        ap.error(f"--batch {args.batch} is not a multiple of the {world} processes")
    device = args.device
    if device == "rocm":
        device = f"rocm:{int(os.environ.get('LOCAL_RANK', 0)) % pf.rocm_device_count()}"

    pf.manual_seed(0)  # DDP copies rank 0's parameters anyway
    rng = np.random.default_rng(0)
    (x_train, y_train), (x_test, y_test) = make_data(args.train_size, rng), make_data(1024, rng)
    model = (mlp if args.model == "mlp" else cnn)().to(device)
    net = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    opt = pf.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    shard = args.batch // world
    order_rng = np.random.default_rng(1)  # the same order on every rank
    for epoch in range(args.epochs):
        order = order_rng.permutation(len(x_train))
        for b in range(len(x_train) // args.batch):
            idx = order[b * args.batch:(b + 1) * args.batch][rank * shard:(rank + 1) * shard]
            opt.zero_grad()
            loss = F.cross_entropy(net(pf.tensor(x_train[idx], device=device)),
                                   pf.tensor(y_train[idx], device=device))
            loss.backward()
            opt.step()
        if rank == 0:
            print(f"epoch {epoch + 1}: loss {loss.item():.4f} (rank 0's shard)", flush=True)

    if rank == 0:
        with pf.no_grad():
            logits = model.eval()(pf.tensor(x_test, device=device))
        accuracy = float((logits.numpy().argmax(-1) == y_test).mean())
        print(f"{args.model} on {world} process(es): test accuracy {accuracy:.3f}", flush=True)
        if args.save:
            np.savez(args.save, **{k: v.numpy() for k, v in model.state_dict().items()})
    if world > 1:
        dist.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
