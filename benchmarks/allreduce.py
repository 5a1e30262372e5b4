"""All-reduce bandwidth: pyflame.distributed against torch.distributed on the
same GPUs in the same run (NCCL on NVIDIA, RCCL on AMD). One process per GPU:

    python -m pyflame.distributed.run --nproc-per-node 2 benchmarks/allreduce.py --mb 256

Rank 0 prints the time per all-reduce and the bus bandwidth, NCCL's own
figure of merit (nccl-tests: algbw * 2 (n - 1) / n). Without --device rocm
it measures the MPI path on CPU tensors (and torch's gloo); with
``--launcher spawn`` (no mpirun) the processes meet at MASTER_ADDR:MASTER_PORT,
and CPU tensors take the 'tcp' backend.
"""
import argparse
import os
import time

import numpy as np

import pyflame as pf
import pyflame.distributed as dist


def bus_bandwidth(nbytes, seconds, world):
    return nbytes / seconds * 2 * (world - 1) / world / 1e9


def time_pyflame(x, iters):
    dist.all_reduce(x)  # warm-up (communicator set-up, first kernels)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    return (time.perf_counter() - t0) / iters  # each call returns complete


def time_torch(n, device, iters):
    import torch
    import torch.distributed as tdist
    # pyflame's rendezvous store (processes not started by mpirun) holds
    # MASTER_PORT for the group's lifetime: torch's store takes the next port.
    if "OMPI_COMM_WORLD_SIZE" not in os.environ:
        os.environ["MASTER_PORT"] = str(int(os.environ["MASTER_PORT"]) + 1)
    tdist.init_process_group("nccl" if device != "cpu" else "gloo", init_method="env://")
    dev = torch.device("cuda", torch.cuda.current_device()) if device != "cpu" else torch.device("cpu")
    t = torch.ones(n, dtype=torch.float32, device=dev)
    tdist.all_reduce(t)
    sync = torch.cuda.synchronize if device != "cpu" else (lambda: None)
    sync()
    tdist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        tdist.all_reduce(t)
    sync()
    elapsed = (time.perf_counter() - t0) / iters
    tdist.destroy_process_group()
    return elapsed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=256, help="message size in MB (float32)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--device", default="rocm" if pf.rocm_is_available() else "cpu")
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    local = int(os.environ.get("LOCAL_RANK", 0))
    device = f"rocm:{local % pf.rocm_device_count()}" if args.device != "cpu" else "cpu"
    cpu = "mpi" if "OMPI_COMM_WORLD_SIZE" in os.environ else "tcp"  # tcp: the store, slow
    dist.init_process_group(backend="auto" if args.device != "cpu" else cpu)
    rank, world = dist.get_rank(), dist.get_world_size()
    n = int(args.mb * 2**20) // 4
    x = pf.tensor(np.ones(n, np.float32), device=device)
    ours = time_pyflame(x, args.iters)
    theirs = None
    if not args.no_torch:
        try:
            import torch
            if args.device != "cpu":
                torch.cuda.set_device(local % torch.cuda.device_count())
            theirs = time_torch(n, args.device, args.iters)
        except ImportError:
            pass
    if rank == 0:
        nbytes = n * 4
        print(f"all_reduce of {nbytes / 2**20:.0f} MB on {world} ranks ({dist.get_backend()}, {device}):")
        print(f"  pyflame: {ours * 1e3:8.2f} ms  bus bandwidth {bus_bandwidth(nbytes, ours, world):7.1f} GB/s")
        if theirs is not None:
            print(f"  torch:   {theirs * 1e3:8.2f} ms  bus bandwidth {bus_bandwidth(nbytes, theirs, world):7.1f} GB/s")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
