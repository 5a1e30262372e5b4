"""The rendezvous store (pyflame.distributed.TCPStore) and what is built on
it: processes that meet at MASTER_ADDR:MASTER_PORT without mpirun (the
launcher's spawn mode and the 'tcp' backend). Clients of one store in
threads of this process, and real processes for the groups."""
import os
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

import pyflame as pf
import pyflame.distributed as dist
from pyflame.distributed import run as launcher

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def in_threads(fns):
    """Runs the callables at once; returns their results (re-raising the first error)."""
    out, errors = [None] * len(fns), []

    def call(i):
        try:
            out[i] = fns[i]()
        except Exception as e:  # noqa: BLE001 - handed to the test
            errors.append(e)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    if errors:
        raise errors[0]
    return out


# ------------------------------------------------------------- the store

def test_store_exchange_four_clients():
    port = free_port()
    stores = [dist.TCPStore("127.0.0.1", port, 4, is_master=True, timeout=10, rank=0)]
    stores += [dist.TCPStore("localhost", port, 4, timeout=10, rank=r) for r in (1, 2, 3)]
    stores[1].set("id", b"\x00\x01binary\xff")
    assert stores[3].get("id") == b"\x00\x01binary\xff"
    assert stores[2].check(["id"]) and not stores[2].check(["id", "nope"])
    assert sorted(in_threads([lambda s=s: s.add("count", 2) for s in stores])) == [2, 4, 6, 8]
    assert stores[0].get("count") == b"8"
    # a get waits for the key; a gather for every rank, in rank order
    late = threading.Timer(0.2, lambda: stores[0].set("late", "v"))
    late.start()
    assert stores[3].get("late") == b"v"
    got = in_threads([lambda r=r: stores[r].gather("g", r, 4, f"part{r}".encode() * r) for r in (3, 1, 0, 2)])
    want = [b"", b"part1", b"part2part2", b"part3part3part3"]
    assert all(g == want for g in got), got
    assert stores[0].delete_key("id") and not stores[0].delete_key("id")
    for s in reversed(stores):
        s.close()


def test_store_client_before_master():
    """A client started before rank 0 listens retries until it does."""
    port = free_port()
    master = []
    t = threading.Timer(0.3, lambda: master.append(
        dist.TCPStore("127.0.0.1", port, 2, is_master=True, timeout=10)))
    t.start()
    client = dist.TCPStore("127.0.0.1", port, 2, timeout=10)
    t.join()
    client.set("k", "v")
    assert master[0].get("k") == b"v"
    client.close()
    master[0].close()


def test_store_timeout_names_the_address():
    port = free_port()
    master = dist.TCPStore("127.0.0.1", port, 2, is_master=True, timeout=0.5, rank=0)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=rf"\[TCPStore.gather\] timed out after 0.5.* 127.0.0.1:{port}"):
        master.gather("init", 0, 2, b"")
    assert time.monotonic() - t0 < 5
    with pytest.raises(RuntimeError, match="unusable"):
        master.get("x")
    master.close()


def test_store_bad_address_and_port():
    with pytest.raises(ValueError, match=r"\[TCPStore\] MASTER_PORT 70000 is not a TCP port"):
        dist.TCPStore("127.0.0.1", 70000, timeout=1)
    with pytest.raises(RuntimeError, match=r"\[TCPStore\] cannot resolve MASTER_ADDR 'no-such-host.invalid'"):
        dist.TCPStore("no-such-host.invalid", 29500, timeout=1)
    port = free_port()  # nobody listens there
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=rf"could not reach the rendezvous store at 127.0.0.1:{port} within"):
        dist.TCPStore("127.0.0.1", port, timeout=0.5)
    assert time.monotonic() - t0 < 5
    with socket.socket() as taken:  # rank 0 cannot listen on a port in use
        taken.bind(("", 0))
        taken.listen()
        with pytest.raises(RuntimeError, match=r"rank 0 cannot listen on port \d+: .*set MASTER_PORT"):
            dist.TCPStore("127.0.0.1", taken.getsockname()[1], is_master=True, timeout=1)


