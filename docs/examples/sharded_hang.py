"""Unequal shards on 2 ranks: a naive split hangs DDP's last all-reduce; the sharded dataset does not.

Run it: it starts 2 real gloo ranks twice (distsampling.run_world). Each step all-reduces a
tensor, as DDP's backward does, over a group whose timeout is 5 seconds (the default is 30
minutes: a real job just hangs).
"""

import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from distsampling import ShardedIterableDataset, run_world

SIZES = [30, 2, 25, 3, 1, 19]  # samples per shard: 80, of which rank 0 reads 56 naively


def read(shard: int):
    """Shard ``shard``'s samples, in order (here: ids; in a real job, decoded records)."""
    start = sum(SIZES[:shard])
    yield from range(start, start + SIZES[shard])


class NaiveShards(IterableDataset):
    """Rank r reads shards r, r + W, ..., split again over its workers: the usual first try."""

    def __iter__(self):
        rank, world = dist.get_rank(), dist.get_world_size()
        info = get_worker_info()  # each worker its own shards, or every worker reads them all
        mine = list(range(rank, len(SIZES), world))[info.id :: info.num_workers]
        for shard in mine:
            yield from read(shard)


def steps(dataset: IterableDataset) -> str:
    """One rank's epoch: an all-reduce per batch, with a 5-second timeout."""
    group = dist.new_group(timeout=timedelta(seconds=5))
    done = 0
    try:
        for _batch in DataLoader(dataset, batch_size=8, num_workers=2):
            dist.all_reduce(torch.ones(1), group=group)  # DDP's gradient all-reduce
            done += 1
    except RuntimeError:  # gloo's timeout: the other rank never joins this all-reduce
        return f"{done} steps, then the all-reduce timed out"
    return f"{done} steps, finished"


def naive_rank() -> str:
    return steps(NaiveShards())


def sharded_rank() -> str:
    shards = list(range(len(SIZES)))  # paths or URLs in a real job
    return steps(ShardedIterableDataset(shards, SIZES, read, seed=0))  # rank and W from dist


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    for name in ("naive_rank", "sharded_rank"):
        results = run_world(f"sharded_hang:{name}", 2, timeout=120, pythonpath=[here])
        for rank, result in enumerate(results):
            print(f"{name}, rank {rank}: {result}")
