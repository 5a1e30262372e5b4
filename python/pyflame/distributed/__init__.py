"""Process groups and collectives (``torch.distributed``'s interface).

CPU tensors travel through MPI (Open MPI), GPU tensors through NCCL on NVIDIA
and RCCL on AMD, enqueued on the evaluation's stream. Start the processes with
``python -m pyflame.distributed.run --nproc-per-node N script.py``, with
``mpirun -np N python script.py``, or with any launcher that sets RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT (rank 0 then serves a rendezvous
store there, :class:`TCPStore`); then::

    import pyflame.distributed as dist
    dist.init_process_group()            # backend='auto': NCCL/RCCL on a GPU build, else MPI
    dist.all_reduce(t, op=dist.ReduceOp.AVG)   # t now holds the average over ranks

Collectives write their result into the tensors they are given, as in
PyTorch, and evaluate them. Ranks that pass different shapes or dtypes get a
``ValueError`` naming both (the group stays usable); a collective that waits
longer than ``timeout`` raises ``RuntimeError`` (a rank died or hangs). Design:
docs/design/distributed.md.
"""
import datetime
import os

from .._core import Tensor
from .._core import _dist as _c
from .sampler import DistributedSampler  # noqa: E402

__all__ = ["ReduceOp", "init_process_group", "is_available", "is_initialized",
           "destroy_process_group", "get_backend", "get_rank", "get_world_size",
           "barrier", "all_reduce", "broadcast", "all_gather", "all_gather_into_tensor",
           "reduce_scatter", "reduce_scatter_tensor", "send", "recv", "DistributedSampler",
           "TCPStore", "Work"]


class ReduceOp:
    """Reductions of all_reduce and reduce_scatter."""
    SUM = "sum"
    AVG = "avg"
    MAX = "max"
    MIN = "min"


def _op(op, fn):
    name = getattr(op, "name", op)
    if not isinstance(name, str):
        raise ValueError(f"[{fn}] op must be a ReduceOp, got {op!r}")
    return name.lower()


def _check_tensor(t, fn, what="tensor"):
    if not isinstance(t, Tensor):
        raise TypeError(f"[{fn}] {what} must be a pyflame Tensor, got {type(t).__name__}")


def _seconds(timeout):
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


def is_available():
    """Whether this build has a transport (MPI or NCCL/RCCL)."""
    return _c.mpi_available() or _c.gpu_collectives_available()


def _preload_nccl():
    """Loads NCCL from the nvidia-nccl-cu* wheel (PyTorch's too) where one is
    installed, so that the core's dlopen("libnccl.so.2") finds it."""
    try:
        import ctypes
        import nvidia.nccl
    except ImportError:
        return
    for d in nvidia.nccl.__path__:
        lib = os.path.join(d, "lib", "libnccl.so.2")
        if os.path.exists(lib):
            ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
            return


def init_process_group(backend="auto", timeout=1800.0, rank=None, world_size=None,
                       init_method=None):
    """Joins the default process group.

    backend: 'mpi' (CPU tensors; GPU tensors are staged through the host;
    processes started by mpirun), 'nccl' / 'rccl' (GPU tensors, this build's
    GPU library), 'tcp' (CPU tensors through the rendezvous store: correct,
    not fast; where MPI is missing), or 'auto' (the GPU library where it
    works, else MPI under mpirun, else 'tcp').
    Processes not started by mpirun meet at MASTER_ADDR:MASTER_PORT, where
    rank 0 serves the rendezvous store (NCCL's unique id and the cross-rank
    checks go through it); they need RANK and WORLD_SIZE.
    timeout: seconds (or a timedelta) any collective may wait before raising.
    rank, world_size: default to RANK / WORLD_SIZE or MPI's environment; given
    or set, they must agree with how the processes were started.
    init_method: only 'env://' (or None) is supported.
    """
    if init_method not in (None, "env://"):
        raise ValueError("[init_process_group] only init_method='env://' is supported "
                         "(MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE or mpirun's environment)")
    if not isinstance(backend, str):
        raise ValueError(f"[init_process_group] backend must be a string, got {backend!r}")
    seconds = _seconds(timeout)
    if _c.gpu_collectives_available() and backend.lower() in ("auto", "nccl"):
        _preload_nccl()
    _c.init_process_group(backend.lower(), seconds, -1 if rank is None else int(rank),
                          -1 if world_size is None else int(world_size))
    # Scripts started by plain mpirun find the usual variables afterwards.
    os.environ.setdefault("RANK", str(_c.get_rank()))
    os.environ.setdefault("WORLD_SIZE", str(_c.get_world_size()))
    local = os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK")
    if local is not None:
        os.environ.setdefault("LOCAL_RANK", local)


