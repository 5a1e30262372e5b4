"""DistributedSampler: the indices of a data set that one rank reads
(``torch.utils.data.distributed.DistributedSampler``'s rules)."""
import math

import numpy as np


class DistributedSampler:
    """Iterates this rank's share of ``range(len(dataset))``.

    Every rank gets ``ceil(n / num_replicas)`` indices (``floor`` with
    drop_last): without drop_last the list is padded by repeating its start,
    as PyTorch does. With shuffle the order is a permutation seeded by
    ``seed + epoch`` (the same on every rank): call ``set_epoch(e)`` at the
    start of each epoch for a new order. ``dataset`` may be a length.
    num_replicas and rank default to the process group's.
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        from . import get_rank, get_world_size, is_initialized
        if num_replicas is None or rank is None:
            if not is_initialized():
                raise RuntimeError("[DistributedSampler] give num_replicas and rank, or call "
                                   "init_process_group() first")
            num_replicas = get_world_size() if num_replicas is None else num_replicas
            rank = get_rank() if rank is None else rank
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ValueError(f"[DistributedSampler] rank {rank} is not in [0, {num_replicas})")
        self.n = dataset if isinstance(dataset, int) else len(dataset)
        self.num_replicas, self.rank = int(num_replicas), int(rank)
        self.shuffle, self.seed, self.drop_last = shuffle, int(seed), drop_last
        self.epoch = 0
        if drop_last and self.n % self.num_replicas:
            self.num_samples = math.ceil((self.n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(self.n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def set_epoch(self, epoch):
        self.epoch = int(epoch)

    def indices(self):
        """This rank's indices as a NumPy array (what iteration yields)."""
        if self.shuffle:
            order = np.random.default_rng(self.seed + self.epoch).permutation(self.n)
        else:
            order = np.arange(self.n)
        if self.drop_last:
            order = order[:self.total_size]
        elif self.total_size > len(order):
            reps = math.ceil((self.total_size - len(order)) / max(len(order), 1))
            order = np.concatenate([order] + [order] * reps)[:self.total_size]
        return order[self.rank:self.total_size:self.num_replicas]

    def __iter__(self):
        return iter(self.indices().tolist())

    def __len__(self):
        return self.num_samples
