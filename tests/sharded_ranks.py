"""What each rank of a real process group runs for tests/test_sharded.py (imported by name)."""

from __future__ import annotations

import os

import torch.distributed as dist
from torch.utils.data import DataLoader

from distsampling import ShardedIterableDataset


class Reader:
    """``read(shard)``: shard ``i`` of ``sizes`` yields the global ids of its samples, in order."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = list(sizes)
        self.starts = [sum(self.sizes[:i]) for i in range(len(self.sizes))]

    def __call__(self, shard: int, start: int = 0):
        """Shard ``shard``'s ids from its sample ``start`` on (a seekable read; 0: the whole)."""
        return iter(range(self.starts[shard] + start, self.starts[shard] + self.sizes[shard]))


def read_through_loaders(sizes: list[int], epochs: int, num_workers: int) -> dict | None:
    """Every epoch through a DataLoader with workers; rank 0 returns what every rank read."""
    ds = ShardedIterableDataset(list(range(len(sizes))), sizes, Reader(sizes), seed=5)
    mine = []
    for epoch in range(epochs):
        ds.set_epoch(epoch)
        loader = DataLoader(ds, batch_size=4, num_workers=num_workers)
        mine.append([x for batch in loader for x in batch.tolist()])
    where = {"rank": dist.get_rank(), "local_rank": int(os.environ["LOCAL_RANK"]),
             "len": len(ds), "epochs": mine}  # fmt: skip
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, where)  # a real gather: what every rank read
    return {"ranks": gathered} if dist.get_rank() == 0 else None
