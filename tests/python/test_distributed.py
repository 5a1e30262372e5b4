"""pyflame.distributed: collectives on 2 processes against NumPy (through
mpirun and through the launcher), failures (a stalled rank times out, a dead
rank ends the job) and the errors of a process that never joined a group.
The workers live in tests/python/distributed/."""
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

import pyflame as pf
import pyflame.distributed as dist
from pyflame.distributed import run as launcher

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

needs_mpi = pytest.mark.skipif(not (pf._core._dist.mpi_available() and shutil.which("mpirun")),
                               reason="built without MPI or no mpirun (Debian: libopenmpi-dev openmpi-bin)")


def launch(args, nproc=2, env=None, timeout=120, via="launcher"):
    """Runs a script on nproc processes; returns (returncode, output)."""
    e = launcher.mpi_env()
    e.update(env or {})
    if via == "launcher":
        cmd = [sys.executable, "-m", "pyflame.distributed.run", "--nproc-per-node", str(nproc), *args]
    else:  # plain mpirun, as the README documents
        cmd = [shutil.which("mpirun"), "-np", str(nproc), "--oversubscribe", "--bind-to", "none"]
        cmd += ["--allow-run-as-root"] if os.geteuid() == 0 else []
        cmd += [sys.executable, *args]
    p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def gpu_count():
    return pf.rocm_device_count() if pf.rocm_is_available() else 0


# ------------------------------------------------- collectives, 2 processes

@needs_mpi
@pytest.mark.parametrize("via", ["mpirun", "launcher"])
def test_collectives_cpu_two_processes(via):
    rc, out = launch([os.path.join(HERE, "collectives.py")], via=via,
                     env={"PYFLAME_DIST_DEVICE": "cpu", "PYFLAME_DIST_BACKEND": "mpi"})
    assert rc == 0, out
    assert "rank 0: collectives ok" in out and "rank 1: collectives ok" in out, out


@needs_mpi
def test_collectives_gpu_tensors_through_mpi(gpu_device):
    """GPU tensors on the MPI backend are staged through host memory."""
    rc, out = launch([os.path.join(HERE, "collectives.py")],
                     env={"PYFLAME_DIST_DEVICE": "rocm", "PYFLAME_DIST_BACKEND": "mpi"})
    assert rc == 0, out


@needs_mpi
def test_collectives_nccl_two_gpus(gpu_device):
    if not pf._core._dist.gpu_collectives_available():
        pytest.skip("this build has no NCCL/RCCL")
    if gpu_count() < 2:
        pytest.skip(f"NCCL/RCCL across processes needs 2 GPUs, this machine has {gpu_count()}")
    rc, out = launch([os.path.join(HERE, "collectives.py")],
                     env={"PYFLAME_DIST_DEVICE": "rocm", "PYFLAME_DIST_BACKEND": "auto"})
    assert rc == 0, out
    assert "collectives ok" in out


@needs_mpi
def test_collectives_nccl_world_of_one(gpu_device):
    """NCCL/RCCL with a world of one process: every collective is the identity."""
    if not pf._core._dist.gpu_collectives_available():
        pytest.skip("this build has no NCCL/RCCL")
    rc, out = launch([os.path.join(HERE, "world_of_one.py")], nproc=1,
                     env={"PYFLAME_DIST_DEVICE": "rocm", "PYFLAME_DIST_BACKEND": "auto"})
    assert rc == 0, out
    assert "world of one ok" in out, out


# ------------------------------------------------------------- failures

def _no_stray(script):
    """No process of the job is left (read from /proc: no `ps` child, which
    would inherit the sanitizer run's LD_PRELOAD)."""
    time.sleep(0.2)
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if script in cmd:
            left.append(f"{pid}: {cmd}")
    assert not left, left


@needs_mpi
def test_stalled_rank_times_out():
    script = os.path.join(HERE, "failures.py")
    t0 = time.monotonic()
    rc, out = launch([script, "hang"])
    assert "timeout ok after" in out, out
    assert time.monotonic() - t0 < 30
    _no_stray(script)


@needs_mpi
def test_dead_rank_ends_the_job():
    script = os.path.join(HERE, "failures.py")
    t0 = time.monotonic()
    rc, out = launch([script, "die"])
    assert rc != 0, out
    assert time.monotonic() - t0 < 60  # rank 0 would wait 120 s on its own
    _no_stray(script)


# ------------------------------------- in this process (no group joined)