is_initialized = _c.is_initialized
destroy_process_group = _c.destroy_process_group
get_backend = _c.get_backend
get_rank = _c.get_rank
get_world_size = _c.get_world_size


def barrier(async_op=False):
    """Waits until every rank called barrier."""
    _c.barrier()
    return _done(async_op)


def _write(dst, value):
    """Writes a collective's result into the caller's tensor (a new version,
    docs/design/inplace.md) and evaluates it."""
    if dst.requires_grad and dst.is_leaf:
        dst._replace(value)  # a parameter: no autograd record of the write
    else:
        dst.copy_(value)
    dst.eval()


class Work:
    """A collective started with ``async_op=True`` (``torch.distributed.Work``).

    On NCCL/RCCL, all_reduce and broadcast run on the communicator's stream
    while the caller goes on (the input was evaluated first; the collective
    is ordered after it); ``wait()`` waits for it with the group's timeout,
    orders the device's later work after it, and writes the result into the
    tensor. Other collectives, and every collective on MPI and 'tcp',
    complete before the call returns: their Work is already complete."""

    def __init__(self, work=None, tensor=None):
        self._work, self._tensor = work, tensor

    def is_completed(self):
        return self._work is None or self._work.is_completed()

    def wait(self, timeout=None):
        """Waits (the group's timeout; ``timeout`` is accepted for PyTorch's
        signature) and writes the result into the tensor; returns True."""
        if self._work is not None:
            work, self._work = self._work, None
            _write(self._tensor, work.wait())
        return True


def _done(async_op):
    return Work() if async_op else None


def all_reduce(tensor, op=ReduceOp.SUM, async_op=False):
    """Reduces ``tensor`` over all ranks in place (sum, avg, max or min).
    With ``async_op=True`` returns a :class:`Work`; the result is in
    ``tensor`` after its ``wait()``."""
    _check_tensor(tensor, "all_reduce")
    if async_op:
        return Work(_c.all_reduce_async(tensor, _op(op, "all_reduce")), tensor)
    _write(tensor, _c.all_reduce(tensor, _op(op, "all_reduce")))


def broadcast(tensor, src, async_op=False):
    """Copies rank ``src``'s ``tensor`` into ``tensor`` on every rank
    (``async_op``: as all_reduce)."""
    _check_tensor(tensor, "broadcast")
    if async_op:
        return Work(_c.broadcast_async(tensor, int(src)), tensor)
    _write(tensor, _c.broadcast(tensor, int(src)))


def all_gather_into_tensor(output, input, async_op=False):
    """``output`` (world_size * n, ...) gets every rank's ``input`` (n, ...) in rank order."""
    _check_tensor(input, "all_gather_into_tensor", "input")
    _check_tensor(output, "all_gather_into_tensor", "output")
    gathered = _c.all_gather(input)
    shape = (gathered.shape[0] * gathered.shape[1],) + tuple(gathered.shape[2:]) \
        if input.ndim else (gathered.shape[0],)
    if tuple(output.shape) != shape:
        raise ValueError(f"[all_gather_into_tensor] output has shape {tuple(output.shape)}, "
                         f"expected {shape}")
    _write(output, gathered.reshape(shape))
    return _done(async_op)


