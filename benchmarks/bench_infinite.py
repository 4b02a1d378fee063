"""InfiniteSampler vs the original's algorithm (detectron2's TrainingSampler, mmengine's
InfiniteSampler), run the way it is written there: a generator that yields
``randperm(N).tolist()`` pass after pass, sliced per rank by ``itertools.islice(stream, rank,
None, W)`` (which steps through all W ranks' indices to keep one).

Per index: rank 0 of 8 reads three passes' worth of its stream, timed per repeat inside one
process (5 repeats; ``spread_%`` is (max - min) / median of them). Resume: a rank reads its
next index after ``k`` passes, from a saved state (ours) or by replaying the stream (theirs).
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import islice

import torch

from distsampling import InfiniteSampler

from ._harness import Comparison

WORLD = 8


def per_index(timer, make: Callable[[], Iterable[int]], count: int, repeats: int = 5) -> dict:
    """Time reading ``count`` indices from ``iter(make())``, ``repeats`` times in this process
    after a short warm-up: the median time per index (us) and the spread of the repeats, their
    (max - min) as a % of the median."""
    torch.set_num_threads(1)  # small tensors: the thread pool's waits would dominate
    deque(islice(iter(make()), min(count, 10_000)), maxlen=0)  # warm up (first calls, caches)
    times = []
    timer.start()
    for _ in range(repeats):
        t0 = time.perf_counter()
        deque(islice(iter(make()), count), maxlen=0)  # consume in C: the sampler is timed
        times.append((time.perf_counter() - t0) / count)
    timer.stop()
    median = statistics.median(times)
    return {"per_index_us": median * 1e6, "spread_%": (max(times) - min(times)) / median * 100}


def original(n: int, rank: int, world: int, seed: int) -> Iterator[int]:
    """The original's structure: an endless generator of passes, sliced per rank."""

    def infinite_indices() -> Iterator[int]:
        g = torch.Generator()
        g.manual_seed(seed)
        while True:
            yield from torch.randperm(n, generator=g).tolist()

    yield from islice(infinite_indices(), rank, None, world)


def ours(timer, n: int) -> dict:
    return per_index(timer, lambda: InfiniteSampler(range(n), WORLD, 0, seed=0), 3 * n // WORLD)


def theirs(timer, n: int) -> dict:
    return per_index(timer, lambda: original(n, 0, WORLD, 0), 3 * n // WORLD)


def ours_resume_saved(timer, n: int, passes: int) -> None:
    s = InfiniteSampler(range(n), WORLD, 0, seed=0)
    deque(islice(s, passes * n // WORLD), maxlen=0)  # a run that saved its state at pass k
    state = s.state_dict()
    resumed = InfiniteSampler(range(n), WORLD, 0, seed=0)
    timer.start()
    resumed.load_state_dict(state)
    next(iter(resumed))
    timer.stop()


def theirs_resume(timer, n: int, passes: int) -> None:
    timer.start()
    next(islice(original(n, 0, WORLD, 0), passes * n // WORLD, None))  # replay k passes
    timer.stop()


def suite(large: bool) -> list[Comparison]:
    sizes = [10**5, 10**6] + ([10**7] if large else [])
    per_index_cases = [
        Comparison(
            title=f"InfiniteSampler, N={n:.0e}, world 8, rank 0 reads 3 passes' worth",
            contenders={
                "original (islice of a generator)": "bench_infinite:theirs",
                "distsampling": "bench_infinite:ours",
            },
            baseline="original (islice of a generator)",
            params={"n": n},
            note="per_index_us: median of 5 in-process repeats; spread_%: (max - min) / median of the repeats",
        )
        for n in sizes
    ]
    resume = Comparison(
        title="Resume an InfiniteSampler 50 passes in, N=1e5, world 8: time to the next index",
        contenders={
            "original (replay the stream)": "bench_infinite:theirs_resume",
            "distsampling (state_dict)": "bench_infinite:ours_resume_saved",
        },
        baseline="original (replay the stream)",
        params={"n": 10**5, "passes": 50},
    )
    return [*per_index_cases, resume]
