"""ShardedIterableDataset: samples/s of the split against iterating the shards directly.

37 shards of long-tail sizes (Pareto, seed 0; 2,000,000 samples in all), ``read(shard)``
yields a shard's samples from a ready Python list: the cheapest read there is, so whatever the
split costs per sample shows in full (a real read decodes, and the split's share shrinks).

- ``shards directly``: ``for shard in order: yield from read(shard)``, every sample once.
- ``ShardedIterableDataset, 1 rank``: the same samples through the dataset (``num_replicas=1``).
- ``..., 8 ranks x 2 workers``: every worker of every rank of W = 8, one after another in one
  process (``iter_worker(k, 2)``): each opens its shards, drawing and dropping the head of the
  first one up to its first sample (``read(shard)`` goes front to back).
- ``..., seekable``: the same with ``seekable=True``: ``read(shard, start)`` starts a list's
  iterator at ``start`` (an O(1) seek, as an index into a tar, a row group or an array gives).

``Msamples/s`` is millions of samples yielded per second of the span; its ratio to the baseline is the split's
cost (goal: >= 0.9). ``count_spread`` (the largest minus the smallest per-rank count) and
``read_twice``/``never_read`` (samples beyond padding) are counted on what was yielded.
The peers' splits (WebDataset, Hugging Face datasets) on the same shards: ``peers_sharded.py``.
"""

from __future__ import annotations

from collections import Counter
from itertools import chain

import numpy as np

from distsampling import ShardedIterableDataset

from ._harness import Comparison

NUM_SHARDS, TOTAL, WORLD, WORKERS = 37, 2_000_000, 8, 2


def shard_sizes(num_shards: int = NUM_SHARDS, total: int = TOTAL) -> list[int]:
    """Long-tail sizes: Pareto(1.2) draws scaled to ``total`` (a few big shards, many small)."""
    draws = np.random.default_rng(0).pareto(1.2, num_shards) + 0.05
    sizes = np.floor(draws / draws.sum() * total).astype(int)
    sizes[np.argmax(sizes)] += total - sizes.sum()
    return sizes.tolist()


class ListReader:
    """``read(shard)``: the shard's samples (global ids) from a list built before the span."""

    def __init__(self, sizes: list[int]) -> None:
        starts = np.cumsum([0, *sizes])
        self.data = [list(range(starts[i], starts[i + 1])) for i in range(len(sizes))]

    def __call__(self, shard: int, start: int = 0):
        it = iter(self.data[shard])
        if start:
            it.__setstate__(start)  # a list iterator's position: it yields from `start` on
        return it


def _figures(per_rank: list[list[int]], total: int, elapsed: float) -> dict[str, float]:
    counts = Counter(x for rank in per_rank for x in rank)
    world = len(per_rank)
    padding = -(-total // world) * world - total
    return {
        "Msamples/s": sum(map(len, per_rank)) / elapsed / 1e6,
        "count_spread": max(map(len, per_rank)) - min(map(len, per_rank)),
        "read_twice": sum(c - 1 for c in counts.values()) - padding,
        "never_read": total - len(counts),
    }


def directly(timer, num_shards: int, total: int) -> dict[str, float]:
    sizes = shard_sizes(num_shards, total)
    read = ListReader(sizes)

    def stream():
        for shard in range(num_shards):
            yield from read(shard)

    timer.start()
    got = list(stream())
    timer.stop()
    return _figures([got], total, timer.t_end - timer.t0)


def ours_one_rank(timer, num_shards: int, total: int) -> dict[str, float]:
    sizes = shard_sizes(num_shards, total)
    ds = ShardedIterableDataset(range(num_shards), sizes, ListReader(sizes), num_replicas=1,
                                rank=0)  # fmt: skip
    timer.start()
    got = list(ds)
    timer.stop()
    return _figures([got], total, timer.t_end - timer.t0)


def ours_ranks_and_workers(timer, num_shards: int, total: int, seekable=False) -> dict[str, float]:
    sizes = shard_sizes(num_shards, total)
    read = ListReader(sizes)
    ranks = [ShardedIterableDataset(range(num_shards), sizes, read, num_replicas=WORLD, rank=r,
                                    seekable=seekable) for r in range(WORLD)]  # fmt: skip
    timer.start()
    # each worker's iterator drained by list() on its own, as the baselines are (a DataLoader
    # worker drains it in C too, batch by batch)
    per_worker = [[list(ds.iter_worker(k, WORKERS)) for k in range(WORKERS)] for ds in ranks]
    timer.stop()
    per_rank = [list(chain.from_iterable(workers)) for workers in per_worker]
    return _figures(per_rank, total, timer.t_end - timer.t0)


def ours_seekable(timer, num_shards: int, total: int) -> dict[str, float]:
    return ours_ranks_and_workers(timer, num_shards, total, seekable=True)


def suite(large: bool) -> list[Comparison]:
    return [
        Comparison(
            title=f"{NUM_SHARDS} long-tail shards, {TOTAL:,} samples, read from ready lists",
            contenders={
                "shards directly": "bench_sharded:directly",
                "ShardedIterableDataset, 1 rank": "bench_sharded:ours_one_rank",
                f"ShardedIterableDataset, {WORLD} ranks x {WORKERS} workers": "bench_sharded:ours_ranks_and_workers",
                f"ShardedIterableDataset, {WORLD} ranks x {WORKERS} workers, seekable": "bench_sharded:ours_seekable",
            },
            baseline="shards directly",
            params={"num_shards": NUM_SHARDS, "total": TOTAL},
            note="samples yielded per second, and what was read twice or never (beyond padding)",
            columns=("Msamples/s", "count_spread", "read_twice", "never_read", "time_s"),
            ratios=("Msamples/s",),
        )
    ]