def test_store_dead_rank_fails_the_waiters_at_once():
    """A rank whose connection ends without a goodbye (its process died)
    breaks the store: waiting ranks raise at once, naming it."""
    port = free_port()
    master = dist.TCPStore("127.0.0.1", port, 2, is_master=True, timeout=30, rank=0)
    raw = socket.create_connection(("127.0.0.1", port))
    raw.sendall(struct.pack("<BIQi", 8, 0, 4, 1))  # HELLO as rank 1, by the wire format
    assert raw.recv(9)[0] == 0
    threading.Timer(0.2, raw.close).start()
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"rank 1 left the process group without closing it"):
        master.gather("c0", 0, 2, b"")
    assert time.monotonic() - t0 < 5
    master.close()


def test_store_rejects_disagreeing_ranks():
    port = free_port()
    a = dist.TCPStore("127.0.0.1", port, is_master=True, timeout=5)
    b = dist.TCPStore("127.0.0.1", port, timeout=5)
    with pytest.raises(RuntimeError, match="two processes joined as rank 0"):
        in_threads([lambda: a.gather("k", 0, 2, b""), lambda: (time.sleep(0.1), b.gather("k", 0, 2, b""))])
    b.close()
    a.close()


# ------------------------------------------ groups without mpirun (spawn)

def spawn(args, nproc=2, env=None, timeout=120):
    e = launcher.mpi_env(master_port=free_port())
    e.update(env or {})
    cmd = [sys.executable, "-m", "pyflame.distributed.run", "--launcher", "spawn",
           "--nproc-per-node", str(nproc), *args]
    p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def test_collectives_tcp_three_processes():
    rc, out = spawn([os.path.join(HERE, "collectives.py")], nproc=3,
                    env={"PYFLAME_DIST_DEVICE": "cpu", "PYFLAME_DIST_BACKEND": "tcp"})
    assert rc == 0, out
    assert all(f"rank {r}: collectives ok" in out for r in range(3)), out


def test_ddp_tcp_two_processes():
    rc, out = spawn([os.path.join(HERE, "ddp.py")], env={"PYFLAME_DIST_BACKEND": "tcp"})
    assert rc == 0, out
    assert "rank 0: ddp ok" in out and "rank 1: ddp ok" in out, out


@pytest.mark.parametrize("mode", ["vanish", "die"])
def test_tcp_failures(mode):
    """A rank that vanishes fails the others at once; a rank that fails makes
    the launcher end the others. (A stalled rank's timeout: the store tests
    above and test_rank_that_never_comes.)"""
    t0 = time.monotonic()
    rc, out = spawn([os.path.join(HERE, "failures.py"), mode], env={"PYFLAME_DIST_BACKEND": "tcp"})
    assert time.monotonic() - t0 < 30, out
    if mode == "die":  # rank 0 may fail first (rank 1 left), or be ended
        assert rc != 0 and "no timeout" not in out, out
    else:
        assert rc == 0 and "vanish ok after" in out, out


def test_rank_that_never_comes(monkeypatch):
    """init_process_group times out, naming the address, when a rank of the
    world never joins; the process can try again."""
    port = free_port()
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    with pytest.raises(RuntimeError, match=rf"\[init_process_group\] timed out .*127.0.0.1:{port}"):
        dist.init_process_group("tcp", timeout=0.5, rank=0, world_size=2)
    assert not dist.is_initialized()
    monkeypatch.setenv("MASTER_PORT", "http")
    with pytest.raises(ValueError, match=r"\[init_process_group\] MASTER_PORT='http' is not a TCP port"):
        dist.init_process_group("tcp", timeout=0.5, rank=0, world_size=2)
    monkeypatch.delenv("MASTER_ADDR")
    with pytest.raises(ValueError, match=r"\[init_process_group\] a rendezvous needs MASTER_ADDR and MASTER_PORT"):
        dist.init_process_group("tcp", timeout=0.5, rank=0, world_size=2)


