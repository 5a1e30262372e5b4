"""Run by test_distributed.py on 2 processes. Mode 'hang': rank 1 stalls and
rank 0's collective must time out with a RuntimeError. Mode 'die': rank 1
exits at once and the launcher must end rank 0 (no process left behind).
Mode 'vanish' (backend 'tcp'): rank 1 exits with status 0 without leaving the
group, and rank 0's collective must fail at once, naming rank 1.
Backend: PYFLAME_DIST_BACKEND (default mpi)."""
import os
import sys
import time

import pyflame as pf
import pyflame.distributed as dist


def main(mode):
    dist.init_process_group(backend=os.environ.get("PYFLAME_DIST_BACKEND", "mpi"),
                            timeout=1.0 if mode == "hang" else 120.0)
    rank = dist.get_rank()
    if rank == 1:
        if mode in ("die", "vanish"):
            os._exit(3 if mode == "die" else 0)
        time.sleep(2.5)
        return 0
    t0 = time.monotonic()
    try:
        dist.all_reduce(pf.ones(4))
    except RuntimeError as e:
        if mode == "vanish":
            assert "rank 1 left the process group" in str(e), str(e)
            print(f"vanish ok after {time.monotonic() - t0:.1f} s", flush=True)
            return 0
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
