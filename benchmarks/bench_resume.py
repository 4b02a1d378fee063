"""Time to resume at the middle of an epoch, N = 1e7 (1e8 with --large), one rank of one.

Three ways to continue an interrupted epoch at sample N/2 and get the next index:

- replay: iterate the sampler from the start and discard the first half (what a loop without
  sampler state does, and torchdata's fallback for a sampler without state_dict);
- torchdata's ``StatefulDistributedSampler.load_state_dict`` (torch's sampler, then an islice
  over the indices already read);
- ``distsampling.ResumableDistributedSampler.load_state_dict`` (a skip: the rest is sliced as a tensor),
  next to the first index of a fresh epoch: a resume should cost what starting an epoch costs.

``time_s`` is the whole span of ``REPS`` resumes in one process, each from a fresh sampler;
``each_min_s`` / ``each_med_s`` / ``each_max_s`` are the spread of a single resume.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from itertools import islice

from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler

from distsampling import DistributedSampler, ResumableDistributedSampler

from ._harness import Comparison

REPS, SEED, EPOCH = 3, 0, 1


def _spread(timer, resume: Callable[[], Iterator[int]]) -> dict[str, float]:
    each = []
    timer.start()
    for _ in range(REPS):
        t0 = time.perf_counter()
        next(resume())  # the first index after the resume point
        each.append(time.perf_counter() - t0)
    timer.stop()
    return {"each_min_s": min(each), "each_med_s": statistics.median(each), "each_max_s": max(each)}


def replay(timer, n: int) -> dict[str, float]:
    def resume() -> Iterator[int]:
        s = DistributedSampler(range(n), num_replicas=1, rank=0, seed=SEED)
        s.set_epoch(EPOCH)
        it = iter(s)
        for _ in islice(it, n // 2):  # read the first half again, and throw it away
            pass
        return it

    return _spread(timer, resume)


def torchdata(timer, n: int) -> dict[str, float]:
    def resume() -> Iterator[int]:
        s = StatefulDistributedSampler(range(n), num_replicas=1, rank=0, seed=SEED)
        s.set_epoch(EPOCH)
        s.load_state_dict({"yielded": n // 2})
        return iter(s)

    return _spread(timer, resume)


def ours(timer, n: int) -> dict[str, float]:
    saved = ResumableDistributedSampler(range(n), num_replicas=1, rank=0, seed=SEED).state_dict()
    saved.update(epoch=EPOCH, position=n // 2)  # as written after half of epoch 1

    def resume() -> Iterator[int]:
        s = ResumableDistributedSampler(range(n), num_replicas=1, rank=0, seed=SEED)
        s.load_state_dict(saved)
        return iter(s)

    return _spread(timer, resume)


def start(timer, n: int) -> dict[str, float]:
    def begin() -> Iterator[int]:  # not a resume: the first index of a fresh epoch
        s = DistributedSampler(range(n), num_replicas=1, rank=0, seed=SEED)
        s.set_epoch(EPOCH)
        return iter(s)

    return _spread(timer, begin)


def suite(large: bool) -> list[Comparison]:
    return [
        Comparison(
            title=f"Resume at the middle of an epoch, N={n:.0e}, one rank: time to the next index",
            contenders={
                "replay (iterate and discard)": "bench_resume:replay",
                "torchdata StatefulDistributedSampler": "bench_resume:torchdata",
                "distsampling load_state_dict": "bench_resume:ours",
                "distsampling, start of an epoch (no resume)": "bench_resume:start",
            },
            baseline="replay (iterate and discard)",
            params={"n": n},
            note=f"{REPS} resumes per process",
        )
        for n in [10**7] + ([10**8] if large else [])
    ]
