"""Resuming an iteration-based run at iteration k: ours (skip index work) vs replaying k batches.

The pipeline is rank 0 of 8 over a COCO-sized dataset (118,287 images, 30% portrait), batches of
2 images per rank, with and without aspect grouping, resumed near the end of a 90k-iteration
schedule (about 12 passes in). Time is from building the resumed batch sampler to its first
batch: no image is loaded by either contender, so this is index work only; replaying through a
``DataLoader`` would load k batches of images on top.
"""

from __future__ import annotations

from itertools import islice

import torch

from distsampling import IterationBasedBatchSampler, make_batch_data_sampler, make_data_sampler

from ._harness import Comparison


def _batch_sampler(n: int, grouping: bool, world: int = 8, batch_size: int = 2):
    # tensors of ~15k indices gain nothing from intra-op threads, and on a shared machine the
    # thread pool's waits dominate the figures: one thread for both contenders
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    portrait = torch.rand(n, generator=g) < 0.3  # (n,)
    ratios = torch.where(portrait, 4 / 3, 3 / 4)  # (n,) height / width
    sampler = make_data_sampler(ratios, True, True, num_replicas=world, rank=0)
    return make_batch_data_sampler(ratios, sampler, [1.0] if grouping else None, batch_size)


def _first(timer, batches) -> None:
    next(iter(batches))
    timer.first()
    timer.stop()


def ours(timer, n: int, grouping: bool, total: int, k: int) -> None:
    batch_sampler = _batch_sampler(n, grouping)
    timer.start()
    _first(timer, IterationBasedBatchSampler(batch_sampler, total, start_iter=k))


def replay(timer, n: int, grouping: bool, total: int, k: int) -> None:
    batch_sampler = _batch_sampler(n, grouping)
    timer.start()
    _first(timer, islice(IterationBasedBatchSampler(batch_sampler, total), k, None))


def suite(large: bool) -> list[Comparison]:
    cases = [(118_287, 90_000, 89_999), (118_287, 90_000, 10_000)]
    if large:
        cases.append((10**6, 500_000, 499_999))
    return [
        Comparison(
            title=f"resume at k={k:,} of {total:,}, N={n:,}, world 8, batch 2, "
            + ("aspect grouping" if grouping else "no grouping"),
            contenders={
                "replay k batches": "bench_pipeline:replay",
                "distsampling": "bench_pipeline:ours",
            },
            baseline="replay k batches",
            params={"n": n, "grouping": grouping, "total": total, "k": k},
        )
        for grouping in (True, False)
        for n, total, k in cases
    ]