def test_not_initialized_errors():
    if dist.is_initialized():
        pytest.skip("a group is initialized in this process")
    with pytest.raises(RuntimeError, match=r"\[all_reduce\] the default process group is not initialized"):
        dist.all_reduce(pf.ones(2))
    with pytest.raises(RuntimeError, match=r"\[get_rank\]"):
        dist.get_rank()


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"\[init_process_group\] unknown backend 'gloo'"):
        dist.init_process_group(backend="gloo")
    with pytest.raises(ValueError, match=r"\[init_process_group\] timeout must be positive"):
        dist.init_process_group(backend="mpi", timeout=0)
    with pytest.raises(ValueError, match="init_method"):
        dist.init_process_group(init_method="tcp://127.0.0.1:1234")
    with pytest.raises(TypeError, match=r"\[all_reduce\] tensor must be a pyflame Tensor"):
        dist.all_reduce(np.ones(2))
    assert not dist.is_initialized()


@needs_mpi
def test_launcher_sets_environment(tmp_path):
    script = tmp_path / "env.py"
    # one write per line: print's separate pieces could interleave with the other rank's
    script.write_text("import os, sys\n"
                      "print(' '.join(['ENV'] + [os.environ[k] for k in ('RANK', 'WORLD_SIZE',"
                      " 'LOCAL_RANK', 'MASTER_ADDR', 'MASTER_PORT')] + [str(sys.argv[1:])]),"
                      " flush=True)\n"
                      "sys.exit(int(os.environ['RANK']) * 0)\n")
    rc, out = launch([str(script), "--lr", "3"], env={"MASTER_PORT": "29555"})
    assert rc == 0, out
    # mpirun forwards each rank's output as it comes: lines may interleave
    found = sorted(re.findall(r"ENV \d \d \d \S+ \d+ \[[^]]*\]", out))
    assert found == ["ENV 0 2 0 127.0.0.1 29555 ['--lr', '3']",
                     "ENV 1 2 1 127.0.0.1 29555 ['--lr', '3']"], out


# --------------------------------------------------- DistributedDataParallel

@needs_mpi
def test_ddp_gradients_two_processes():
    rc, out = launch([os.path.join(HERE, "ddp.py")])
    assert rc == 0, out
    assert "rank 0: ddp ok" in out and "rank 1: ddp ok" in out, out


@needs_mpi
def test_ddp_example_matches_one_process(tmp_path):
    """examples/train_ddp.py on 2 processes ends with the parameters one
    process reaches on the same global batches."""
    script = os.path.join(ROOT, "examples", "train_ddp.py")
    args = ["--train-size", "512", "--epochs", "2", "--batch", "32"]
    rc, out = launch([script, *args, "--save", str(tmp_path / "two.npz")])
    assert rc == 0, out
    assert "on 2 process(es)" in out, out
    one = subprocess.run([sys.executable, script, *args, "--save", str(tmp_path / "one.npz")],
                         capture_output=True, text=True, timeout=120)
    assert one.returncode == 0, one.stdout + one.stderr
    a, b = np.load(tmp_path / "two.npz"), np.load(tmp_path / "one.npz")
    assert sorted(a.files) == sorted(b.files)
    start = {}
    for k in a.files:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-4, atol=1e-6, err_msg=k)
        start[k] = np.abs(a[k]).max()
    assert all(v > 0 for v in start.values())


def test_ddp_needs_a_group():
    if dist.is_initialized():
        pytest.skip("a group is initialized in this process")
    with pytest.raises(RuntimeError, match=r"\[DistributedDataParallel\] call .*init_process_group"):
        pf.nn.parallel.DistributedDataParallel(pf.nn.Linear(2, 2))


# ------------------------------------------------------ DistributedSampler

@pytest.mark.parametrize("n,world,drop_last", [(10, 3, False), (10, 3, True), (12, 4, False), (2, 3, False)])
def test_sampler_matches_torch_unshuffled(n, world, drop_last):
    torch_sampler = pytest.importorskip("torch.utils.data.distributed").DistributedSampler
    for rank in range(world):
        mine = list(dist.DistributedSampler(n, world, rank, shuffle=False, drop_last=drop_last))
        theirs = list(torch_sampler(range(n), world, rank, shuffle=False, drop_last=drop_last))
        assert mine == theirs, (rank, mine, theirs)


def test_sampler_shuffled_partition():
    shares = [dist.DistributedSampler(100, 4, r, seed=3) for r in range(4)]
    for s in shares:
        s.set_epoch(2)
    got = np.concatenate([s.indices() for s in shares])
    assert sorted(got.tolist()) == list(range(100)) and all(len(s) == 25 for s in shares)
    again = dist.DistributedSampler(100, 4, 0, seed=3)
    again.set_epoch(2)
    assert list(again) == list(shares[0])
    again.set_epoch(3)
    assert list(again) != list(shares[0])
    with pytest.raises(ValueError, match=r"\[DistributedSampler\] rank 4"):
        dist.DistributedSampler(10, 4, 4)
