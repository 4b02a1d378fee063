"""What each rank of a real process group runs for tests/test_sharded_mixture.py (imported by name)."""

from __future__ import annotations

import os

import torch.distributed as dist
from torch.utils.data import DataLoader

from distsampling import RemoteSource, ShardedMixtureDataset


class RemoteShards:
    """``read(shard, start)``: the rows of file ``shard`` of a remote (an S3 prefix of ``.npy``
    files) from ``start`` on, as tuples; the RemoteSource opens in the process that reads."""

    def __init__(self, url: str, options: dict) -> None:
        self.url, self.options, self._remote = url, options, None

    def __getstate__(self) -> dict:
        return {"url": self.url, "options": self.options, "_remote": None}

    def __call__(self, shard: int, start: int = 0):
        if self._remote is None:
            self._remote = RemoteSource(self.url, storage_options=self.options)
        remote = self._remote
        return (tuple(remote.read(shard, r).tolist()) for r in range(start, remote.rows(shard)))


def remote_source(url: str, options: dict) -> tuple:
    """``(shards, sizes, read)`` of a remote: its files, their rows, a RemoteShards reader."""
    listing = RemoteSource(url, storage_options=options)
    return (
        list(range(len(listing.files))),
        [listing.rows(k) for k in range(len(listing.files))],
        RemoteShards(url, options),
    )


def read_remote_mixture(
    urls: list[str], options: dict, weights: list, num_workers: int
) -> dict | None:
    """An epoch of a mixture of remotes through a DataLoader; rank 0 returns every rank's."""
    sources = [remote_source(url, options) for url in urls]
    ds = ShardedMixtureDataset(sources, weights, 4, seed=3, seekable=True, with_source=True,
                               num_workers=num_workers)  # fmt: skip
    ds.set_epoch(1)
    mine = []
    for ks, rows in DataLoader(ds, batch_size=4, num_workers=num_workers):
        mine += list(zip(ks.tolist(), zip(*(c.tolist() for c in rows), strict=True), strict=True))
    where = {"rank": dist.get_rank(), "local_rank": int(os.environ["LOCAL_RANK"]), "read": mine}
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, where)  # a real gather: what every rank read
    return {"ranks": gathered} if dist.get_rank() == 0 else None
