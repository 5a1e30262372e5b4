"""Data parallelism: ``DistributedDataParallel`` (``torch.nn.parallel``'s).

    dist.init_process_group()
    model = nn.parallel.DistributedDataParallel(model)
    loss_fn(model(x_shard), y_shard).backward()   # gradients now averaged over ranks
    opt.step()

Each process holds a full replica. At construction the replicas take rank 0's
parameters and buffers. The parameters' gradients are averaged over ranks in
buckets of about ``bucket_cap_mb`` (one all_reduce of a flat buffer per
bucket, parameters in reverse order, the order backward produces them). The
reduction overlaps the backward pass: a post-accumulate-grad hook on every
parameter marks its gradient ready, and a bucket whose gradients are all
ready is launched at once (``async_op``: on NCCL/RCCL it runs on the
communicator's stream while backward's later kernels run), buckets always in
order so every rank issues the same sequence. At the end of ``backward()``
the rest are launched and all are waited for, so every replica takes the
same optimizer step. Inside ``no_sync()`` gradients accumulate locally; the
first synchronized backward after it averages the sums. A parameter that
gets no gradient in a backward counts as zeros (no hang, no
``find_unused_parameters`` needed): its bucket, and those after it, are
reduced at the end of backward instead of during it.
Design: docs/design/distributed.md.
"""
import contextlib
import weakref

from ... import _core
from ..._core import Tensor
from ..modules.module import Module
from ... import distributed as dist

__all__ = ["DistributedDataParallel"]

_live = weakref.WeakSet()  # every wrapper: a pending one finishes after backward()
_original_backward = None


def _install_backward_hook():
    """Tensor.backward, then the pending reductions' end: launch the buckets
    the hooks did not, wait for all. The engine has no end-of-backward
    callback, so the wrapper of Tensor.backward is that point."""
    global _original_backward
    if _original_backward is not None:
        return
    _original_backward = Tensor.backward

    def backward(self, gradient=None, retain_graph=False):
        _original_backward(self, gradient, retain_graph)
        for ddp in list(_live):
            if ddp._pending:
                ddp.reduce_gradients()

    backward.__doc__ = _original_backward.__doc__
    Tensor.backward = backward


def _grad_ready_hook(ddp_ref, bucket):
    """A parameter's hook: one more gradient of ``bucket`` is ready. Holds
    the wrapper weakly (the hook lives as long as the parameter)."""
    def hook(_param):
        ddp = ddp_ref()
        if ddp is not None and ddp._pending:
            ddp._mark_ready(bucket)
    return hook


class DistributedDataParallel(Module):
    """Wraps ``module`` for data-parallel training over the default process group.

    bucket_cap_mb: the size of a gradient bucket (one all_reduce each).
    broadcast_buffers: copy rank 0's buffers (BatchNorm statistics) to every
    rank before each forward, as PyTorch does.
    find_unused_parameters: accepted for PyTorch's signature; unused
    parameters need nothing here (their gradient counts as zeros).
    """

    def __init__(self, module, bucket_cap_mb=25.0, broadcast_buffers=True,
                 device_ids=None, output_device=None, find_unused_parameters=False):
        super().__init__()
        if not dist.is_initialized():
            raise RuntimeError("[DistributedDataParallel] call pyflame.distributed."
                               "init_process_group() first")
        if bucket_cap_mb <= 0:
            raise ValueError("[DistributedDataParallel] bucket_cap_mb must be positive")
        self.module = module
        object.__setattr__(self, "_broadcast_buffers", broadcast_buffers)
        object.__setattr__(self, "_sync", True)
        object.__setattr__(self, "_pending", False)
        params = [p for p in module.parameters() if p.requires_grad]
        object.__setattr__(self, "_buckets", self._make_buckets(params, bucket_cap_mb * 2**20))
        self._reset_reduction()
        self._sync_module_state()
        me = weakref.ref(self)
        handles = [p.register_post_accumulate_grad_hook(_grad_ready_hook(me, i))
                   for i, bucket in enumerate(self._buckets) for p in bucket]
        object.__setattr__(self, "_hook_handles", handles)
        weakref.finalize(self, _remove_hooks, handles)
        _install_backward_hook()
        _live.add(self)

    @staticmethod
    def _make_buckets(params, cap_bytes):
        """Reverse registration order, split at the cap and where device or
        dtype change (a bucket is one flat buffer)."""
        buckets, cur, size = [], [], 0
        for p in reversed(params):
            if cur and (size + p.nbytes > cap_bytes or p.dtype != cur[0].dtype
                        or p.device != cur[0].device):
                buckets.append(cur)
                cur, size = [], 0
            cur.append(p)
            size += p.nbytes
        if cur:
            buckets.append(cur)
        return buckets

    def _sync_module_state(self):
        for p in self.module.parameters():
            dist.broadcast(p, 0)
        self._sync_buffers()

    def _sync_buffers(self):
        for b in self.module.buffers():
            dist.broadcast(b, 0)

    @property
    def bucket_sizes(self):
        """Number of parameters in each gradient bucket, in reduction order."""
        return [len(b) for b in self._buckets]

    def forward(self, *args, **kwargs):
        if self._broadcast_buffers and self._sync:
            self._sync_buffers()
        out = self.module(*args, **kwargs)
        if _core.is_grad_enabled():
            object.__setattr__(self, "_pending", self._sync)
            if not self._launched:  # counts left by a backward that raised
                self._reset_reduction()
        return out

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside keep their gradients local (accumulation)."""
        old = self._sync
        object.__setattr__(self, "_sync", False)
        try:
            yield
        finally:
            object.__setattr__(self, "_sync", old)

    # ---- the reduction: buckets launched in order as they fill, then waited

    def _reset_reduction(self):
        object.__setattr__(self, "_ready", [0] * len(self._buckets))
        object.__setattr__(self, "_launched", [])  # (bucket, flat, work), in bucket order

    def _mark_ready(self, bucket):
        self._ready[bucket] += 1
        self._launch_ready()

    def _launch_ready(self, through=None):
        """Launches the next buckets in order while they are full (or, with
        ``through``, every bucket before it regardless)."""
        import pyflame as pf
        while len(self._launched) < len(self._buckets):
            i = len(self._launched)
            bucket = self._buckets[i]
            if (through is None or i >= through) and self._ready[i] < len(bucket):
                return
            grads = [p.grad if p.grad is not None else
                     pf.zeros(p.shape, dtype=p.dtype, device=p.device) for p in bucket]
            flat = pf.cat([g.reshape(-1) for g in grads]) if len(grads) > 1 else grads[0].reshape(-1)
            flat = flat.detach() if flat.requires_grad else flat
            self._launched.append((i, dist.all_reduce(flat, op=dist.ReduceOp.AVG, async_op=True), flat))

    def reduce_gradients(self):
        """Averages the parameters' gradients over ranks: launches the buckets
        the backward hooks did not, waits for every bucket, and writes the
        averages into ``.grad``. Runs by itself at the end of backward();
        call it after pf.grad-style code that fills .grad otherwise. A
        parameter without a gradient counts as zeros."""
        import pyflame as pf
        object.__setattr__(self, "_pending", False)
        try:
            self._launch_ready(through=len(self._buckets))
            for i, work, flat in self._launched:
                work.wait()
                start = 0
                for p in self._buckets[i]:
                    n = p.numel()
                    p.grad = flat[start:start + n].reshape(p.shape)
                    start += n
                pf.eval(*[p.grad for p in self._buckets[i]])
        finally:
            self._reset_reduction()


def _remove_hooks(handles):
    for h in handles:
        h.remove()
