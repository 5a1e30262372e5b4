"""Starts a data-parallel job on this machine: one process per GPU (or per
``--nproc-per-node``), each with RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set, as torchrun does::

    python -m pyflame.distributed.run --nproc-per-node 2 train.py --epochs 3

With ``--launcher mpirun`` (the default where Open MPI's ``mpirun`` is
installed) mpirun starts the processes, so the MPI backend finds its peers;
if one fails, mpirun ends the others. With ``--launcher spawn`` (the default
without mpirun) the launcher starts them itself; they meet at
MASTER_ADDR:MASTER_PORT, where rank 0 serves the rendezvous store (NCCL/RCCL
groups, or the 'tcp' CPU backend); if one fails, the launcher ends the others.
Either way the exit status is the first failure's. Under mpirun directly
(``mpirun -np 2 python train.py``) a script needs no launcher:
init_process_group reads MPI's environment.
"""
import argparse
import os
import runpy
import shutil
import signal
import subprocess
import sys
import time

# Open MPI settings for a single machine: no ptrace-based single copy (blocked
# in containers), any number of processes per core.
_MPI_ENV = {"OMPI_MCA_btl_vader_single_copy_mechanism": "none",
            "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def mpirun_command(nproc, argv, mpirun=None):
    """The mpirun command line that starts ``argv`` (a Python command after the
    interpreter) nproc times through this module's child mode."""
    mpirun = mpirun or shutil.which("mpirun")
    if mpirun is None:
        raise RuntimeError("[pyflame.distributed.run] mpirun not found; install Open MPI "
                           "(Debian: openmpi-bin libopenmpi-dev)")
    cmd = [mpirun, "-np", str(nproc), "--oversubscribe", "--bind-to", "none"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd + [sys.executable, "-m", "pyflame.distributed.run", "--child", *argv]


def mpi_env(master_addr=None, master_port=None):
    """This environment plus the launcher's settings; given values win, else
    the environment's MASTER_ADDR / MASTER_PORT, else 127.0.0.1:29500."""
    env = dict(os.environ)
    for k, v in _MPI_ENV.items():
        env.setdefault(k, v)
    for k, v, default in (("MASTER_ADDR", master_addr, "127.0.0.1"), ("MASTER_PORT", master_port, 29500)):
        env[k] = str(v) if v is not None else env.get(k, str(default))
    return env


def _child(argv):
    """In each started process: the usual variables from MPI's, then the script."""
    env = os.environ
    env["RANK"] = env.get("OMPI_COMM_WORLD_RANK", "0")
    env["WORLD_SIZE"] = env.get("OMPI_COMM_WORLD_SIZE", "1")
    env["LOCAL_RANK"] = env.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")
    env["LOCAL_WORLD_SIZE"] = env.get("OMPI_COMM_WORLD_LOCAL_SIZE", env["WORLD_SIZE"])
    sys.argv = argv
    sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
    runpy.run_path(argv[0], run_name="__main__")


def spawn_env(rank, nproc, env):
    """The environment of the rank-th of nproc processes on this machine."""
    # Not MPI's processes: no inherited mpirun variables (a launcher run under mpirun).
    e = {k: v for k, v in env.items()
         if not k.startswith(("OMPI_COMM_WORLD_", "PMIX_", "PMI_"))}
    e.update(RANK=str(rank), WORLD_SIZE=str(nproc), LOCAL_RANK=str(rank),
             LOCAL_WORLD_SIZE=str(nproc))
    return e


def _end(procs, sig, grace):
    """Sends sig to the processes still running; kills those alive after grace seconds."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(sig)
    end = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(timeout=max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def spawn(nproc, argv, env):
    """Starts ``python argv`` nproc times with the rendezvous environment and
    waits: the first failure ends the others (SIGTERM, then SIGKILL after 5 s)
    and is the exit status."""
    procs = [subprocess.Popen([sys.executable, *argv], env=spawn_env(r, nproc, env))
             for r in range(nproc)]
    try:
        while True:
            codes = [p.poll() for p in procs]
            failed = [c for c in codes if c not in (None, 0)]
            if failed:
                _end(procs, signal.SIGTERM, 5.0)
                return failed[0] if failed[0] > 0 else 128 - failed[0]
            if all(c == 0 for c in codes):
                return 0
            time.sleep(0.05)
    except KeyboardInterrupt:
        _end(procs, signal.SIGINT, 5.0)
        return 130


def _default_nproc():
    try:
        from .. import _core
        n = _core.rocm_device_count()
    except Exception:  # no GPU runtime: one process
        n = 0
    return max(1, n)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        return _child(argv[1:])
    p = argparse.ArgumentParser(prog="python -m pyflame.distributed.run",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--nproc-per-node", "--nproc_per_node", type=int, default=None,
                   help="processes to start (default: the number of GPUs, at least 1)")
    p.add_argument("--master-addr", "--master_addr", default=None,
                   help="default: $MASTER_ADDR or 127.0.0.1")
    p.add_argument("--master-port", "--master_port", type=int, default=None,
                   help="default: $MASTER_PORT or 29500")
    p.add_argument("--launcher", choices=("auto", "mpirun", "spawn"), default="auto",
                   help="who starts the processes: mpirun, or this launcher with a rendezvous "
                        "at MASTER_ADDR:MASTER_PORT (default: mpirun where installed)")
    p.add_argument("script", help="the training script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    nproc = a.nproc_per_node or _default_nproc()
    if nproc < 1:
        p.error("--nproc-per-node must be at least 1")
    env = mpi_env(a.master_addr, a.master_port)
    if a.launcher == "spawn" or (a.launcher == "auto" and shutil.which("mpirun") is None):
        return spawn(nproc, [a.script, *a.args], env)
    cmd = mpirun_command(nproc, [a.script, *a.args])
    proc = subprocess.Popen(cmd, env=env)
    try:
        return proc.wait()
    except KeyboardInterrupt:  # mpirun passes the signal on and ends every rank
        proc.send_signal(signal.SIGINT)
        return proc.wait()


if __name__ == "__main__":
    sys.exit(main())
