"""Run by test_distributed.py on 2 processes. Mode 'hang': rank 1 stalls and
rank 0's collective must time out with a RuntimeError. Mode 'die': rank 1
exits at once and the launcher must end rank 0 (no process left behind)."""
import os
import sys
import time

import pyflame as pf
import pyflame.distributed as dist


def main(mode):
    dist.init_process_group(backend="mpi", timeout=1.0 if mode == "hang" else 120.0)
    rank = dist.get_rank()
    if rank == 1:
        if mode == "die":
            os._exit(3)
        time.sleep(4)
        return 0
    t0 = time.monotonic()
    try:
        dist.all_reduce(pf.ones(4))
    except RuntimeError as e:
        assert "[all_reduce] timed out" in str(e), str(e)
        try:
            dist.barrier()
        except RuntimeError as e2:
            assert "unusable" in str(e2), str(e2)
        print(f"timeout ok after {time.monotonic() - t0:.1f} s", flush=True)
        return 0
    print("no timeout", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