def test_launcher_spawn_ends_the_others_and_sets_environment(tmp_path):
    script = tmp_path / "env.py"
    script.write_text("import os, sys, time\n"
                      "print(' '.join(['ENV'] + [os.environ[k] for k in ('RANK', 'WORLD_SIZE',"
                      " 'LOCAL_RANK', 'MASTER_ADDR')] + [str(sys.argv[1:])]), flush=True)\n"
                      "if os.environ['RANK'] == '1': sys.exit(5)\n"
                      "time.sleep(60)\n")
    t0 = time.monotonic()
    rc, out = spawn([str(script), "--x"])
    assert rc == 5 and time.monotonic() - t0 < 45, out  # well short of rank 0's 60 s sleep
    assert "ENV 0 2 0 127.0.0.1 ['--x']" in out and "ENV 1 2 1 127.0.0.1 ['--x']" in out, out


def test_ddp_example_tcp_matches_one_process(tmp_path):
    import numpy as np
    script = os.path.join(ROOT, "examples", "train_ddp.py")
    args = ["--train-size", "256", "--epochs", "1", "--batch", "32"]
    rc, out = spawn([script, *args, "--save", str(tmp_path / "two.npz")])
    assert rc == 0 and "on 2 process(es)" in out, out
    one = subprocess.run([sys.executable, script, *args, "--save", str(tmp_path / "one.npz")],
                         capture_output=True, text=True, timeout=120)
    assert one.returncode == 0, one.stdout + one.stderr
    a, b = np.load(tmp_path / "two.npz"), np.load(tmp_path / "one.npz")
    for k in a.files:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-4, atol=1e-6, err_msg=k)


# ------------------------------- NCCL/RCCL on 2 GPUs, rendezvous without MPI

def needs_two_gpus():
    if not pf._core._dist.gpu_collectives_available():
        pytest.skip("this build has no NCCL/RCCL")
    count = pf.rocm_device_count() if pf.rocm_is_available() else 0
    if count < 2:
        pytest.skip(f"NCCL/RCCL across processes needs 2 GPUs, this machine has {count}")


def test_nccl_two_gpus_through_the_store(gpu_device):
    """Every collective against NumPy and DDP against NumPy on 2 GPUs, the
    processes started without mpirun and meeting at MASTER_ADDR:MASTER_PORT."""
    needs_two_gpus()
    env = {"PYFLAME_DIST_DEVICE": "rocm", "PYFLAME_DIST_BACKEND": "auto"}
    rc, out = spawn([os.path.join(HERE, "collectives.py")], env=env)
    assert rc == 0 and "rank 1: collectives ok" in out, out
    rc, out = spawn([os.path.join(HERE, "ddp.py")], env=env)
    assert rc == 0 and "rank 1: ddp ok" in out, out


def test_ddp_example_two_gpus_matches_one(gpu_device, tmp_path):
    import numpy as np
    needs_two_gpus()
    script = os.path.join(ROOT, "examples", "train_ddp.py")
    args = ["--train-size", "512", "--epochs", "2", "--batch", "32", "--device", "rocm"]
    rc, out = spawn([script, *args, "--save", str(tmp_path / "two.npz")])
    assert rc == 0 and "on 2 process(es)" in out, out
    one = subprocess.run([sys.executable, script, *args, "--save", str(tmp_path / "one.npz")],
                         capture_output=True, text=True, timeout=120)
    assert one.returncode == 0, one.stdout + one.stderr
    a, b = np.load(tmp_path / "two.npz"), np.load(tmp_path / "one.npz")
    for k in a.files:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-3, atol=1e-5, err_msg=k)