def all_gather(tensor_list, tensor, async_op=False):
    """``tensor_list[r]`` gets rank r's ``tensor``."""
    _check_tensor(tensor, "all_gather")
    if len(tensor_list) != get_world_size():
        raise ValueError(f"[all_gather] tensor_list has {len(tensor_list)} entries for a world "
                         f"of {get_world_size()}")
    gathered = _c.all_gather(tensor)
    for r, dst in enumerate(tensor_list):
        _check_tensor(dst, "all_gather", "tensor_list entry")
        _write(dst, gathered[r])
    return _done(async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, async_op=False):
    """``output`` (n, ...) gets this rank's block of ``input`` (world_size * n, ...) reduced."""
    _check_tensor(input, "reduce_scatter_tensor", "input")
    _check_tensor(output, "reduce_scatter_tensor", "output")
    r = _c.reduce_scatter(input, _op(op, "reduce_scatter_tensor"))
    if tuple(output.shape) != tuple(r.shape):
        raise ValueError(f"[reduce_scatter_tensor] output has shape {tuple(output.shape)}, "
                         f"expected {tuple(r.shape)}")
    _write(output, r)
    return _done(async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, async_op=False):
    """``output`` gets the reduction over ranks of each rank's ``input_list[rank]``."""
    import pyflame
    _check_tensor(output, "reduce_scatter", "output")
    if len(input_list) != get_world_size():
        raise ValueError(f"[reduce_scatter] input_list has {len(input_list)} entries for a "
                         f"world of {get_world_size()}")
    stacked = pyflame.stack(list(input_list))  # (world, *shape)
    r = _c.reduce_scatter(stacked.reshape((stacked.shape[0], -1)), _op(op, "reduce_scatter"))
    _write(output, r.reshape(tuple(output.shape)))
    return _done(async_op)


def send(tensor, dst, tag=0):
    """Sends ``tensor`` to rank ``dst`` (matched by a recv with the same tag)."""
    _check_tensor(tensor, "send")
    _c.send(tensor, int(dst), int(tag))


def recv(tensor, src, tag=0):
    """Receives rank ``src``'s tensor into ``tensor`` (same shape and dtype); returns src."""
    _check_tensor(tensor, "recv")
    _write(tensor, _c.recv(tensor, int(src), int(tag)))
    return int(src)


class TCPStore:
    """The rendezvous store (``torch.distributed.TCPStore``): a key-value
    server in the process with ``is_master=True`` at ``port``; every process
    (the master too) is a client of ``host_name:port``. Connecting retries
    until ``timeout`` (seconds or a timedelta); ``get`` and ``wait`` wait up
    to it, then raise RuntimeError naming the address.

    rank: when given, the store registers this client's rank; a registered
    client whose process ends without ``close()`` breaks the store, and every
    waiting or later call of the others raises at once, naming the rank.
    init_process_group makes one of these from MASTER_ADDR / MASTER_PORT.
    """

    def __init__(self, host_name, port, world_size=None, is_master=False, timeout=300.0,
                 rank=None):
        self._store = _c.TCPStore(str(host_name), int(port), bool(is_master), _seconds(timeout),
                                  -1 if rank is None else int(rank))
        self.world_size = world_size

    def set(self, key, value):
        """Stores ``value`` (bytes or str) under ``key``."""
        self._store.set(key, value)

    def get(self, key):
        """The value of ``key`` (bytes), waiting until some process sets it."""
        return self._store.get(key)

    def add(self, key, amount):
        """Adds ``amount`` to the integer at ``key`` (0 if absent); returns the sum."""
        return self._store.add(key, int(amount))

    def check(self, keys):
        """Whether every key exists (no waiting)."""
        return all(self._store.check(k) for k in keys)

    def wait(self, keys):
        """Waits until every key exists."""
        for k in keys:
            self._store.get(k)

    def delete_key(self, key):
        """Deletes ``key``; returns whether it existed."""
        return self._store.delete_key(key)

    def gather(self, key, rank, world_size, value):
        """Every one of ``world_size`` callers passes its ``value`` under the same
        ``key``; each gets the list of all values in rank order."""
        return self._store.gather(key, int(rank), int(world_size), value)

    def close(self):
        """Leaves the store cleanly (the master's server stops once the others left)."""
        self._store.close()

    @property
    def address(self):
        return self._store.address
